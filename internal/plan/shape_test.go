package plan

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestShapeOfIgnoresStatusWrites: an object with a status and no
// generation records its shape when verified; a status write, which moves
// its resourceVersion and managedFields (and, read as autoscaling/v1, the
// annotations that mirror an autoscaler's status), keeps the shape; an
// edit of its spec, labels or annotations does not. An object without a
// status, or with a generation, records none.
func TestShapeOfIgnoresStatusWrites(t *testing.T) {
	svc := func(mutate func(*unstructured.Unstructured)) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"namespace": "apps", "name": "web", "resourceVersion": "10",
				"labels": map[string]any{"app": "web"}, "annotations": map[string]any{"team": "a"}},
			"spec":   map[string]any{"type": "LoadBalancer", "externalTrafficPolicy": "Cluster"},
			"status": map[string]any{"loadBalancer": map[string]any{}},
		}}
		if mutate != nil {
			mutate(u)
		}
		return u
	}
	v := VerifiedAt("d", svc(nil), time.Now())
	if v.Shape == "" {
		t.Fatal("a Service was verified with no shape")
	}
	for name, c := range map[string]struct {
		mutate func(*unstructured.Unstructured)
		same   bool
	}{
		"status written": {func(u *unstructured.Unstructured) {
			u.SetResourceVersion("11")
			u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "lb", Subresource: "status"}})
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"ip": "192.0.2.1"}}, "status", "loadBalancer", "ingress")
		}, true},
		"autoscaling/v1 status annotations": {func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{"team": "a", "autoscaling.alpha.kubernetes.io/conditions": "[]"})
		}, true},
		"spec edited": {func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "Local", "spec", "externalTrafficPolicy")
		}, false},
		"label edited":      {func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"app": "other"}) }, false},
		"annotation edited": {func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{"team": "b"}) }, false},
	} {
		if got := ShapeOf(svc(c.mutate)) == v.Shape; got != c.same {
			t.Errorf("%s: same shape %v, want %v", name, got, c.same)
		}
	}
	if s := VerifiedAt("d", svc(func(u *unstructured.Unstructured) { u.SetGeneration(3) }), time.Now()).Shape; s != "" {
		t.Error("an object with a generation recorded a shape")
	}
	if s := VerifiedAt("d", svc(func(u *unstructured.Unstructured) { delete(u.Object, "status") }), time.Now()).Shape; s != "" {
		t.Error("an object without a status recorded a shape")
	}
}
