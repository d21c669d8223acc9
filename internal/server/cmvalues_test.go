package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// modeConfigMap makes a values ConfigMap of the add-on named addon, in
// ns, that sets mode: ldap, which makes the refs chart's ldap.bindPassword
// writeOnly.
func modeConfigMap(t *testing.T, ns, addon string) string {
	t.Helper()
	name := addon + "-values-mode"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{capstanv1.AddonLabel: addon}},
		Data: map[string]string{"values.yaml": "mode: ldap\n"}}
	if err := admin.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestSecretChecksReadValuesFromConfigMaps: a ConfigMap named in
// valuesFrom that sets mode: ldap makes ldap.bindPassword writeOnly, as
// the controller composes it over spec.values. The API refuses a bind
// password in spec.values for it, and the edit form draws its field as a
// password input and refuses it in the YAML. A writer who may not read the
// ConfigMap is not refused for it: the check goes on without it, and the
// answer's Warning, or the edit form, says so.
func TestSecretChecksReadValuesFromConfigMaps(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	editor := user(t, ns, "editor", addonRule("get", "list", "create", "update", "patch"), rbacPolicy("", "configmaps", "get"))
	blind := user(t, ns, "blind", addonRule("get", "list", "create", "update", "patch"))
	base := "/api/v1/namespaces/" + ns + "/addons"
	refs := map[string]any{"url": chartServer.URL + "/refs-1.0.0.tgz"}

	cm := modeConfigMap(t, ns, "ldap")
	add := map[string]any{"name": "ldap", "spec": map[string]any{"chart": refs,
		"values":     map[string]any{"name": "n", "ldap": map[string]any{"bindPassword": "hunter2"}},
		"valuesFrom": []map[string]any{{"kind": "ConfigMap", "name": cm}}}}
	code, body, _ := callWarned(t, editor, http.MethodPost, base, add)
	expect(t, "an add whose ConfigMap makes the bind password in spec.values a secret input", code, body, http.StatusUnprocessableEntity)
	if !strings.Contains(string(body), "ldap.bindPassword") || !strings.Contains(string(body), "writeOnly") || strings.Contains(string(body), "hunter2") {
		t.Errorf("the refusal %s should name ldap.bindPassword, writeOnly, and not the value", body)
	}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ldap"}, &capstanv1.Addon{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after the refused add, the Addon: %v; want none", err)
	}

	// An edit that names the ConfigMap and sets the bind password.
	key := client.ObjectKey{Namespace: ns, Name: "ldap"}
	code, body, _ = callWarned(t, editor, http.MethodPost, base, map[string]any{"name": "ldap", "spec": map[string]any{"chart": refs, "values": map[string]any{"name": "n"}}})
	expect(t, "an add without the ConfigMap", code, body, http.StatusCreated)
	code, body, _ = callWarned(t, editor, http.MethodPatch, base+"/ldap", map[string]any{"spec": map[string]any{
		"values":     map[string]any{"ldap": map[string]any{"bindPassword": "hunter3"}},
		"valuesFrom": []map[string]any{{"kind": "ConfigMap", "name": cm}}}})
	expect(t, "an edit that names the ConfigMap and sets the bind password", code, body, http.StatusUnprocessableEntity)
	if got := specValuesOf(t, key); !equalJSON(got, map[string]any{"name": "n"}) {
		t.Errorf("after the refused edit, spec.values is %v; want it unchanged", got)
	}

	// The page's edit form of an add-on that names the ConfigMap.
	a := &capstanv1.Addon{}
	if err := admin.Get(ctx, key, a); err != nil {
		t.Fatal(err)
	}
	a.Spec.Suspend = true
	a.Spec.ValuesFrom = []capstanv1.ValuesReference{{Kind: "ConfigMap", Name: cm}}
	if err := admin.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	sess := signInAt(t, api.URL, editor)
	edit := "/addons/" + ns + "/ldap/edit"
	code, page := sess.send(t, http.MethodGet, edit, nil)
	if code != http.StatusOK {
		t.Fatalf("the edit form: %d\n%s", code, page)
	}
	if got := passwordInputs(page); !slices.Contains(got, "f-ldap-bindPassword") {
		t.Errorf("the edit form's password inputs are %q; want one for ldap.bindPassword, which the ConfigMap's mode makes writeOnly", got)
	}
	code, page = sess.send(t, http.MethodPost, edit, url.Values{"uid": {hidden(t, page, "uid")}, "generation": {hidden(t, page, "generation")},
		"mode": {hidden(t, page, "mode")}, "v.name": {"m"}, "yaml": {"ldap:\n  bindPassword: hunter4\n"}})
	if code != http.StatusUnprocessableEntity || !strings.Contains(page, "marks ldap.bindPassword writeOnly") {
		t.Errorf("a bind password typed into the YAML: %d; want 422 saying the schema marks ldap.bindPassword writeOnly\n%s", code, page)
	}
	if got := specValuesOf(t, key); !equalJSON(got, map[string]any{"name": "n"}) {
		t.Errorf("after the refused save, spec.values is %v; want it unchanged", got)
	}

	// A writer who may not read the ConfigMap: the check goes on without
	// it, and says so; the controller Blocks the Addon.
	code, body, warnings := callWarned(t, blind, http.MethodPatch, base+"/ldap", map[string]any{"spec": map[string]any{
		"values": map[string]any{"name": "o"}}})
	expect(t, "an edit by a writer who may not read the ConfigMap", code, body, http.StatusOK)
	if w := strings.Join(warnings, "\n"); !strings.Contains(w, cm) || !strings.Contains(w, "could not be read") {
		t.Errorf("the Warning headers %q should say the ConfigMap %s could not be read", warnings, cm)
	}
	code, page = signInAt(t, api.URL, blind).send(t, http.MethodGet, edit, nil)
	if code != http.StatusOK || !strings.Contains(page, "ConfigMap "+cm) || !strings.Contains(page, "could not be read") {
		t.Errorf("the edit form for a writer who may not read the ConfigMap: %d; want 200 saying %s could not be read\n%s", code, cm, page)
	}
}

// TestConfigMapReadsOfACheckAreBounded: an add whose valuesFrom names more
// ConfigMaps than an Addon may have (the CRD's maxItems, which the API
// server enforces only when the Addon is written, after the check) reads
// none past that bound, and the ConfigMaps it could not read are warned
// of in at most 10 Warning headers and one that counts the rest.
func TestConfigMapReadsOfACheckAreBounded(t *testing.T) {
	ns := namespace(t)
	editor := user(t, ns, "editor", addonRule("get", "list", "create", "update", "patch"), rbacPolicy("", "configmaps", "get"))
	var from []map[string]any
	for i := range 500 {
		from = append(from, map[string]any{"kind": "ConfigMap", "name": fmt.Sprintf("many-values-%d", i)})
	}
	add := map[string]any{"name": "many", "spec": map[string]any{"chart": map[string]any{"url": chartServer.URL + "/refs-1.0.0.tgz"},
		"values": map[string]any{"name": "n"}, "valuesFrom": from}}
	code, body, warnings := callWarned(t, editor, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons", add)
	if code < 400 {
		t.Errorf("an add with 500 valuesFrom entries: %d; want it refused\n%s", code, body)
	}
	var unread []string
	for _, w := range warnings {
		if strings.Contains(w, "checked for secret inputs without") {
			unread = append(unread, w)
		}
	}
	if len(unread) != 11 || !strings.Contains(unread[10], "and 55 more valuesFrom entries") {
		t.Errorf("%d Warning headers of ConfigMaps not read, the last %q; want 10 and one counting the other 55 (54 past the first 10 of 64, and the 436 past the bound in one)", len(unread), unread[len(unread)-1])
	}
}
