package apply

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestReleases: only a StatefulSet deleted with its dependents has its
// claims released first; an orphaning delete leaves the claims to the
// garbage collector, which takes the owner references off them itself.
func TestReleases(t *testing.T) {
	sts := capstanv1.ObjectRef{APIVersion: "apps/v1", Kind: "StatefulSet", Namespace: "apps", Name: "db"}
	for _, tc := range []struct {
		ref         capstanv1.ObjectRef
		propagation metav1.DeletionPropagation
		want        bool
	}{
		{sts, metav1.DeletePropagationBackground, true},
		{sts, metav1.DeletePropagationForeground, true},
		{sts, metav1.DeletePropagationOrphan, false},
		{capstanv1.ObjectRef{APIVersion: "apps/v1beta2", Kind: "StatefulSet", Name: "db"}, metav1.DeletePropagationBackground, true},
		{capstanv1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, metav1.DeletePropagationBackground, false},
		{capstanv1.ObjectRef{APIVersion: "example.com/v1", Kind: "StatefulSet", Name: "db"}, metav1.DeletePropagationBackground, false},
	} {
		if got := releases(tc.ref, tc.propagation); got != tc.want {
			t.Errorf("%s %s: %v, want %v", tc.ref.APIVersion, tc.ref.Kind, got, tc.want)
		}
	}
}

// TestDeletesClaims reads a StatefulSet's claim retention policy: only
// whenDeleted: Delete takes the claims with it.
func TestDeletesClaims(t *testing.T) {
	set := func(apiVersion, kind string, policy map[string]any) *unstructured.Unstructured {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "spec": map[string]any{}}}
		if policy != nil {
			obj.Object["spec"].(map[string]any)["persistentVolumeClaimRetentionPolicy"] = policy
		}
		return obj
	}
	for _, tc := range []struct {
		obj  *unstructured.Unstructured
		want bool
	}{
		{set("apps/v1", "StatefulSet", map[string]any{"whenDeleted": "Delete", "whenScaled": "Retain"}), true},
		{set("apps/v1", "StatefulSet", map[string]any{"whenDeleted": "Retain", "whenScaled": "Delete"}), false},
		{set("apps/v1", "StatefulSet", nil), false},
		{set("example.com/v1", "StatefulSet", map[string]any{"whenDeleted": "Delete"}), false},
		{nil, false},
	} {
		if got := DeletesClaims(tc.obj); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.obj, got, tc.want)
		}
	}
}

// TestReleaseClaimsListsNothingWithoutTemplates: a StatefulSet with no
// volumeClaimTemplates owns no claim (its controller makes claims only from
// them, and no update adds one), so its delete lists no claim: a plain
// StatefulSet's uninstall costs one read, not a list of the namespace.
func TestReleaseClaimsListsNothingWithoutTemplates(t *testing.T) {
	set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db", UID: "u1"},
		Spec: appsv1.StatefulSetSpec{PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType}}}
	lists := 0
	c := interceptor.NewClient(fake.NewClientBuilder().WithObjects(set).Build(), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lists++
			return c.List(ctx, list, opts...)
		},
	})
	a := &Applier{Client: c}
	ref := capstanv1.ObjectRef{APIVersion: "apps/v1", Kind: "StatefulSet", Namespace: "apps", Name: "db"}
	changed, err := a.ReleaseClaims(context.Background(), ref, set)
	if err != nil || changed || lists != 0 {
		t.Fatalf("changed %v, %d lists, %v; want nothing changed and nothing listed", changed, lists, err)
	}
}
