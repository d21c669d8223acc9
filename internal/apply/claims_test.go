package apply

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
