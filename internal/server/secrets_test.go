package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/cli"
	"capstan.dev/capstan/internal/values"
)

// valuesSecrets lists the names of an add-on's values Secrets in ns.
func valuesSecrets(t *testing.T, ns, addon string) []string {
	t.Helper()
	list := &corev1.SecretList{}
	if err := admin.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		if strings.HasPrefix(s.Name, values.ValuesPrefix(addon)) {
			out = append(out, s.Name)
		}
	}
	return out
}

// TestSecretInputsOfAFailedWrite adds an Addon whose name is taken, and
// edits one with a write that conflicts, both with secret inputs: the
// Secret made for them is deleted, so no Secret that nothing names is left
// holding them.
func TestSecretInputsOfAFailedWrite(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	addonWithPlan(t, ns, "blog", hashOf("a"))
	editor := user(t, ns, "editor", addonRule("get", "create", "patch"), rbacPolicy("", "secrets", "create", "delete"))
	code, body := call(t, editor, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons", map[string]any{
		"name":         "blog",
		"spec":         map[string]any{"chart": map[string]any{"url": "https://charts.example/blog-1.0.0.tgz"}},
		"secretInputs": map[string]string{"auth.password": "s3cret"},
	})
	expect(t, "adding an Addon whose name is taken", code, body, http.StatusConflict)
	if left := valuesSecrets(t, ns, "blog"); len(left) > 0 {
		t.Errorf("a refused add left the values Secrets %v", left)
	}

	real, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: cli.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	conflicting := interceptor.NewClient(real, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*capstanv1.Addon); ok {
				return apierrors.NewConflict(schema.GroupResource{Group: "capstan.dev", Resource: "addons"}, obj.GetName(), nil)
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	_, err = addons.Edit(ctx, conflicting, client.ObjectKey{Namespace: ns, Name: "blog"}, nil, map[string]string{"auth.password": "s3cret"})
	if !apierrors.IsConflict(err) {
		t.Fatalf("the edit's error %v should be the conflict", err)
	}
	if left := valuesSecrets(t, ns, "blog"); len(left) > 0 {
		t.Errorf("an edit that conflicted left the values Secrets %v", left)
	}
}

// TestReplacedSecretInputsKeptForWantOfRightsAreLogged: a user who may
// create Secrets but not read or delete them edits an Addon's secret
// input twice: the edit stands, and the Secret it replaced, which still
// holds the old value, is named in the server's log with the user.
func TestReplacedSecretInputsKeptForWantOfRightsAreLogged(t *testing.T) {
	ns := namespace(t)
	addonWithPlan(t, ns, "blog", hashOf("a"))
	editor := user(t, ns, "editor", addonRule("get", "list", "patch"), rbacPolicy("", "secrets", "create"))
	path := "/api/v1/namespaces/" + ns + "/addons/blog"
	code, body := call(t, editor, http.MethodPatch, path, map[string]any{"secretInputs": map[string]string{"auth.password": "one"}})
	expect(t, "the first secret input", code, body, http.StatusOK)
	first := valuesSecrets(t, ns, "blog")
	if len(first) != 1 {
		t.Fatalf("after the first secret input, the values Secrets are %v; want one", first)
	}
	code, body = call(t, editor, http.MethodPatch, path, map[string]any{"secretInputs": map[string]string{"auth.password": "two"}})
	expect(t, "a new secret input by a user who may not delete Secrets", code, body, http.StatusOK)
	if got := valuesSecrets(t, ns, "blog"); len(got) != 2 {
		t.Errorf("the values Secrets are %v; want the first kept, as the user may not delete it, and a new one", got)
	}
	logged := apiLog.String()
	if !strings.Contains(logged, "Secret of replaced secret inputs kept") || !strings.Contains(logged, first[0]) || !strings.Contains(logged, "system:serviceaccount:"+ns+":editor") {
		t.Errorf("the server's log does not name the kept Secret %s and the user:\n%s", first[0], logged)
	}
}
