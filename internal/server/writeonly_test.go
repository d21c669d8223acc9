package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
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
	if !strings.Contains(string(body), `"field":"definition"`) {
		t.Errorf("the refusal %s should name the field the request sent, definition", body)
	}
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

// callHeaders makes one API request as token to the server at base, and
// returns its status, body and headers.
func callHeaders(t *testing.T, base, token, method, path string, body any) (int, []byte, http.Header) {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, base+path, bytes.NewReader(data))
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
	return resp.StatusCode, out, resp.Header
}

// TestSecretValuesCheckIsNeverSkippedWhenBusy: while the user's one
// page-fetch turn is taken (a form of theirs fetching a slow chart), the
// check of spec.values cannot fetch the chart, and a write it would have
// refused is not let through with a warning: an add, and a commit of a
// git-managed Addon's definition, are 429 with Retry-After, and nothing
// is created or committed. Once the turn is free, a commit whose chart's
// source answers an error is refused too, naming "definition", as git
// would keep a secret for good; an add to the cluster whose chart's
// source fails still goes on with a warning.
func TestSecretValuesCheckIsNeverSkippedWhenBusy(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	editor := user(t, ns, "editor", addonRule("get", "list", "create", "update", "patch"), rbacPolicy("", "secrets", "create", "delete"))
	git := gitserver.Start(t)
	repoURL := git.Create(t, "ops")
	def := func(chart, values string) string {
		return "name: form\nhelm:\n  url: " + chart + "\nvalues:\n" + values
	}
	gitserver.Clone(t, repoURL).Write("addons/form.yaml", def(chartServer.URL+"/form-1.0.0.tgz", "  greeting: hi\n")).CommitAndPush("form")
	if err := admin.Create(ctx, &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"},
		Spec: capstanv1.AddonRepositorySpec{URL: repoURL}}); err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "form", Labels: map[string]string{gitops.ManagedByGitLabel: "ops"}},
		Spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: chartServer.URL + "/form-1.0.0.tgz"}, Values: jsonValues(`{"greeting":"hi"}`)}}); err != nil {
		t.Fatal(err)
	}
	head := func() string { return strings.TrimSpace(gitserver.Clone(t, repoURL).Git("rev-parse", "HEAD")) }
	base := "/api/v1/namespaces/" + ns + "/addons"

	slow := newSlowCharts(t)
	srv := newServer()
	srv.MaxPageFetches = 2
	at := serve(t, srv)
	held := make(chan int, 1)
	go func() {
		code, _, _ := pageGet(t, at, editor, "/new?"+url.Values{"chart": {slow.URL + "/slow-1.0.0.tgz?busy=" + ns}, "namespace": {ns}, "name": {"slow"}}.Encode())
		held <- code
	}()
	<-slow.asked

	// A link of this test alone, so that no cached chart lets the check
	// through without a fetch.
	link := chartServer.URL + "/form-1.0.0.tgz?busy=" + ns
	code, body, header := callHeaders(t, at, editor, http.MethodPost, base, map[string]any{"name": "blog",
		"spec": map[string]any{"chart": map[string]any{"url": link}, "values": map[string]any{"auth": map[string]any{"password": "hunter2"}}}})
	expect(t, "an add with a secret in spec.values while the user's page-fetch turn is taken", code, body, http.StatusTooManyRequests)
	if header.Get("Retry-After") == "" || !strings.Contains(string(body), "nothing was written") || strings.Contains(string(body), "hunter2") {
		t.Errorf("the busy refusal (Retry-After %q) %s should say to come back and that nothing was written, and not the value", header.Get("Retry-After"), body)
	}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "blog"}, &capstanv1.Addon{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after the busy add, the Addon: %v; want none", err)
	}

	before := head()
	code, body, header = callHeaders(t, at, editor, http.MethodPatch, base+"/form", map[string]any{"definition": def(link, "  greeting: hi\n  auth:\n    password: hunter2\n")})
	expect(t, "a commit of a secret while the user's page-fetch turn is taken", code, body, http.StatusTooManyRequests)
	if header.Get("Retry-After") == "" || !strings.Contains(string(body), "nothing was committed") || strings.Contains(string(body), "hunter2") {
		t.Errorf("the busy refusal (Retry-After %q) %s should say to come back and that nothing was committed, and not the value", header.Get("Retry-After"), body)
	}
	if now := head(); now != before {
		t.Fatalf("the busy commit moved the branch from %s to %s", before, now)
	}
	slow.release()
	<-held

	missing := chartServer.URL + "/missing-1.0.0.tgz?busy=" + ns
	code, body, _ = callHeaders(t, at, editor, http.MethodPatch, base+"/form", map[string]any{"definition": def(missing, "  greeting: hi\n  auth:\n    password: hunter2\n")})
	expect(t, "a commit whose chart cannot be fetched", code, body, http.StatusUnprocessableEntity)
	var refusal struct{ Field, Message string }
	_ = json.Unmarshal(body, &refusal)
	if refusal.Field != "definition" || !strings.Contains(refusal.Message, "nothing was committed") || !strings.Contains(refusal.Message, "valuesFrom") || strings.Contains(string(body), "hunter2") {
		t.Errorf("the refusal %s should name the field definition, say nothing was committed and name valuesFrom, and not the value", body)
	}
	if now := head(); now != before {
		t.Fatalf("the commit whose chart could not be fetched moved the branch from %s to %s", before, now)
	}

	code, body, header = callHeaders(t, at, editor, http.MethodPost, base, map[string]any{"name": "gone",
		"spec": map[string]any{"suspend": true, "chart": map[string]any{"url": missing}, "values": map[string]any{"greeting": "hi"}}})
	expect(t, "an add whose chart's source fails", code, body, http.StatusCreated)
	if w := strings.Join(header.Values("Warning"), "\n"); !strings.Contains(w, "could not be read") {
		t.Errorf("the add whose chart could not be read warns %q; want it said", w)
	}
}

// TestAPIWarnsOfUnknownSecretInputs: a secret input at a path the chart's
// schema neither marks writeOnly nor defines, a misspelt name, would be
// stored and never read, the chart rendering its default instead: the add
// and the edit that send one go through, and their answers warn of the
// path and the writeOnly path it is nearest to. A path the schema marks
// writeOnly is not warned of.
func TestAPIWarnsOfUnknownSecretInputs(t *testing.T) {
	ns := namespace(t)
	editor := user(t, ns, "editor", addonRule("get", "list", "create", "patch"), rbacPolicy("", "secrets", "create", "delete"))
	base := "/api/v1/namespaces/" + ns + "/addons"

	code, body, warnings := callWarned(t, editor, http.MethodPost, base, map[string]any{"name": "blog",
		"spec":         map[string]any{"chart": formChart(), "values": map[string]any{"greeting": "hi"}},
		"secretInputs": map[string]string{"auth.pasword": "hunter2"}})
	expect(t, "an add with a misspelt secret input", code, body, http.StatusCreated)
	if w := strings.Join(warnings, "\n"); !strings.Contains(w, "auth.pasword") || !strings.Contains(w, "did you mean auth.password?") || strings.Contains(w, "hunter2") {
		t.Errorf("the Warning headers %q should name auth.pasword and auth.password, and not the value", warnings)
	}

	code, body, warnings = callWarned(t, editor, http.MethodPatch, base+"/blog", map[string]any{
		"secretInputs": map[string]string{"auth.password": "hunter3"}})
	expect(t, "an edit with the right secret input", code, body, http.StatusOK)
	if w := strings.Join(warnings, "\n"); strings.Contains(w, "secret input auth.password") {
		t.Errorf("the Warning headers %q should not warn of auth.password, which the schema marks writeOnly", warnings)
	}

	code, body, warnings = callWarned(t, editor, http.MethodPatch, base+"/blog", map[string]any{
		"secretInputs": map[string]string{"adminPassword": "hunter4"}})
	expect(t, "an edit with a secret input the schema does not define", code, body, http.StatusOK)
	if w := strings.Join(warnings, "\n"); !strings.Contains(w, "secret input adminPassword") || strings.Contains(w, "hunter4") {
		t.Errorf("the Warning headers %q should name adminPassword, and not the value", warnings)
	}

	// NOTE: one header a path would make the answer's headers grow with
	// the body; the first 10 are named, and the rest counted.
	many := map[string]string{}
	for i := range 30 {
		many[fmt.Sprintf("unknown%02d", i)] = "hunter5"
	}
	code, body, warnings = callWarned(t, editor, http.MethodPatch, base+"/blog", map[string]any{"secretInputs": many})
	expect(t, "an edit with 30 secret inputs the schema does not define", code, body, http.StatusOK)
	if len(warnings) != 11 || !strings.Contains(warnings[10], "and 20 more secret inputs") {
		t.Errorf("the Warning headers %q should name 10 paths and count 20 more", warnings)
	}
}
