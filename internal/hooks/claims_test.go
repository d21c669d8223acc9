package hooks_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/render"
)

// TestBeforeHookCreationKeepsStatefulSetClaims runs a hook StatefulSet
// whose controller deletes its claims with it (whenDeleted: Delete)
// twice, as an upgrade runs it again: before-hook-creation deletes the
// first one, but none of its claims, which the new one takes up as they
// are. Capstan never deletes a claim, through an owner neither.
func TestBeforeHookCreationKeepsStatefulSetClaims(t *testing.T) {
	const manifest = `apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: seed
spec:
  replicas: 1
  selector:
    matchLabels: {app: seed}
  persistentVolumeClaimRetentionPolicy: {whenDeleted: Delete, whenScaled: Retain}
  template:
    metadata:
      labels: {app: seed}
    spec:
      containers: [{name: seed, image: registry.example/seed:1.0}]
  volumeClaimTemplates:
    - metadata: {name: data}
      spec:
        accessModes: [ReadWriteOnce]
        resources: {requests: {storage: 1Mi}}
`
	ctx := context.Background()
	f := newFixture(t)
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
		t.Fatal(err)
	}
	obj.SetNamespace(f.ns)
	h := render.Hook{Object: obj, Events: []string{"pre-upgrade"}, DeletePolicies: []string{hooks.BeforeHookCreation}}
	run := func() {
		t.Helper()
		if err := f.runner.Run(ctx, hooks.Request{Applier: f.applier, Addon: f.addon, Event: "pre-upgrade",
			Hooks: []render.Hook{h}, Timeout: minute, Keep: apply.Recreating}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func() *corev1.PersistentVolumeClaim {
		t.Helper()
		c := &corev1.PersistentVolumeClaim{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "data-seed-0"}, c); err != nil {
			return nil
		}
		return c
	}
	setUID := func() types.UID {
		t.Helper()
		live := &unstructured.Unstructured{}
		live.SetAPIVersion("apps/v1")
		live.SetKind("StatefulSet")
		if err := admin.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "seed"}, live); err != nil {
			t.Fatal(err)
		}
		return live.GetUID()
	}
	ownedBy := func(c *corev1.PersistentVolumeClaim, uid types.UID) bool {
		return slices.ContainsFunc(c.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == uid })
	}

	run()
	first := setUID()
	eventually(t, 60*time.Second, "the claim owned by the StatefulSet", func() bool {
		c := claim()
		return c != nil && ownedBy(c, first)
	})
	before := claim().UID
	run()
	if setUID() == first {
		t.Fatal("before-hook-creation did not create the StatefulSet anew")
	}
	time.Sleep(5 * time.Second)
	switch c := claim(); {
	case c == nil || c.UID != before || c.DeletionTimestamp != nil:
		t.Fatal("the first StatefulSet's delete took its claim with it")
	case ownedBy(c, first):
		t.Fatalf("the claim is still owned by the deleted StatefulSet: %v", c.OwnerReferences)
	}
}
