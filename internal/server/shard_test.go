package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/install"
)

// shardServer serves the API and page as the controller of selector
// would, trusting its own namespace and trusted besides.
func shardServer(t *testing.T, selector string, trusted ...string) string {
	t.Helper()
	sel, err := labels.Parse(selector)
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer()
	srv.Config.Selector = sel
	srv.Config.TrustedNamespaces = append([]string{install.Namespace}, trusted...)
	return serve(t, srv)
}

// TestAShardsAPICreatesItsOwnAddons: shard a's API and page create Addons
// labelled capstan.dev/shard=a, as its syncer labels a repository's, so
// shard a reconciles them with the profile it gives their namespace, and
// not the main release, which does not trust that namespace. The main
// release's API answers a plan of one of them 409, naming the shard,
// rather than plan it with its own trusted namespaces (a false
// ProfileChanged for a cluster-profile add-on that shard a syncs). A
// controller whose selector names no one shard refuses to create an Addon
// it would not select, and creates nothing.
func TestAShardsAPICreatesItsOwnAddons(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	shardA := shardServer(t, gitops.ShardLabel+"=a", ns)
	main := shardServer(t, "!"+gitops.ShardLabel)
	token := planner(t, ns)

	code, body := callAt(t, shardA, token, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons", map[string]any{
		"name": "web", "spec": map[string]any{"chart": map[string]any{"url": chartServer.URL + "/public-1.0.0.tgz"}}})
	expect(t, "an Addon created through shard a's API", code, body, http.StatusCreated)
	a := &capstanv1.Addon{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, a); err != nil {
		t.Fatal(err)
	}
	if a.Labels[gitops.ShardLabel] != "a" {
		t.Errorf("the Addon shard a's API created has the labels %v; want %s=a, or shard a does not reconcile it", a.Labels, gitops.ShardLabel)
	}

	// As shard a syncs it: installed under the cluster profile, with an
	// inventory.
	a.Status.Profile = capstanv1.ProfileCluster
	a.Status.Inventory = []capstanv1.ObjectID{{ObjectRef: capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "web"}}}
	if err := admin.Status().Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	code, body = callAt(t, main, token, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons/web/plan", nil)
	expect(t, "the main release's plan of shard a's Addon", code, body, http.StatusConflict)
	for _, want := range []string{"reconciled by another controller", gitops.ShardLabel + "=a", "--watch-label-selector !" + gitops.ShardLabel} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the main release's refusal %s does not say %q", body, want)
		}
	}
	if strings.Contains(string(body), "ProfileChanged") {
		t.Errorf("the main release's plan of an Addon it does not reconcile says it is Blocked: %s", body)
	}
	code, body = callAt(t, shardA, token, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons/web/plan", nil)
	expect(t, "shard a's plan of its own Addon", code, body, http.StatusOK)

	// The page's catalog creates through the same path.
	resp := signInAt(t, shardA, token).do(t, http.MethodPost, "/catalog/longhorn", url.Values{"namespace": {ns}, "name": {"longhorn"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("adding Longhorn through shard a's page: %d", resp.StatusCode)
	}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "longhorn"}, a); err != nil {
		t.Fatal(err)
	}
	if a.Labels[gitops.ShardLabel] != "a" {
		t.Errorf("the Addon shard a's page created has the labels %v; want %s=a", a.Labels, gitops.ShardLabel)
	}

	// A selector of no one shard: what it would not select is refused.
	team := shardServer(t, "team=a")
	code, body = callAt(t, team, token, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons", map[string]any{
		"name": "orphaned", "spec": map[string]any{"chart": map[string]any{"url": chartServer.URL + "/public-1.0.0.tgz"}}})
	expect(t, "an Addon its controller would not select", code, body, http.StatusConflict)
	if !strings.Contains(string(body), "--watch-label-selector team=a") || !strings.Contains(string(body), `requires \"team=a\"`) {
		t.Errorf("the refusal %s does not name the selector and the requirement the Addon fails", body)
	}
	if strings.Contains(string(body), "reconciled by another controller") || strings.Contains(string(body), "has no "+gitops.ShardLabel) {
		t.Errorf("the refusal %s speaks of another controller or the shard label, which a team=a selector does not name", body)
	}
	// Refused before the chart is fetched to check the values: 409, not a
	// check's 422.
	code, body = callAt(t, team, token, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons", map[string]any{
		"name": "orphaned", "spec": map[string]any{"chart": map[string]any{"url": chartServer.URL + "/form-1.0.0.tgz"},
			"values": map[string]any{"auth": map[string]any{"password": "hunter2"}}}})
	expect(t, "an Addon its controller would not select, with values to check", code, body, http.StatusConflict)
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orphaned"}, a); err == nil {
		t.Errorf("a refused Addon was created")
	}
}

// TestAPlanOfAChangeOfAnotherShardsAddonIsRefusedFirst plans changes of
// shard a's Addon on the main release's API: each is 409, naming the
// shard, before the API server is asked to judge the change, so that a
// change the CRD's rules would refuse is 409 too, not their 422, and
// nothing is fetched.
func TestAPlanOfAChangeOfAnotherShardsAddonIsRefusedFirst(t *testing.T) {
	ns := namespace(t)
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: map[string]string{gitops.ShardLabel: "a"}},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: chartServer.URL + "/public-1.0.0.tgz?shard=" + ns}}}
	if err := admin.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	main := shardServer(t, "!"+gitops.ShardLabel)
	token := planner(t, ns)
	for what, change := range map[string]map[string]any{
		"a change the CRD takes":         {"suspend": false},
		"an unknown deletionPolicy":      {"deletionPolicy": "Nope"},
		"a git folder besides the chart": {"git": map[string]any{"url": "https://git.example/x", "path": "deploy"}},
	} {
		before := chartRequests.Load()
		code, body := callAt(t, main, token, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons/web/plan", map[string]any{"spec": change})
		expect(t, "the main release's plan of "+what+" of shard a's Addon", code, body, http.StatusConflict)
		if !strings.Contains(string(body), "reconciled by another controller") || !strings.Contains(string(body), gitops.ShardLabel+"=a") {
			t.Errorf("the refusal of the plan of %s %s does not name the shard", what, body)
		}
		if n := chartRequests.Load() - before; n != 0 {
			t.Errorf("the plan of %s fetched %d times; want none", what, n)
		}
	}
}
