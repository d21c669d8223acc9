package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// claimsChart is a chart with a StatefulSet (while .Values.db) of two
// replicas (.Values.replicas), whose claims its controller is to delete
// with it (persistentVolumeClaimRetentionPolicy.whenDeleted: Delete, or
// .Values.whenDeleted), with a selector that .Values.track changes, and a
// ConfigMap, so that the render without the StatefulSet is no empty one.
var claimsChart = map[string]string{
	"templates/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata: {a: b}\n",
	"templates/db.yaml": `{{ if .Values.db }}apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  replicas: {{ .Values.replicas | default 2 }}
  selector:
    matchLabels: {app: db{{ with .Values.track }}, track: {{ . }}{{ end }}}
  persistentVolumeClaimRetentionPolicy:
    whenDeleted: {{ .Values.whenDeleted | default "Delete" }}
    whenScaled: Retain
  template:
    metadata:
      labels: {app: db{{ with .Values.track }}, track: {{ . }}{{ end }}}
    spec:
      containers:
        - name: db
          image: registry.example/db:1.0
  volumeClaimTemplates:
    - metadata:
        name: data
      spec:
        accessModes: [ReadWriteOnce]
        storageClassName: ""
        resources:
          requests:
            storage: 1Mi
{{ end }}`,
}

// claimsApp installs claimsChart into ns, with a volume bound ahead to
// each of the StatefulSet's claims (so that its pods are scheduled and
// run), and waits until both claims exist, owned by the StatefulSet.
func claimsApp(t *testing.T, ns, name string, opts ...addonOpt) (*capstanv1.Addon, types.UID) {
	t.Helper()
	ctx := context.Background()
	for i := range 2 {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-data-%d", ns, i)},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              "",
				ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: fmt.Sprintf("data-db-%d", i)},
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + ns}},
			},
		}
		if err := admin.Create(ctx, pv); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), pv) })
	}
	url, _ := charts.publish(t, chart{name: "claimsapp", version: "1.0.0", files: claimsChart})
	a := create(t, newAddon(controllerNS, name, url, append([]addonOpt{withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Values = jsonValues("db: true")
	})}, opts...)...))
	waitPhase(t, a, capstanv1.PhaseSynced)
	set := live(t, "apps/v1", "StatefulSet", ns, "db")
	if set == nil {
		t.Fatal("the StatefulSet was not applied")
	}
	eventually(t, 60*time.Second, "both claims owned by the StatefulSet", func() bool {
		claims := claimsOf(t, ns)
		return len(claims) == 2 && !slices.ContainsFunc(claims, func(c corev1.PersistentVolumeClaim) bool { return !ownedBy(c, set.GetUID()) })
	})
	return a, set.GetUID()
}

func claimsOf(t *testing.T, ns string) []corev1.PersistentVolumeClaim {
	t.Helper()
	var list corev1.PersistentVolumeClaimList
	if err := admin.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func ownedBy(c corev1.PersistentVolumeClaim, uid types.UID) bool {
	return slices.ContainsFunc(c.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == uid })
}

// assertClaimsKept waits until the StatefulSet db is gone, gives the
// garbage collector time to delete what it owned, and checks that both
// claims are still there, not being deleted, and owned by it no more.
func assertClaimsKept(t *testing.T, ns string, uid types.UID) {
	t.Helper()
	eventually(t, 60*time.Second, "the StatefulSet to go", func() bool {
		err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "db"}, &appsv1.StatefulSet{})
		return apierrors.IsNotFound(err)
	})
	eventually(t, 60*time.Second, "the StatefulSet's pods to go", func() bool {
		var pods corev1.PodList
		if err := admin.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{"app": "db"}); err != nil {
			t.Fatal(err)
		}
		return len(pods.Items) == 0
	})
	time.Sleep(5 * time.Second)
	claims := claimsOf(t, ns)
	if len(claims) != 2 {
		t.Fatalf("the StatefulSet's delete took its claims with it: %d of 2 are left", len(claims))
	}
	for _, c := range claims {
		if c.DeletionTimestamp != nil || ownedBy(c, uid) {
			t.Fatalf("claim %s is being deleted (%v) or still owned by the deleted StatefulSet: %v", c.Name, c.DeletionTimestamp, c.OwnerReferences)
		}
	}
}

// TestPruneKeepsStatefulSetClaims: a StatefulSet whose claims its
// controller deletes with it (whenDeleted: Delete) leaves the render. The
// plan says that its claims stay, and the prune deletes the StatefulSet
// and its pods, but no claim: Capstan never deletes a claim, and a
// StatefulSet's delete would have the garbage collector delete them all.
func TestPruneKeepsStatefulSetClaims(t *testing.T) {
	ns := newNamespace(t)
	a, uid := claimsApp(t, ns, "claims-"+ns[len(ns)-5:], withSpec(func(s *capstanv1.AddonSpec) { s.Prune = true }))

	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.ManualSync = true
		cur.Spec.Values = jsonValues("db: false")
	})
	held := waitFor(t, a, 60*time.Second, "the prune held for approval", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseOutOfSync && cur.Status.ObservedGeneration == cur.Generation
	})
	said := slices.ContainsFunc(held.Status.Plan.Notices, func(n capstanv1.Notice) bool {
		return strings.HasPrefix(n.Message, "1 StatefulSet(s) that the prune deletes would have their PersistentVolumeClaims deleted with them") &&
			strings.HasSuffix(n.Message, "the claims and their volumes stay: StatefulSet "+ns+"/db")
	})
	if !said {
		t.Errorf("the plan should say that the StatefulSet's claims stay: %+v", held.Status.Plan.Notices)
	}
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.ManualSync = false })
	assertClaimsKept(t, ns, uid)
	waitPhase(t, a, capstanv1.PhaseSynced)
}

// TestUninstallKeepsStatefulSetClaims: the uninstall of an add-on whose
// StatefulSet's controller deletes its claims with it (whenDeleted:
// Delete) deletes the StatefulSet, but none of its claims. One claim is
// of an ordinal scaled away (by a new value), whose owner reference the
// StatefulSet controller never takes off, whatever the policy says: it
// stays too.
func TestUninstallKeepsStatefulSetClaims(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	a, uid := claimsApp(t, ns, "unclaims-"+ns[len(ns)-5:], withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = capstanv1.DeletionDelete }))
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("db: true\nreplicas: 1") })
	eventually(t, 60*time.Second, "the pod of the ordinal scaled away to go", func() bool {
		err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-1"}, &corev1.Pod{})
		return apierrors.IsNotFound(err)
	})
	for _, c := range claimsOf(t, ns) {
		if c.Name == "data-db-1" && !ownedBy(c, uid) {
			t.Fatalf("the claim of the ordinal scaled away should still be owned by the StatefulSet: %v", c.OwnerReferences)
		}
	}
	deleteAddon(t, a)
	assertClaimsKept(t, ns, uid)
}

// TestRecreateKeepsStatefulSetClaims: a StatefulSet whose selector changes
// is deleted and created anew with spec.recreate. Its policy is Retain
// by then, but the claim of an ordinal scaled away while it was Delete is
// still owned by it (the StatefulSet controller releases only the claims
// of its running pods): the delete releases that claim too, and both
// claims outlive the old StatefulSet.
func TestRecreateKeepsStatefulSetClaims(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	a, uid := claimsApp(t, ns, "reclaims-"+ns[len(ns)-5:], withSpec(func(s *capstanv1.AddonSpec) { s.Recreate = true }))
	uids := map[string]types.UID{}
	for _, c := range claimsOf(t, ns) {
		uids[c.Name] = c.UID
	}
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("db: true\nreplicas: 1") })
	eventually(t, 60*time.Second, "the pod of the ordinal scaled away to go", func() bool {
		err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-1"}, &corev1.Pod{})
		return apierrors.IsNotFound(err)
	})
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("db: true\nreplicas: 1\nwhenDeleted: Retain") })
	eventually(t, 60*time.Second, "the claim of the running pod released, the other still owned", func() bool {
		owned := map[string]bool{}
		for _, c := range claimsOf(t, ns) {
			owned[c.Name] = ownedBy(c, uid)
		}
		return len(owned) == 2 && !owned["data-db-0"] && owned["data-db-1"]
	})
	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.Values = jsonValues("db: true\nreplicas: 1\nwhenDeleted: Retain\ntrack: b")
	})
	eventually(t, 90*time.Second, "the StatefulSet created anew", func() bool {
		set := live(t, "apps/v1", "StatefulSet", ns, "db")
		return set != nil && set.GetUID() != uid
	})
	time.Sleep(5 * time.Second)
	claims := claimsOf(t, ns)
	if len(claims) != 2 {
		t.Fatalf("the old StatefulSet's delete took a claim with it: %d of 2 are left", len(claims))
	}
	for _, c := range claims {
		if c.UID != uids[c.Name] || c.DeletionTimestamp != nil || ownedBy(c, uid) {
			t.Fatalf("claim %s was deleted (made anew: %v, being deleted: %v) or is still owned by the old StatefulSet: %v",
				c.Name, c.UID != uids[c.Name], c.DeletionTimestamp != nil, c.OwnerReferences)
		}
	}
}
