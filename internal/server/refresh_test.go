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

// TestRefreshRequest: POST …/refresh writes the refresh request as the
// user, answers its value, and refuses what the controller cannot take (a
// paused Addon) and what the user may not do, changing nothing.
func TestRefreshRequest(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	viewer := user(t, ns, "viewer", addonRule("get", "list"))
	editor := user(t, ns, "editor", addonRule("get", "list", "patch"))
	addonWithPlan(t, ns, "demo", hashOf("a"))
	path := "/api/v1/namespaces/" + ns + "/addons/demo/refresh"
	read := func() *capstanv1.Addon {
		got := &capstanv1.Addon{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	code, body := call(t, viewer, http.MethodPost, path, nil)
	expect(t, "a viewer refreshes", code, body, http.StatusForbidden)
	if got := read().Annotations[capstanv1.RefreshAnnotation]; got != "" {
		t.Fatalf("a refused refresh wrote %q", got)
	}
	code, body = call(t, editor, http.MethodPost, path, nil)
	expect(t, "an editor refreshes", code, body, http.StatusAccepted)
	var answer struct{ Refresh string }
	if err := json.Unmarshal(body, &answer); err != nil || answer.Refresh == "" {
		t.Fatalf("the answer %s: %v", body, err)
	}
	if got := read().Annotations[capstanv1.RefreshAnnotation]; got != answer.Refresh {
		t.Fatalf("the Addon holds request %q; the answer said %q", got, answer.Refresh)
	}
	if !strings.Contains(apiLog.String(), `"verb"="refresh"`) {
		t.Errorf("the refresh left no audit line: %s", apiLog.String())
	}

	a := read()
	patch := client.MergeFrom(a.DeepCopy())
	a.Annotations[capstanv1.PausedAnnotation] = "true"
	if err := admin.Patch(ctx, a, patch); err != nil {
		t.Fatal(err)
	}
	code, body = call(t, editor, http.MethodPost, path, nil)
	expect(t, "refreshing a paused Addon", code, body, http.StatusConflict)
	if !strings.Contains(string(body), "remove the annotation") {
		t.Errorf("the refusal %s does not say what to do", body)
	}
	if got := read().Annotations[capstanv1.RefreshAnnotation]; got != answer.Refresh {
		t.Fatalf("a refused refresh wrote %q over %q", got, answer.Refresh)
	}
	code, body = call(t, editor, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons/missing/refresh", nil)
	expect(t, "refreshing an Addon that does not exist", code, body, http.StatusNotFound)
}
