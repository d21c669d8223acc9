package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestRefreshRequest: POST …/refresh and POST …/test write their
// request as the user, answer its value, and refuse what the controller
// cannot take (a paused Addon) and what the user may not do, changing
// nothing.
func TestRefreshRequest(t *testing.T) {
	for _, c := range []struct{ verb, annotation string }{
		{"refresh", capstanv1.RefreshAnnotation},
		{"test", capstanv1.TestAnnotation},
	} {
		t.Run(c.verb, func(t *testing.T) { request(t, c.verb, c.annotation) })
	}
}

func request(t *testing.T, verb, annotation string) {
	ctx := context.Background()
	ns := namespace(t)
	viewer := user(t, ns, "viewer", addonRule("get", "list"))
	editor := user(t, ns, "editor", addonRule("get", "list", "patch"))
	addonWithPlan(t, ns, "demo", hashOf("a"))
	path := "/api/v1/namespaces/" + ns + "/addons/demo/" + verb
	read := func() *capstanv1.Addon {
		got := &capstanv1.Addon{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	code, body := call(t, viewer, http.MethodPost, path, nil)
	expect(t, "a viewer asks for a "+verb, code, body, http.StatusForbidden)
	if got := read().Annotations[annotation]; got != "" {
		t.Fatalf("a refused %s wrote %q", verb, got)
	}
	code, body = call(t, editor, http.MethodPost, path, nil)
	expect(t, "an editor asks for a "+verb, code, body, http.StatusAccepted)
	var answer map[string]string
	if err := json.Unmarshal(body, &answer); err != nil || answer[verb] == "" {
		t.Fatalf("the answer %s: %v", body, err)
	}
	if got := read().Annotations[annotation]; got != answer[verb] {
		t.Fatalf("the Addon holds request %q; the answer said %q", got, answer[verb])
	}
	if !strings.Contains(apiLog.String(), `"verb"="`+verb+`"`) {
		t.Errorf("the %s left no audit line: %s", verb, apiLog.String())
	}

	a := read()
	patch := client.MergeFrom(a.DeepCopy())
	a.Annotations[capstanv1.PausedAnnotation] = "true"
	if err := admin.Patch(ctx, a, patch); err != nil {
		t.Fatal(err)
	}
	code, body = call(t, editor, http.MethodPost, path, nil)
	expect(t, verb+" of a paused Addon", code, body, http.StatusConflict)
	if !strings.Contains(string(body), "remove the annotation") {
		t.Errorf("the refusal %s does not say what to do", body)
	}
	if got := read().Annotations[annotation]; got != answer[verb] {
		t.Fatalf("a refused %s wrote %q over %q", verb, got, answer[verb])
	}
	code, body = call(t, editor, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons/missing/"+verb, nil)
	expect(t, verb+" of an Addon that does not exist", code, body, http.StatusNotFound)
}
