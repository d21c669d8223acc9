package server_test

import (
	"context"
	"encoding/pem"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/source"
)

// posted is what a browser posts for a page's edit form: its hidden
// inputs and its YAML editor, with no field input.
func posted(t *testing.T, page string) url.Values {
	t.Helper()
	out := url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`).FindAllStringSubmatch(page, -1) {
		if m[1] != "csrf" {
			out.Set(m[1], html.UnescapeString(m[2]))
		}
	}
	m := regexp.MustCompile(`(?s)<textarea id="yaml" name="yaml"[^>]*>(.*?)</textarea>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the page has no YAML editor:\n%s", page)
	}
	out.Set("yaml", html.UnescapeString(m[1]))
	return out
}

// TestEditValuesOpenedAsYAMLSavesOnlyItsYAML opens Edit values while every
// page fetch is taken, so that it is the YAML editor alone, frees the
// turn, and saves the form as it was shown: the chart's fields, fetched
// for the save, are not read, so its boxes ticked by default are not saved
// as false, and spec.values gains no key.
func TestEditValuesOpenedAsYAMLSavesOnlyItsYAML(t *testing.T) {
	ctx := context.Background()
	nsA, nsB := namespace(t), namespace(t)
	holder := user(t, nsA, "holder", addonRule("get", "list", "create", "patch"))
	editor := user(t, nsB, "editor", addonRule("get", "list", "update", "patch"))
	key := client.ObjectKey{Namespace: nsB, Name: "toggled"}
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: chartServer.URL + "/toggles-1.0.0.tgz"},
			Values: jsonValues(`{"greeting":"hi"}`)}}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	slow := newSlowCharts(t)
	srv := newServer()
	srv.MaxPageFetches = 1
	base := serve(t, srv)

	held := make(chan int, 1)
	go func() {
		form := "/new?" + url.Values{"chart": {slow.URL + "/slow-1.0.0.tgz?yamlonly=" + nsA}, "namespace": {nsA}, "name": {"slow"}}.Encode()
		code, _, _ := pageGet(t, base, holder, form)
		held <- code
	}()
	<-slow.asked
	sess := signInAt(t, base, editor)
	edit := "/addons/" + nsB + "/toggled/edit"
	code, page := sess.send(t, http.MethodGet, edit, nil)
	if code != http.StatusOK || strings.Contains(page, `id="f-rbac-create"`) || !strings.Contains(page, "the most this server fetches at once") {
		t.Fatalf("Edit values while every page fetch is taken: %d; want the YAML editor alone\n%s", code, page)
	}
	slow.release()
	if code := <-held; code != http.StatusOK {
		t.Fatalf("the form that held the turn: %d", code)
	}

	if code, page = sess.send(t, http.MethodPost, edit, posted(t, page)); code != http.StatusSeeOther {
		t.Fatalf("saving the YAML editor as it was shown: %d\n%s", code, page)
	}
	if got, want := specValuesOf(t, key), map[string]any{"greeting": "hi"}; !equalJSON(got, want) {
		t.Errorf("the values after a save of what was shown: %v; want %v, no box the form did not show", got, want)
	}
}

// TestEditValuesWhoseChartFailsSavesNothing opens Edit values with the
// chart's fields, and saves it to a server whose fetch of the chart then
// fails: the save is refused with 503, saying why, and spec.values keeps
// every value the fields showed.
func TestEditValuesWhoseChartFailsSavesNothing(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	editor := user(t, ns, "editor", addonRule("get", "list", "update", "patch"))
	var failing atomic.Bool
	// NOTE: httptest's TLS servers share one certificate, the one the
	// tests' fetchers trust for chartServer.
	flaky := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			http.Error(w, "down for a moment", http.StatusInternalServerError)
			return
		}
		r.URL.RawQuery = ""
		chartServer.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(flaky.Close)
	key := client.ObjectKey{Namespace: ns, Name: "failing"}
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: flaky.URL + "/form-1.0.0.tgz"},
			Values: jsonValues(`{"greeting":"hi","replicas":2}`)}}
	if err := admin.Create(ctx, a); err != nil {
		t.Fatal(err)
	}

	edit := "/addons/" + ns + "/failing/edit"
	code, page := signInAt(t, api.URL, editor).send(t, http.MethodGet, edit, nil)
	if code != http.StatusOK || !strings.Contains(page, `id="f-replicas"`) {
		t.Fatalf("the edit form: %d; want the chart's fields\n%s", code, page)
	}
	form := posted(t, page)
	form.Set("v.greeting", "changed")
	form.Set("v.replicas", "2")

	// Another server, whose cache does not hold the chart, takes the save.
	failing.Store(true)
	fresh, err := source.NewFetcher(source.Options{Guard: netguard.Config{Allow: []string{"127.0.0.1/32"}, LoopbackOnly: true},
		CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: chartServer.Certificate().Raw})})
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer()
	srv.Fetcher = fresh
	code, page = signInAt(t, serve(t, srv), editor).send(t, http.MethodPost, edit, form)
	if code != http.StatusServiceUnavailable || !strings.Contains(page, "nothing was saved") {
		t.Errorf("a save whose chart fetch fails: %d; want 503 saying nothing was saved\n%s", code, page)
	}
	if got, want := specValuesOf(t, key), map[string]any{"greeting": "hi", "replicas": float64(2)}; !equalJSON(got, want) {
		t.Errorf("the values after a save whose chart fetch failed: %v; want %v", got, want)
	}
}
