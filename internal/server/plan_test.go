package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testcontroller"
)

// trustedNamespace is trusted by the tests' server besides the controller's
// own namespace, as --trusted-namespaces would make it.
const trustedNamespace = "api-trusted"

// planRenderTimeout is the time bound of the tests' render sandbox.
const planRenderTimeout = 3 * time.Second

// planner is a user who may plan anything: a plan of the cluster profile
// dry-runs as the add-ons account, which takes the right to impersonate it.
func planner(t *testing.T, ns string) string {
	t.Helper()
	token := user(t, ns, "planner")
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(context.Background(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "planner-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "planner", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return token
}

func chartAddon(t *testing.T, ns, name, chart string) {
	t.Helper()
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: chartServer.URL + "/" + chart}}}
	if err := admin.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

// TestPlanInATrustedNamespace plans a public chart in a trusted namespace
// that is not the controller's own: the plan has the cluster profile, as
// the controller's would, and no chart-for-capstan violation. The same
// chart in another namespace has the restricted profile's violation.
func TestPlanInATrustedNamespace(t *testing.T) {
	ctx := context.Background()
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trustedNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	restricted := namespace(t)
	token := planner(t, restricted)
	for _, tc := range []struct {
		ns        string
		violation bool
	}{{trustedNamespace, false}, {restricted, true}} {
		chartAddon(t, tc.ns, "public", "public-1.0.0.tgz")
		code, body := call(t, token, http.MethodPost, "/api/v1/namespaces/"+tc.ns+"/addons/public/plan", nil)
		expect(t, "a plan in "+tc.ns, code, body, http.StatusOK)
		var p capstanv1.Plan
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, v := range p.Violations {
			found = found || v.Rule == "chart-for-capstan"
		}
		if found != tc.violation {
			t.Errorf("the plan in %s: chart-for-capstan violation %v, want %v (violations %v)", tc.ns, found, tc.violation, p.Violations)
		}
	}
}

// TestPlanRendersInTheSandbox plans a chart whose template loops for ever:
// the render runs in the controller's sandbox and is stopped at its time
// bound, not in the server's process, where nothing could stop it. Plans
// past the server's bound, or past one user's share of it, are answered
// 429 with a Retry-After.
func TestPlanRendersInTheSandbox(t *testing.T) {
	// Each reader in a namespace of its own, so that only the server's
	// bound, or one user's share, turns a plan away.
	type reader struct{ ns, token string }
	var readers []reader
	for range 3 {
		ns := namespace(t)
		chartAddon(t, ns, "loop", "loop-1.0.0.tgz")
		readers = append(readers, reader{ns, user(t, ns, "reader", addonRule("get"))})
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: apiClient().Transport}
	send := func(reader reader) (int, string, string) {
		req, err := http.NewRequest(http.MethodPost, api.URL+"/api/v1/namespaces/"+reader.ns+"/addons/loop/plan", nil)
		if err != nil {
			t.Error(err)
			return 0, "", ""
		}
		req.Header.Set("Authorization", "Bearer "+reader.token)
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("the plan of a chart that loops: %v", err)
			return 0, "", ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), resp.Header.Get("Retry-After")
	}

	start := time.Now()
	code, body, _ := send(readers[0])
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "loops without end") {
		t.Errorf("the plan of a chart that loops: %d %s; want 422 saying the render passed its time bound", code, body)
	}
	if took := time.Since(start); took > planRenderTimeout+15*time.Second {
		t.Errorf("the plan took %s; the sandbox stops a render after %s", took, planRenderTimeout)
	}

	// Three at once: two are computed, the third is turned away; and so is
	// the second of two at once by one user, who gets one of the two.
	for _, tc := range []struct {
		what    string
		readers []reader
	}{
		{"three plans at once", readers},
		{"two plans at once by one user", []reader{readers[0], readers[0]}},
	} {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var codes []int
		var retryAfter, refusal string
		for _, reader := range tc.readers {
			wg.Go(func() {
				code, body, retry := send(reader)
				mu.Lock()
				defer mu.Unlock()
				codes = append(codes, code)
				if code == http.StatusTooManyRequests {
					retryAfter, refusal = retry, body
				}
			})
		}
		wg.Wait()
		refused := 0
		for _, c := range codes {
			if c == http.StatusTooManyRequests {
				refused++
			}
		}
		share := len(tc.readers) == 2
		if refused != 1 || retryAfter == "" || share != strings.Contains(refusal, "for one user") {
			t.Errorf("%s answered %v (Retry-After %q, %s); want one 429 with a Retry-After", tc.what, codes, retryAfter, refusal)
		}
	}
}

// TestPlanReadsThePlatformFactsAsTheController plans a tenant's add-on on
// a server whose controller names a platform ConfigMap. The tenant may edit
// its own namespace and read nothing in the controller's: the plan still
// has the platform's facts, read with the controller's identity, as a
// sync would render them.
func TestPlanReadsThePlatformFactsAsTheController(t *testing.T) {
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "api-platform"},
		Data: map[string]string{"hostname": "apps.example.com"}}
	if err := admin.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), cm) })
	srv := newServer()
	srv.Config.PlatformConfigMap = cm.Name
	base := serve(t, srv)

	ns := namespace(t)
	tenant := bindClusterRole(t, ns, "tenant", "edit")
	chartAddon(t, ns, "facts", "facts-1.0.0.tgz")
	code, body := callAt(t, base, tenant, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons/facts/plan", nil)
	expect(t, "a tenant's plan with the platform's facts", code, body, http.StatusOK)
	var p capstanv1.Plan
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	var diff string
	for _, o := range p.Objects {
		if o.Kind == "ConfigMap" && o.Name == "facts" {
			diff = o.Diff
		}
	}
	if !strings.Contains(diff, "apps.example.com") {
		t.Errorf("the plan's ConfigMap: diff %q; want the platform's hostname", diff)
	}
}

// TestPlanOfTheClusterProfileImpersonates plans a cluster-profile add-on
// as a user who may edit its namespace. Its dry runs are the add-ons
// account's, made with the user's token: the API server refuses them
// until the user may impersonate that account.
func TestPlanOfTheClusterProfileImpersonates(t *testing.T) {
	ctx := context.Background()
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trustedNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	name := "imp-" + namespace(t)
	editor := bindClusterRole(t, trustedNamespace, name, "edit")
	chartAddon(t, trustedNamespace, name, "facts-1.0.0.tgz")
	path := "/api/v1/namespaces/" + trustedNamespace + "/addons/" + name + "/plan"
	code, body := call(t, editor, http.MethodPost, path, nil)
	if code != http.StatusForbidden || !strings.Contains(string(body), "impersonate") {
		t.Errorf("a plan of the cluster profile by a user who may not impersonate the add-ons account: %d %s; want 403 naming impersonation", code, body)
	}

	// The right the controller holds (config/rbac), given to the user.
	if _, err := kube.RbacV1().RoleBindings(install.Namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "capstan-impersonate-addons"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: trustedNamespace}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, body = call(t, editor, http.MethodPost, path, nil)
	expect(t, "a plan of the cluster profile by a user who may impersonate the add-ons account", code, body, http.StatusOK)
}

// TestPlanOfAChangeNeedsPatch plans as a user who may read an Addon but
// not patch it: a plan of the Addon as it is answers 200, and a plan of a
// change, which would make the controller fetch the link it names, is 403
// before anything is fetched. A user who may patch it plans the change.
func TestPlanOfAChangeNeedsPatch(t *testing.T) {
	ns := namespace(t)
	chartAddon(t, ns, "pinned", "public-1.0.0.tgz")
	dryRuns := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "patch"}}
	reader := user(t, ns, "reader", addonRule("get", "list"), dryRuns)
	editor := user(t, ns, "editor", addonRule("get", "list", "patch"), dryRuns)
	path := "/api/v1/namespaces/" + ns + "/addons/pinned/plan"
	// A link of this test alone, so that no cached chart hides a fetch.
	change := map[string]any{"spec": map[string]any{"chart": map[string]any{"url": chartServer.URL + "/public-1.0.0.tgz?plan=" + ns}}}

	before := chartRequests.Load()
	code, body := call(t, reader, http.MethodPost, path, change)
	if code != http.StatusForbidden || !strings.Contains(string(body), "may not patch Addon "+ns+"/pinned") {
		t.Errorf("a reader's plan of a change: %d %s; want 403 saying why", code, body)
	}
	if n := chartRequests.Load() - before; n != 0 {
		t.Errorf("the reader's plan of a change made the controller fetch %d times; want none", n)
	}
	code, body = call(t, reader, http.MethodPost, path, nil)
	expect(t, "a reader's plan of the Addon as it is", code, body, http.StatusOK)
	code, body = call(t, reader, http.MethodPost, path, map[string]any{"spec": map[string]any{}})
	expect(t, "a reader's plan with an empty patch", code, body, http.StatusOK)

	before = chartRequests.Load()
	code, body = call(t, editor, http.MethodPost, path, change)
	expect(t, "an editor's plan of a change", code, body, http.StatusOK)
	if n := chartRequests.Load() - before; n != 1 {
		t.Errorf("the editor's plan of a change fetched %d times; want 1", n)
	}
}

// TestPlanOfAMissingChartIsTheSpecsToFix: a plan of a change to a chart the
// source does not have (its answer 404) is 422, the person's to fix, not
// 500, which clients would retry and monitoring count as the server's.
func TestPlanOfAMissingChartIsTheSpecsToFix(t *testing.T) {
	ns := namespace(t)
	chartAddon(t, ns, "pinned", "public-1.0.0.tgz")
	editor := user(t, ns, "editor", addonRule("get", "list", "patch"))
	change := map[string]any{"spec": map[string]any{"chart": map[string]any{"url": chartServer.URL + "/missing-0.0.0.tgz?plan=" + ns}}}
	code, body := call(t, editor, http.MethodPost, "/api/v1/namespaces/"+ns+"/addons/pinned/plan", change)
	if code != http.StatusUnprocessableEntity || !strings.Contains(string(body), "404") {
		t.Errorf("a plan of a chart the source does not have: %d %s; want 422 naming the source's 404", code, body)
	}
}

// TestAnUnreadPlanLetsItsTurnGo asks, on a raw connection that reads
// nothing, for the plan of a chart that renders megabytes, on a server that
// computes one plan at once: the answer fills the socket's buffers and
// stops. Another user's plan is turned away while it holds the turn, and
// served once the answer's 20 s to be read have passed, not after the
// server's WriteTimeout.
func TestAnUnreadPlanLetsItsTurnGo(t *testing.T) {
	big, err := testcontroller.ChartArchive("big", map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: big\nversion: 1.0.0\nannotations:\n  capstan.dev/addon: \"true\"\n",
		"templates/cm.yaml": "{{ range $i := until 8 }}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big-{{ $i }}\n" +
			"data:\n  blob: {{ repeat 700000 \"x\" | quote }}\n{{ end }}",
	})
	if err != nil {
		t.Fatal(err)
	}
	// NOTE: httptest's TLS servers share one certificate, the one the
	// tests' fetcher trusts for chartServer.
	charts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(big) }))
	t.Cleanup(charts.Close)
	dryRuns := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "patch"}}
	slowNS, otherNS := namespace(t), namespace(t)
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: slowNS, Name: "big"},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: charts.URL + "/big-1.0.0.tgz"}}}
	if err := admin.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	chartAddon(t, otherNS, "small", "public-1.0.0.tgz")
	slow := user(t, slowNS, "slow", addonRule("get"), dryRuns)
	other := user(t, otherNS, "other", addonRule("get"), dryRuns)
	srv := newServer()
	srv.MaxPlans = 1
	base := serve(t, srv)

	unread(t, base, http.MethodPost, "/api/v1/namespaces/"+slowNS+"/addons/big/plan", slow)
	time.Sleep(time.Second)
	start, refused := time.Now(), 0
	for {
		code, body := callAt(t, base, other, http.MethodPost, "/api/v1/namespaces/"+otherNS+"/addons/small/plan", nil)
		if code == http.StatusOK {
			break
		}
		if code != http.StatusTooManyRequests {
			t.Fatalf("another user's plan: %d %s; want 429 while the turn is held, then 200", code, body)
		}
		refused++
		if time.Since(start) > 50*time.Second {
			t.Fatalf("another user's plan is still 429 after %s: the unread answer holds the plan turn", time.Since(start).Round(time.Second))
		}
		time.Sleep(2 * time.Second)
	}
	if refused == 0 {
		t.Errorf("another user's plan was served at once: the unread plan did not hold the turn, and this test shows nothing")
	}
	t.Logf("another user's plan was served after %s", time.Since(start).Round(time.Second))
}

// TestPlanOfAChangeTheSchemaRefuses plans changes of a chart Addon that the
// Addon's CRD refuses: a git folder besides the chart (two sources), an
// unknown deletionPolicy. Each is the API server's 422 naming the field,
// as the same change sent as an edit is, and fetches nothing: a plan of the
// unchanged chart would answer a question other than the one asked.
func TestPlanOfAChangeTheSchemaRefuses(t *testing.T) {
	ns := namespace(t)
	// A link of this test alone, so that no cached chart hides a fetch.
	chartAddon(t, ns, "pinned", "public-1.0.0.tgz?schema="+ns)
	dryRuns := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "patch"}}
	editor := user(t, ns, "editor", addonRule("get", "list", "patch"), dryRuns)
	path := "/api/v1/namespaces/" + ns + "/addons/pinned/plan"
	for _, tc := range []struct {
		what   string
		change map[string]any
		field  string
	}{
		{"a git folder besides the chart", map[string]any{"git": map[string]any{"url": "https://git.example/x", "path": "deploy"}}, "spec"},
		{"an unknown deletionPolicy", map[string]any{"deletionPolicy": "Nope"}, "spec.deletionPolicy"},
	} {
		before := chartRequests.Load()
		code, body := call(t, editor, http.MethodPost, path, map[string]any{"spec": tc.change})
		var got struct{ Field string }
		_ = json.Unmarshal(body, &got)
		if code != http.StatusUnprocessableEntity || got.Field != tc.field {
			t.Errorf("the plan of %s: %d %s; want 422 naming %s", tc.what, code, body, tc.field)
		}
		if n := chartRequests.Load() - before; n != 0 {
			t.Errorf("the plan of %s fetched %d times; want none", tc.what, n)
		}
	}
	a := &capstanv1.Addon{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "pinned"}, a); err != nil || a.Spec.Git != nil || a.Spec.DeletionPolicy != "" {
		t.Errorf("the refused plans changed the Addon: %v, %+v", err, a.Spec)
	}
	code, body := call(t, editor, http.MethodPost, path, map[string]any{"spec": map[string]any{"suspend": false}})
	expect(t, "the plan of a change the schema takes", code, body, http.StatusOK)
}
