package plan

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestRedactAPIErrorSaysHowToCreateTheNamespace checks that an object
// refused because its namespace is missing says what to do, for a Secret
// as for any other kind.
func TestRedactAPIErrorSaysHowToCreateTheNamespace(t *testing.T) {
	err := apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "apps")
	for _, kind := range []string{"ConfigMap", "Secret"} {
		obj := &unstructured.Unstructured{}
		obj.SetKind(kind)
		got := RedactAPIError(obj, err)
		if !strings.Contains(got, "namespace apps does not exist") || !strings.Contains(got, "spec.createNamespace") {
			t.Errorf("%s: %q does not say which namespace is missing and how to create it", kind, got)
		}
	}
	other := apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "x")
	if got := RedactAPIError(&unstructured.Unstructured{}, other); strings.Contains(got, "createNamespace") {
		t.Errorf("a missing ConfigMap is not a missing namespace: %q", got)
	}
}
