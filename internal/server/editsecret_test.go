package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestEditPageRefusesSecretInputsInItsYAML: the edit form turns a
// writeOnly field into a secret input, but its YAML editor could put the
// secret into spec.values: the save is refused with the form shown again,
// saying to type it into its secret field, and nothing is written. A
// secret that spec.values holds already does not block a save of other
// values.
func TestEditPageRefusesSecretInputsInItsYAML(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "secretyaml"}
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: chartServer.URL + "/form-1.0.0.tgz"},
			Values: jsonValues(`{"greeting":"hi"}`)}}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	sess := signInAt(t, api.URL, user(t, ns, "editor", addonRule("get", "list", "update", "patch")))
	edit := "/addons/" + ns + "/" + key.Name + "/edit"
	save := func(greeting, yaml string) (int, string) {
		t.Helper()
		code, page := sess.send(t, http.MethodGet, edit, nil)
		if code != http.StatusOK {
			t.Fatalf("the edit form: %d %s", code, page)
		}
		return sess.send(t, http.MethodPost, edit, url.Values{"uid": {hidden(t, page, "uid")}, "generation": {hidden(t, page, "generation")},
			"mode": {hidden(t, page, "mode")}, "v.greeting": {greeting}, "yaml": {yaml}})
	}
	code, page := save("hi", "auth:\n  password: hunter2\n")
	if code != http.StatusUnprocessableEntity || !strings.Contains(page, "auth.password") || !strings.Contains(page, "secret field") {
		t.Fatalf("saving a secret in the YAML: %d; want 422, naming auth.password and its secret field\n%s", code, page)
	}
	if got := specValuesOf(t, key); !equalJSON(got, map[string]any{"greeting": "hi"}) {
		t.Errorf("after the refused save, spec.values is %v; want it unchanged", got)
	}

	if err := admin.Get(ctx, key, a); err != nil {
		t.Fatal(err)
	}
	a.Spec.Values = jsonValues(`{"greeting":"hi","auth":{"password":"hunter2"}}`)
	if err := admin.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	if code, page := save("hello", ""); code != http.StatusSeeOther {
		t.Fatalf("saving other values beside a secret spec.values holds already: %d; want it saved\n%s", code, page)
	}
	if got := specValuesOf(t, key); !equalJSON(got, map[string]any{"auth": map[string]any{"password": "hunter2"}, "greeting": "hello"}) {
		t.Errorf("after the save, spec.values is %v", got)
	}
}
