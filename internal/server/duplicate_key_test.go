package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestAKeyGivenTwiceIsRefused: an add or an edit whose body gives a key
// twice (the name, spec.deletionPolicy, a secret input, a key of
// spec.values) is a 400 that names the key's path, and nothing is
// written: no Addon, no values Secret, no change to the spec.
func TestAKeyGivenTwiceIsRefused(t *testing.T) {
	ns := namespace(t)
	editor := user(t, ns, "editor", addonRule("get", "create", "patch", "update"), rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}})
	list := "/api/v1/namespaces/" + ns + "/addons"
	const chart = `"chart":{"url":"https://charts.example/blog-1.0.0.tgz"}`
	refused := func(what, method, path, body, field string) {
		t.Helper()
		code, got := call(t, editor, method, path, []byte(body))
		expect(t, what, code, got, http.StatusBadRequest)
		var e struct{ Field, Message string }
		if err := json.Unmarshal(got, &e); err != nil || e.Field != field || e.Message != field+" is given twice in the request body: keep one" {
			t.Errorf("%s: the refusal is %s (%v); want %s named as given twice", what, got, err, field)
		}
	}
	refused("an add with the name twice", http.MethodPost, list, `{"name":"blog","name":"other","spec":{"suspend":true,`+chart+`}}`, "name")
	refused("an add with spec.deletionPolicy twice", http.MethodPost, list, `{"name":"blog","spec":{"suspend":true,`+chart+`,"deletionPolicy":"Orphan","deletionPolicy":"Delete"}}`, "spec.deletionPolicy")
	refused("an add with a secret input twice", http.MethodPost, list, `{"name":"blog","spec":{"suspend":true,`+chart+`},"secretInputs":{"auth.password":"first","auth.password":"second"}}`, `secretInputs["auth.password"]`)
	for _, name := range []string{"blog", "other"} {
		if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &capstanv1.Addon{}); !apierrors.IsNotFound(err) {
			t.Errorf("a refused add left the Addon %s: %v", name, err)
		}
	}
	var secrets corev1.SecretList
	if err := admin.List(context.Background(), &secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		if s.Type != corev1.SecretTypeServiceAccountToken {
			t.Errorf("a refused add left the Secret %s", s.Name)
		}
	}

	before := addonWithPlan(t, ns, "demo", hashOf("a"))
	refused("an edit with a key of spec.values twice", http.MethodPatch, list+"/demo", `{"spec":{"values":{"replicas":1,"replicas":2}}}`, "spec.values.replicas")
	refused("an edit with spec.deletionPolicy twice", http.MethodPatch, list+"/demo", `{"spec":{"deletionPolicy":"Orphan","deletionPolicy":"Delete"}}`, "spec.deletionPolicy")
	a := &capstanv1.Addon{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demo"}, a); err != nil || a.Generation != before.Generation || a.Spec.Values != nil || a.Spec.DeletionPolicy != before.Spec.DeletionPolicy {
		t.Errorf("a refused edit changed the Addon: %v, generation %d (was %d), values %v, deletionPolicy %q", err, a.Generation, before.Generation, a.Spec.Values, a.Spec.DeletionPolicy)
	}
}

// TestAKeyInAnotherCaseIsRefused: an add or an edit whose body spells a
// field in another letter case ({"name":"x","Name":"y"}, a spec patch's
// DeletionPolicy) is a 400 that names the key as an unknown field, rather
// than take it as that field, and nothing is written.
func TestAKeyInAnotherCaseIsRefused(t *testing.T) {
	ns := namespace(t)
	editor := user(t, ns, "editor", addonRule("get", "create", "patch", "update"), rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}})
	list := "/api/v1/namespaces/" + ns + "/addons"
	const chart = `"chart":{"url":"https://charts.example/blog-1.0.0.tgz"}`
	refused := func(what, method, path, body, field, suggest string) {
		t.Helper()
		code, got := call(t, editor, method, path, []byte(body))
		expect(t, what, code, got, http.StatusBadRequest)
		var e struct{ Field, Message string }
		if err := json.Unmarshal(got, &e); err != nil || e.Field != field ||
			!strings.Contains(e.Message, `unknown field "`+field+`": did you mean `+suggest+"?") {
			t.Errorf("%s: the refusal is %s (%v); want %s named as an unknown field, %s suggested", what, got, err, field, suggest)
		}
	}
	refused("an add with the name in two cases", http.MethodPost, list, `{"name":"x","Name":"y","spec":{"suspend":true,`+chart+`}}`, "Name", "name")
	refused("an add with a secret input and SecretInputs", http.MethodPost, list, `{"name":"x","spec":{"suspend":true,`+chart+`},"SecretInputs":{"auth.password":"s3cret"}}`, "SecretInputs", "secretInputs")
	for _, name := range []string{"x", "y"} {
		if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &capstanv1.Addon{}); !apierrors.IsNotFound(err) {
			t.Errorf("a refused add left the Addon %s: %v", name, err)
		}
	}
	var secrets corev1.SecretList
	if err := admin.List(context.Background(), &secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		if s.Type != corev1.SecretTypeServiceAccountToken {
			t.Errorf("a refused add left the Secret %s", s.Name)
		}
	}

	before := addonWithPlan(t, ns, "demo", hashOf("a"))
	refused("an edit with DeletionPolicy", http.MethodPatch, list+"/demo", `{"spec":{"DeletionPolicy":"Orphan"}}`, "spec.DeletionPolicy", "deletionPolicy")
	a := &capstanv1.Addon{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demo"}, a); err != nil || a.Generation != before.Generation || a.Spec.DeletionPolicy != before.Spec.DeletionPolicy {
		t.Errorf("a refused edit changed the Addon: %v, generation %d (was %d), deletionPolicy %q", err, a.Generation, before.Generation, a.Spec.DeletionPolicy)
	}
}
