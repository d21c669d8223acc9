package apply

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestRefusedInPlace: only a refusal whose every cause is a change the API
// server makes to new objects alone lets spec.recreate delete an object;
// one with any other cause would be refused again once it is created.
func TestRefusedInPlace(t *testing.T) {
	deployments := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	invalid := func(errs ...*field.Error) error { return apierrors.NewInvalid(deployments, "web", errs) }
	selector := field.Invalid(field.NewPath("spec", "selector"), "x", "field is immutable")
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"an immutable field", invalid(selector), true},
		{"a Service's clusterIP", invalid(field.Invalid(field.NewPath("spec", "clusterIPs").Index(0), "10.0.0.9", "may not change once set")), true},
		{"a RoleBinding's roleRef", invalid(field.Invalid(field.NewPath("roleRef"), "x", "cannot change roleRef")), true},
		{"a StatefulSet's spec", invalid(field.Forbidden(field.NewPath("spec"), "updates to statefulset spec for fields other than 'replicas', 'template' are forbidden")), true},
		{"a CEL rule", invalid(field.Invalid(field.NewPath("spec", "size"), 3, "size is immutable")), true},
		{"and a value that is wrong", invalid(selector, field.Invalid(field.NewPath("spec", "replicas"), -1, "must be greater than or equal to 0")), false},
		{"a value that is wrong", invalid(field.Required(field.NewPath("spec", "template"), "")), false},
		{"a conflict", apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("immutable")), false},
		{"not from the API server", errors.New("field is immutable"), false},
	}
	for _, tc := range cases {
		if got := RefusedInPlace(tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v (%v)", tc.name, got, tc.want, tc.err)
		}
	}
}
