package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/server"
)

// TestPageFormOverTheBound sends each of the page's forms (an action of an
// add-on's page, Edit values, the chart form and a catalog entry's form)
// with its CSRF token and values over the 1 MiB bound: each is refused
// with 413, saying the bound, not with 403 blaming the token, and nothing
// is changed or created.
func TestPageFormOverTheBound(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	a := addonWithPlan(t, ns, "big", hashOf("a"))
	sess := signInAt(t, api.URL, user(t, ns, "editor", addonRule("get", "list", "create", "update", "patch")))
	huge := strings.Repeat("k", server.MaxBody)
	for path, form := range map[string]url.Values{
		"/addons/" + ns + "/big/install": {"uid": {string(a.UID)}, "hash": {hashOf("a")}, "yaml": {huge}},
		"/addons/" + ns + "/big/edit":    {"uid": {string(a.UID)}, "generation": {"1"}, "yaml": {huge}},
		"/new":                           {"chart": {"https://charts.example/demo-1.0.0.tgz"}, "namespace": {ns}, "name": {"new"}, "yaml": {huge}},
		"/catalog/longhorn":              {"namespace": {ns}, "name": {"catalog"}, "yaml": {huge}},
	} {
		code, page := sess.send(t, http.MethodPost, path, form)
		if code != http.StatusRequestEntityTooLarge || !strings.Contains(page, "over 1 MiB") || strings.Contains(page, "CSRF") {
			t.Errorf("POST %s over the bound: %d; want 413 saying the bound", path, code)
		}
	}
	got := &capstanv1.Addon{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(a), got); err != nil || !got.Spec.Suspend || got.Spec.SyncRequest != 0 || got.Generation != a.Generation {
		t.Errorf("a refused form changed the Addon: %v, suspend %v, syncRequest %d, generation %d", err, got.Spec.Suspend, got.Spec.SyncRequest, got.Generation)
	}
	list := &capstanv1.AddonList{}
	if err := admin.List(ctx, list, client.InNamespace(ns)); err != nil || len(list.Items) != 1 {
		t.Errorf("refused forms created Addons: %v, %d in the namespace", err, len(list.Items))
	}
}
