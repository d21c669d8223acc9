package server_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// passwordInputs are the ids of the password inputs of a page.
func passwordInputs(page string) []string {
	var ids []string
	for _, m := range regexp.MustCompile(`<input type="password" id="([^"]+)"`).FindAllStringSubmatch(page, -1) {
		ids = append(ids, m[1])
	}
	slices.Sort(ids)
	return ids
}

// TestChartFormSecretFieldsFollowTheCompiledSchema adds and edits an
// add-on of a chart whose schema makes fields writeOnly through allOf, a
// $ref to $defs or to definitions, and a subchart's schema: each is a
// password input on the add form and on the edit form, and nothing else
// is, so that what the user types there is stored as secret inputs in a
// Secret, never in spec.values, and the save is not refused for it.
func TestChartFormSecretFieldsFollowTheCompiledSchema(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	sess := signInAt(t, api.URL, user(t, ns, "adder", addonRule("get", "list", "create", "update", "patch"), rbacPolicy("", "secrets", "create")))
	key := client.ObjectKey{Namespace: ns, Name: "refs"}
	link := chartServer.URL + "/refs-1.0.0.tgz"
	want := []string{"f-apiKey", "f-db-password", "f-sub-secret", "f-token"}

	code, page := sess.send(t, http.MethodGet, "/new?"+url.Values{"chart": {link}, "namespace": {ns}, "name": {key.Name}}.Encode(), nil)
	if code != http.StatusOK {
		t.Fatalf("the chart form: %d\n%s", code, page)
	}
	if got := passwordInputs(page); !slices.Equal(got, want) {
		t.Errorf("the chart form's password inputs are %q; want %q", got, want)
	}

	code, page = sess.send(t, http.MethodPost, "/new", url.Values{"chart": {link}, "namespace": {ns}, "name": {key.Name},
		"v.name": {"n"}, "v.db.host": {"db"}, "v.sub.plain": {"q"},
		"v.apiKey": {"K-1"}, "v.db.password": {"P-1"}, "v.token": {"T-1"}, "v.sub.secret": {"S-1"}})
	if code != http.StatusSeeOther {
		t.Fatalf("adding with the secret fields: %d; want it created\n%s", code, page)
	}
	a := &capstanv1.Addon{}
	if err := admin.Get(ctx, key, a); err != nil {
		t.Fatal(err)
	}
	if got := specValuesOf(t, key); !equalJSON(got, map[string]any{"name": "n", "db": map[string]any{"host": "db"}, "sub": map[string]any{"plain": "q"}}) {
		t.Errorf("spec.values is %v; want the plain fields alone", got)
	}
	var paths []string
	for _, ref := range a.Spec.ValuesFrom {
		paths = append(paths, ref.TargetPath)
	}
	slices.Sort(paths)
	if wantPaths := []string{"apiKey", "db.password", "sub.secret", "token"}; !slices.Equal(paths, wantPaths) {
		t.Errorf("valuesFrom targets %q; want %q", paths, wantPaths)
	}

	edit := "/addons/" + ns + "/" + key.Name + "/edit"
	code, page = sess.send(t, http.MethodGet, edit, nil)
	if code != http.StatusOK {
		t.Fatalf("the edit form: %d\n%s", code, page)
	}
	if got := passwordInputs(page); !slices.Equal(got, want) {
		t.Errorf("the edit form's password inputs are %q; want %q", got, want)
	}
	if strings.Contains(page, "K-1") || strings.Contains(page, "P-1") {
		t.Error("the edit form shows a secret input's value")
	}
	code, page = sess.send(t, http.MethodPost, edit, url.Values{"uid": {hidden(t, page, "uid")}, "generation": {hidden(t, page, "generation")},
		"mode": {hidden(t, page, "mode")}, "v.name": {"m"}, "v.db.host": {"db"}, "v.sub.plain": {"q"}, "v.token": {"T-2"}})
	if code != http.StatusSeeOther {
		t.Fatalf("editing a secret field: %d; want it saved\n%s", code, page)
	}
	if got := specValuesOf(t, key); !equalJSON(got, map[string]any{"name": "m", "db": map[string]any{"host": "db"}, "sub": map[string]any{"plain": "q"}}) {
		t.Errorf("after the edit, spec.values is %v; want the plain fields alone", got)
	}

	// Once the add-on's mode is ldap, the schema's then makes
	// ldap.bindPassword a secret input, and the edit form a password
	// input of it.
	code, page = sess.send(t, http.MethodGet, edit, nil)
	if code != http.StatusOK {
		t.Fatalf("the edit form: %d\n%s", code, page)
	}
	code, page = sess.send(t, http.MethodPost, edit, url.Values{"uid": {hidden(t, page, "uid")}, "generation": {hidden(t, page, "generation")},
		"mode": {hidden(t, page, "mode")}, "v.name": {"m"}, "v.db.host": {"db"}, "v.sub.plain": {"q"}, "v.mode": {"ldap"}})
	if code != http.StatusSeeOther {
		t.Fatalf("setting mode ldap: %d; want it saved\n%s", code, page)
	}
	code, page = sess.send(t, http.MethodGet, edit, nil)
	if code != http.StatusOK {
		t.Fatalf("the edit form: %d\n%s", code, page)
	}
	ldapWant := slices.Sorted(slices.Values(append([]string{"f-ldap-bindPassword"}, want...)))
	if got := passwordInputs(page); !slices.Equal(got, ldapWant) {
		t.Errorf("in mode ldap, the edit form's password inputs are %q; want %q", got, ldapWant)
	}
	code, page = sess.send(t, http.MethodPost, edit, url.Values{"uid": {hidden(t, page, "uid")}, "generation": {hidden(t, page, "generation")},
		"mode": {hidden(t, page, "mode")}, "v.name": {"m"}, "v.db.host": {"db"}, "v.sub.plain": {"q"}, "v.mode": {"ldap"}, "v.ldap.bindPassword": {"B-1"}})
	if code != http.StatusSeeOther {
		t.Fatalf("typing the bind password: %d; want it saved\n%s", code, page)
	}
	if raw := string(specValuesRaw(t, key)); strings.Contains(raw, "B-1") {
		t.Errorf("spec.values is %s; want no bind password", raw)
	}
}

// specValuesRaw reads an Addon's spec.values as JSON.
func specValuesRaw(t *testing.T, key client.ObjectKey) []byte {
	t.Helper()
	a := &capstanv1.Addon{}
	if err := admin.Get(context.Background(), key, a); err != nil {
		t.Fatal(err)
	}
	if a.Spec.Values == nil {
		return nil
	}
	return a.Spec.Values.Raw
}

// secretFieldsOf are the values of a page's secretField inputs, the
// fields it drew as secret, which a browser posts back.
func secretFieldsOf(page string) []string {
	var paths []string
	for _, m := range regexp.MustCompile(`<input type="hidden" name="secretField" value="([^"]*)">`).FindAllStringSubmatch(page, -1) {
		paths = append(paths, m[1])
	}
	return paths
}

// TestChartFormRedrawsAFieldTheSaveMakesSecret chooses mode ldap and types
// ldap.bindPassword in one save, on the add form and on the edit form,
// where the form drew it plain over the mode of the defaults or of the
// add-on: the save is refused, as the value would go into spec.values,
// and the form drawn again has a password input for it, which does not
// show the value; typed there, the next save keeps it in a Secret.
func TestChartFormRedrawsAFieldTheSaveMakesSecret(t *testing.T) {
	ns := namespace(t)
	sess := signInAt(t, api.URL, user(t, ns, "adder", addonRule("get", "list", "create", "update", "patch"), rbacPolicy("", "secrets", "create")))
	link := chartServer.URL + "/refs-1.0.0.tgz"
	const typed = "B-7-typed"

	// The add form.
	key := client.ObjectKey{Namespace: ns, Name: "refs-new"}
	post := url.Values{"chart": {link}, "namespace": {ns}, "name": {key.Name},
		"v.name": {"n"}, "v.mode": {"ldap"}, "v.ldap.bindPassword": {typed}}
	code, page := sess.send(t, http.MethodPost, "/new", post)
	if code != http.StatusUnprocessableEntity {
		t.Fatalf("adding with the bind password in a plain field: %d; want it refused\n%s", code, page)
	}
	if !slices.Contains(passwordInputs(page), "f-ldap-bindPassword") {
		t.Errorf("the add form drawn again has the password inputs %q; want one for ldap.bindPassword", passwordInputs(page))
	}
	if strings.Contains(page, typed) {
		t.Error("the add form drawn again shows the typed bind password")
	}
	if !strings.Contains(page, "secret field now") {
		t.Errorf("the refusal does not say the field is a secret field now:\n%s", page)
	}
	post["secretField"] = secretFieldsOf(page)
	code, page = sess.send(t, http.MethodPost, "/new", post)
	if code != http.StatusSeeOther {
		t.Fatalf("adding with the bind password in its secret field: %d; want it created\n%s", code, page)
	}
	if raw := string(specValuesRaw(t, key)); strings.Contains(raw, typed) || !strings.Contains(raw, `"ldap"`) {
		t.Errorf("spec.values is %s; want mode ldap and no bind password", raw)
	}
	if !slices.Contains(targetPaths(t, key), "ldap.bindPassword") {
		t.Errorf("valuesFrom targets %q; want ldap.bindPassword among them", targetPaths(t, key))
	}

	// The edit form of an add-on in mode local.
	key = client.ObjectKey{Namespace: ns, Name: "refs-edit"}
	code, page = sess.send(t, http.MethodPost, "/new", url.Values{"chart": {link}, "namespace": {ns}, "name": {key.Name}, "v.name": {"n"}})
	if code != http.StatusSeeOther {
		t.Fatalf("adding in mode local: %d\n%s", code, page)
	}
	edit := "/addons/" + ns + "/" + key.Name + "/edit"
	code, page = sess.send(t, http.MethodGet, edit, nil)
	if code != http.StatusOK {
		t.Fatalf("the edit form: %d\n%s", code, page)
	}
	post = url.Values{"uid": {hidden(t, page, "uid")}, "generation": {hidden(t, page, "generation")}, "mode": {hidden(t, page, "mode")},
		"secretField": secretFieldsOf(page), "v.name": {"n"}, "v.mode": {"ldap"}, "v.ldap.bindPassword": {typed}}
	code, page = sess.send(t, http.MethodPost, edit, post)
	if code != http.StatusUnprocessableEntity {
		t.Fatalf("editing with the bind password in a plain field: %d; want it refused\n%s", code, page)
	}
	if !slices.Contains(passwordInputs(page), "f-ldap-bindPassword") {
		t.Errorf("the edit form drawn again has the password inputs %q; want one for ldap.bindPassword", passwordInputs(page))
	}
	if strings.Contains(page, typed) {
		t.Error("the edit form drawn again shows the typed bind password")
	}
	post["secretField"] = secretFieldsOf(page)
	code, page = sess.send(t, http.MethodPost, edit, post)
	if code != http.StatusSeeOther {
		t.Fatalf("editing with the bind password in its secret field: %d; want it saved\n%s", code, page)
	}
	if raw := string(specValuesRaw(t, key)); strings.Contains(raw, typed) || !strings.Contains(raw, `"ldap"`) {
		t.Errorf("after the edit, spec.values is %s; want mode ldap and no bind password", raw)
	}
	if !slices.Contains(targetPaths(t, key), "ldap.bindPassword") {
		t.Errorf("after the edit, valuesFrom targets %q; want ldap.bindPassword among them", targetPaths(t, key))
	}
}

// targetPaths are the targetPaths of an Addon's valuesFrom.
func targetPaths(t *testing.T, key client.ObjectKey) []string {
	t.Helper()
	a := &capstanv1.Addon{}
	if err := admin.Get(context.Background(), key, a); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, ref := range a.Spec.ValuesFrom {
		paths = append(paths, ref.TargetPath)
	}
	return paths
}
