package apply

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
		{"an immutable Secret's data", invalid(field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set")), true},
		{"a value in the words of one", invalid(field.Invalid(field.NewPath("spec", "host"), "field is immutable", "must be a DNS name")), false},
		{"a rule's own words", invalid(field.Invalid(field.NewPath("spec", "size"), 3, "size is immutable")), false},
		{"a cause with no field", func() error {
			err := invalid(selector).(*apierrors.StatusError)
			err.ErrStatus.Details.Causes[0].Field = ""
			return err
		}(), false},
		{"no cause", apierrors.NewInvalid(deployments, "web", nil), false},
		{"an admission policy", func() error {
			err := invalid(selector).(*apierrors.StatusError)
			err.ErrStatus.Message = "ValidatingAdmissionPolicy 'frozen' with binding 'frozen' denied request: " + err.ErrStatus.Message
			return err
		}(), false},
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

// TestCannotRecreate: what is never deleted to make a change, and why.
func TestCannotRecreate(t *testing.T) {
	object := func(apiVersion, kind string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"name": "x", "namespace": "apps"}, "spec": spec}}
	}
	selector := func(app string) map[string]any { return map[string]any{"matchLabels": map[string]any{"app": app}} }
	sts := func(app, whenDeleted string) *unstructured.Unstructured {
		spec := map[string]any{"selector": selector(app)}
		if whenDeleted != "" {
			spec["persistentVolumeClaimRetentionPolicy"] = map[string]any{"whenDeleted": whenDeleted}
		}
		return object("apps/v1", "StatefulSet", spec)
	}
	cases := []struct {
		name       string
		obj, live  *unstructured.Unstructured
		wantReason string
	}{
		{"a Deployment", object("apps/v1", "Deployment", nil), object("apps/v1", "Deployment", nil), ""},
		{"a claim", object("v1", "PersistentVolumeClaim", nil), object("v1", "PersistentVolumeClaim", nil), "never deletes a PersistentVolumeClaim"},
		{"a custom resource", object("example.com/v1", "Database", nil), object("example.com/v1", "Database", nil), "does not delete a custom resource"},
		{"what its chart keeps", object("v1", "Secret", nil), func() *unstructured.Unstructured {
			s := object("v1", "Secret", nil)
			s.SetAnnotations(map[string]string{ResourcePolicyAnnotation: "keep"})
			return s
		}(), "marked helm.sh/resource-policy: keep"},
		{"what Argo CD keeps from an uninstall only", object("v1", "Secret", nil), func() *unstructured.Unstructured {
			s := object("v1", "Secret", nil)
			s.SetAnnotations(map[string]string{ArgoSyncOptionsAnnotation: "ServerSideApply=true, Delete=false"})
			return s
		}(), "marked argocd.argoproj.io/sync-options: Delete=false"},
		{"a StatefulSet that keeps its selector, whose claims go with it", sts("db", ""), sts("db", "Delete"), ""},
		{"a StatefulSet whose selector changes, whose claims stay", sts("db2", ""), sts("db", "Retain"), ""},
		{"a StatefulSet whose selector changes, whose claims go with it", sts("db2", ""), sts("db", "Delete"), "would delete its claims"},
	}
	for _, tc := range cases {
		got := CannotRecreate(tc.obj, tc.live)
		if (tc.wantReason == "") != (got == "") || !strings.Contains(got, tc.wantReason) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.wantReason)
		}
	}
}
