package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/gitops/gitserver"
)

// callWarned makes one API request as token, and returns its status, body
// and Warning headers.
func callWarned(t *testing.T, token, method, path string, body any) (int, []byte, []string) {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, api.URL+path, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := apiClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out, resp.Header.Values("Warning")
}

// formChart is the spec.chart of the tests' chart whose schema marks
// auth.password writeOnly.
func formChart() map[string]any { return map[string]any{"url": chartServer.URL + "/form-1.0.0.tgz"} }

// TestAPIRefusesSecretInputsInSpecValues: a value the chart's schema marks
// writeOnly, sent in spec.values, would be stored in the Addon, readable
// by anyone who may view it, before the controller Blocks it: an add and
// an edit that set one are refused with 422, naming the path and
// secretInputs, and nothing is written. A secret that spec.values holds
// already, unchanged, does not block an edit of other values: the answer
// warns of it.
func TestAPIRefusesSecretInputsInSpecValues(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	editor := user(t, ns, "editor", addonRule("get", "list", "create", "patch"), rbacPolicy("", "secrets", "create", "delete"))
	key := client.ObjectKey{Namespace: ns, Name: "blog"}
	base := "/api/v1/namespaces/" + ns + "/addons"

	code, body, _ := callWarned(t, editor, http.MethodPost, base, map[string]any{"name": "blog",
		"spec": map[string]any{"chart": formChart(), "values": map[string]any{"greeting": "hi", "auth": map[string]any{"password": "hunter2"}}}})
	expect(t, "an add with a secret in spec.values", code, body, http.StatusUnprocessableEntity)
	if !strings.Contains(string(body), "auth.password") || !strings.Contains(string(body), "secretInputs") || strings.Contains(string(body), "hunter2") {
		t.Errorf("the refusal %s should name auth.password and secretInputs, and not the value", body)
	}
	if err := admin.Get(ctx, key, &capstanv1.Addon{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after the refused add, the Addon: %v; want none", err)
	}

	code, body, _ = callWarned(t, editor, http.MethodPost, base, map[string]any{"name": "blog",
		"spec":         map[string]any{"chart": formChart(), "values": map[string]any{"greeting": "hi"}},
		"secretInputs": map[string]string{"auth.password": "hunter2"}})
	expect(t, "an add with the secret as a secret input", code, body, http.StatusCreated)

	code, body, _ = callWarned(t, editor, http.MethodPatch, base+"/blog", map[string]any{
		"spec": map[string]any{"values": map[string]any{"auth": map[string]any{"password": "hunter3"}}}})
	expect(t, "an edit that sets a secret in spec.values", code, body, http.StatusUnprocessableEntity)
	if !strings.Contains(string(body), "auth.password") || strings.Contains(string(body), "hunter3") {
		t.Errorf("the refusal %s should name auth.password, and not the value", body)
	}
	if got := specValuesOf(t, key); !equalJSON(got, map[string]any{"greeting": "hi"}) {
		t.Errorf("after the refused edit, spec.values is %v; want it unchanged", got)
	}

	// A secret written into spec.values before (by hand): other values
	// can still be edited, and the answer warns of it.
	a := &capstanv1.Addon{}
	if err := admin.Get(ctx, key, a); err != nil {
		t.Fatal(err)
	}
	a.Spec.Values = jsonValues(`{"greeting":"hi","auth":{"password":"hunter2"}}`)
	if err := admin.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	code, body, warnings := callWarned(t, editor, http.MethodPatch, base+"/blog", map[string]any{
		"spec": map[string]any{"values": map[string]any{"greeting": "hello"}}})
	expect(t, "an edit of other values beside a secret spec.values holds already", code, body, http.StatusOK)
	if w := strings.Join(warnings, "\n"); !strings.Contains(w, "auth.password") || !strings.Contains(w, "secretInputs") || strings.Contains(w, "hunter2") {
		t.Errorf("the Warning headers %q should name auth.password and secretInputs, and not the value", warnings)
	}
	if got := specValuesOf(t, key); !equalJSON(got, map[string]any{"greeting": "hello", "auth": map[string]any{"password": "hunter2"}}) {
		t.Errorf("after the edit, spec.values is %v", got)
	}
}

// TestCommitsRefuseSecretInputs: a definition whose values set a value the
// chart's schema marks writeOnly would put the secret into git's history
// for good: the API's edit of a git-managed add-on refuses it with 422
// before anything is committed. A secret the file in git holds already,
// unchanged, does not block an edit of other values.
func TestCommitsRefuseSecretInputs(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	git := gitserver.Start(t)
	repoURL := git.Create(t, "ops")
	def := func(values string) string {
		return "name: form\nhelm:\n  url: " + chartServer.URL + "/form-1.0.0.tgz\nvalues:\n" + values
	}
	gitserver.Clone(t, repoURL).Write("addons/form.yaml", def("  greeting: hi\n")).CommitAndPush("form")
	if err := admin.Create(ctx, &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"},
		Spec: capstanv1.AddonRepositorySpec{URL: repoURL}}); err != nil {
		t.Fatal(err)
	}
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "form", Labels: map[string]string{gitops.ManagedByGitLabel: "ops"}},
		Spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: chartServer.URL + "/form-1.0.0.tgz"}, Values: jsonValues(`{"greeting":"hi"}`)}}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	editor := user(t, ns, "editor", addonRule("get", "list", "update", "patch"))
	path := "/api/v1/namespaces/" + ns + "/addons/form"
	head := func() string { return strings.TrimSpace(gitserver.Clone(t, repoURL).Git("rev-parse", "HEAD")) }

	before := head()
	code, body := call(t, editor, http.MethodPatch, path, map[string]any{"definition": def("  greeting: hi\n  auth:\n    password: hunter2\n")})
	expect(t, "an edit that commits a secret", code, body, http.StatusUnprocessableEntity)
	if !strings.Contains(string(body), "auth.password") || !strings.Contains(string(body), "valuesFrom") || strings.Contains(string(body), "hunter2") {
		t.Errorf("the refusal %s should name auth.password and valuesFrom, and not the value", body)
	}
	if now := head(); now != before {
		t.Fatalf("the refused edit moved the branch from %s to %s", before, now)
	}

	gitserver.Clone(t, repoURL).Write("addons/form.yaml", def("  greeting: hi\n  auth:\n    password: hunter2\n")).CommitAndPush("by hand")
	code, body = call(t, editor, http.MethodPatch, path, map[string]any{"definition": def("  greeting: hello\n  auth:\n    password: hunter2\n")})
	expect(t, "an edit of other values beside a secret git holds already", code, body, http.StatusAccepted)
}
