package server_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
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

// TestEditPageSavesWithValuesFromSecrets edits add-ons whose chart
// requires a secret that the add-on takes from a Secret of its own
// valuesFrom, which the page does not read: at a targetPath, the field is
// held and the check stands in for it; in a whole document, the schema's
// errors are left to the controller's plan. A change of replicas saves
// in both, and a secret typed into the YAML is refused still.
func TestEditPageSavesWithValuesFromSecrets(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	sess := signInAt(t, api.URL, user(t, ns, "editor", addonRule("get", "list", "update", "patch")))
	for _, tc := range []struct {
		name string
		from capstanv1.ValuesReference
		hint string
	}{
		{"targetpath", capstanv1.ValuesReference{Kind: "Secret", Name: "db-creds", TargetPath: "auth.password"}, "<code>auth.password</code>"},
		{"wholedoc", capstanv1.ValuesReference{Kind: "Secret", Name: "app-values"}, "<code>Secret app-values</code>"},
	} {
		key := client.ObjectKey{Namespace: ns, Name: tc.name}
		a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name},
			Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: chartServer.URL + "/vault-1.0.0.tgz"},
				Values: jsonValues(`{"replicas":1}`), ValuesFrom: []capstanv1.ValuesReference{tc.from}}}
		if err := admin.Create(ctx, a); err != nil {
			t.Fatal(err)
		}
		edit := "/addons/" + ns + "/" + key.Name + "/edit"
		save := func(replicas, yaml string) (int, string) {
			t.Helper()
			code, page := sess.send(t, http.MethodGet, edit, nil)
			if code != http.StatusOK || !strings.Contains(page, tc.hint) {
				t.Fatalf("%s: the edit form: %d; want 200 naming %s\n%s", tc.name, code, tc.hint, page)
			}
			return sess.send(t, http.MethodPost, edit, url.Values{"uid": {hidden(t, page, "uid")}, "generation": {hidden(t, page, "generation")},
				"mode": {hidden(t, page, "mode")}, "v.replicas": {replicas}, "yaml": {yaml}})
		}
		if code, page := save("2", ""); code != http.StatusSeeOther {
			t.Errorf("%s: changing replicas: %d; want it saved\n%s", tc.name, code, page)
		}
		if got := specValuesOf(t, key); !equalJSON(got, map[string]any{"replicas": float64(2)}) {
			t.Errorf("%s: after the save, spec.values is %v; want replicas 2", tc.name, got)
		}
		if code, page := save("3", "auth:\n  password: hunter2\n"); code != http.StatusUnprocessableEntity || !strings.Contains(page, "auth.password") {
			t.Errorf("%s: a secret typed into the YAML: %d; want 422 naming auth.password", tc.name, code)
		}
		if got := specValuesOf(t, key); !equalJSON(got, map[string]any{"replicas": float64(2)}) {
			t.Errorf("%s: after the refused save, spec.values is %v; want it unchanged", tc.name, got)
		}
	}
}

// TestChartFormTakesASecretObject adds, from the chart form, a chart
// whose schema marks an object writeOnly as a whole: each of its fields is
// a secret field, so the object is made up of secret inputs in a Secret,
// and spec.values holds none of it.
func TestChartFormTakesASecretObject(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	sess := signInAt(t, api.URL, user(t, ns, "adder", addonRule("get", "list", "create"), rbacPolicy("", "secrets", "create")))
	key := client.ObjectKey{Namespace: ns, Name: "secretobj"}
	code, page := sess.send(t, http.MethodPost, "/new", url.Values{"chart": {chartServer.URL + "/vault-1.0.0.tgz"}, "namespace": {ns}, "name": {key.Name},
		"v.replicas": {"1"}, "v.auth.password": {"pw-1"}, "v.creds.accessKey": {"AK-1"}, "v.creds.secretKey": {"SK-1"}})
	if code != http.StatusSeeOther {
		t.Fatalf("adding with a secret object: %d; want it created\n%s", code, page)
	}
	a := &capstanv1.Addon{}
	if err := admin.Get(ctx, key, a); err != nil {
		t.Fatal(err)
	}
	if raw := string(a.Spec.Values.Raw); strings.Contains(raw, "creds") || strings.Contains(raw, "AK-1") {
		t.Errorf("spec.values is %s; want no part of the secret object", raw)
	}
	var paths []string
	for _, ref := range a.Spec.ValuesFrom {
		paths = append(paths, ref.TargetPath)
	}
	for _, want := range []string{"auth.password", "creds.accessKey", "creds.secretKey"} {
		if !slices.Contains(paths, want) {
			t.Errorf("valuesFrom targets %q; want %s among them", paths, want)
		}
	}
}
