package controller_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// chartRepository is a Helm chart repository on the suite's chart server:
// an index.yaml under a path of its own, listing published archives.
type chartRepository struct {
	cs       *chartServer
	path     string
	name     string
	versions map[string]string // version: archive URL
}

func newChartRepository(cs *chartServer, name string) *chartRepository {
	cs.mu.Lock()
	cs.seq++
	path := fmt.Sprintf("/repos/%d", cs.seq)
	cs.mu.Unlock()
	return &chartRepository{cs: cs, path: path, name: name, versions: map[string]string{}}
}

func (r *chartRepository) url() string { return r.cs.srv.URL + r.path }

// add publishes a version of the chart and lists it in index.yaml.
func (r *chartRepository) add(t *testing.T, version string, files map[string]string) {
	t.Helper()
	r.versions[version], _ = r.cs.publish(t, chart{name: r.name, version: version, files: files})
	r.writeIndex()
}

// writeIndex serves index.yaml listing the published versions.
func (r *chartRepository) writeIndex() {
	var b bytes.Buffer
	fmt.Fprintf(&b, "apiVersion: v1\nentries:\n  %s:\n", r.name)
	vs := make([]string, 0, len(r.versions))
	for v := range r.versions {
		vs = append(vs, v)
	}
	sort.Strings(vs)
	for _, v := range vs {
		fmt.Fprintf(&b, "  - apiVersion: v2\n    name: %s\n    version: %s\n    urls: [%q]\n", r.name, v, r.versions[v])
	}
	r.cs.mu.Lock()
	r.cs.files[r.path+"/index.yaml"] = b.Bytes()
	r.cs.mu.Unlock()
}

// TestRefreshReadsTheSourceAgain: a version range takes a version
// published after the chart repository's index was cached when someone
// asks: `capstan addon refresh` reconciles at once and reads the index
// again (the fetcher keeps an index for 5 minutes), and the Addon says
// which request it handled. A request the controller cannot take is
// refused with what to do, and nothing running changes.
func TestRefreshReadsTheSourceAgain(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	files := map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-version\ndata:\n  version: {{ .Chart.Version | quote }}\n",
	}
	repo := newChartRepository(charts, "refreshed")
	repo.add(t, "1.0.0", files)
	a := &capstanv1.Addon{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "refreshed"},
		Spec:       capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{Repo: repo.url(), Name: "refreshed", Version: ">=1.0.0"}},
	}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got := waitPhase(t, a, capstanv1.PhaseSynced); got.Status.Version != "1.0.0" {
		t.Fatalf("installed version %q, want 1.0.0", got.Status.Version)
	}
	running := func() string { return configMapKey(t, ns, "refreshed-version", "version") }

	repo.add(t, "1.1.0", files)
	out := capstan(t, "addon", "refresh", "refreshed", "-n", ns, "--timeout", "60s")
	got := getAddon(t, a)
	if got.Status.Version != "1.1.0" || running() != "1.1.0" {
		t.Fatalf("after the refresh: status version %q, running %q; want 1.1.0\n%s\n%s", got.Status.Version, running(), out, describeStatus(got))
	}
	req := got.Annotations[capstanv1.RefreshAnnotation]
	if req == "" || got.Status.LastHandledRefresh != req || !strings.Contains(out, "Requested refresh "+req) || !strings.Contains(out, "Synced") {
		t.Fatalf("request %q, handled %q; the command said:\n%s", req, got.Status.LastHandledRefresh, out)
	}

	// A refresh whose fetch fails for a while stays open, and the retry
	// reads past the caches again.
	repo.add(t, "1.2.0", files)
	hits, mend := charts.breakPath(repo.path+"/index.yaml", http.StatusServiceUnavailable, "")
	patchAnnotation(t, a, capstanv1.RefreshAnnotation, "while-broken")
	eventually(t, 30*time.Second, "two failed reads of the index", func() bool { return hits() >= 2 })
	if got := getAddon(t, a); got.Status.LastHandledRefresh == "while-broken" {
		mend()
		t.Fatalf("a refresh whose fetch failed was marked handled: %s", describeStatus(got))
	}
	mend()
	got = waitFor(t, a, 60*time.Second, "the refresh handled once the repository answers", func(cur *capstanv1.Addon) bool {
		return cur.Status.LastHandledRefresh == "while-broken" && cur.Status.Phase == capstanv1.PhaseSynced
	})
	if got.Status.Version != "1.2.0" || running() != "1.2.0" {
		t.Fatalf("after a refresh retried: version %q, running %q; want 1.2.0", got.Status.Version, running())
	}
	req = "while-broken"

	// An annotation too long to echo in status is refused, and what runs
	// stays; a good value goes on.
	patchAnnotation(t, a, capstanv1.RefreshAnnotation, strings.Repeat("x", 200))
	failed := waitFor(t, a, 30*time.Second, "the long request refused", func(cur *capstanv1.Addon) bool {
		c := condition(cur, capstanv1.ConditionReady)
		return c != nil && strings.Contains(c.Message, "capstan.dev/refresh annotation is 200 characters long")
	})
	if failed.Status.LastHandledRefresh != req || running() != "1.2.0" {
		t.Fatalf("after a refused request: handled %q, running %q", failed.Status.LastHandledRefresh, running())
	}
	out = capstan(t, "addon", "refresh", "refreshed", "-n", ns, "--timeout", "60s")
	if got := getAddon(t, a); got.Status.Phase != capstanv1.PhaseSynced || got.Status.LastHandledRefresh != got.Annotations[capstanv1.RefreshAnnotation] {
		t.Fatalf("a good request after a refused one: %s\n%s", describeStatus(got), out)
	}

	// A paused add-on fetches nothing: the command says so, and writes nothing.
	patchAnnotation(t, a, capstanv1.PausedAnnotation, "true")
	before := getAddon(t, a).Annotations[capstanv1.RefreshAnnotation]
	out, err := capstanFails(t, "addon", "refresh", "refreshed", "-n", ns)
	if err == nil || !strings.Contains(err.Error(), "paused") || !strings.Contains(err.Error(), "remove the annotation") {
		t.Fatalf("refreshing a paused add-on: %v\n%s", err, out)
	}
	if got := getAddon(t, a).Annotations[capstanv1.RefreshAnnotation]; got != before {
		t.Fatalf("a refused refresh wrote %q over %q", got, before)
	}
	out, err = capstanFails(t, "addon", "refresh", "missing", "-n", ns)
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("refreshing an add-on that does not exist: %v\n%s", err, out)
	}
}

// configMapKey reads one key of a ConfigMap as the admin, or "" when the
// ConfigMap does not exist.
func configMapKey(t *testing.T, namespace, name, key string) string {
	t.Helper()
	cm := live(t, "v1", "ConfigMap", namespace, name)
	if cm == nil {
		return ""
	}
	v, _, _ := unstructured.NestedString(cm.Object, "data", key)
	return v
}

// patchAnnotation sets one annotation of the Addon as the admin.
func patchAnnotation(t *testing.T, a *capstanv1.Addon, key, value string) {
	t.Helper()
	cur := getAddon(t, a)
	patch := client.MergeFrom(cur.DeepCopy())
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations[key] = value
	if err := admin.Patch(context.Background(), cur, patch); err != nil {
		t.Fatal(err)
	}
}
