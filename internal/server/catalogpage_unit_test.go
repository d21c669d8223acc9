package server

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/catalog"
	"capstan.dev/capstan/internal/gitops"
)

// TestCatalogAddonTarget checks where a catalog form's Addon sends its
// objects: to the entry's namespace, created when missing, when the
// Addon's namespace is trusted; to the Addon's own (no target) elsewhere,
// and when the entry suggests no namespace.
func TestCatalogAddonTarget(t *testing.T) {
	longhorn, gitFolder := entry(t, "longhorn"), entry(t, "git-folder")
	gitFolder.Namespace = "apps"
	for _, tc := range []struct {
		name    string
		entry   catalog.Entry
		trusted bool
		target  string
	}{
		{"trusted chart", longhorn, true, "longhorn-system"},
		{"restricted chart", longhorn, false, ""},
		{"trusted git folder", gitFolder, true, "apps"},
		{"restricted git folder", gitFolder, false, ""},
		{"trusted, no suggested namespace", catalog.Entry{ID: "plain", Chart: longhorn.Chart}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			form := url.Values{"git": {"https://git.example/apps.git"}}
			r := httptest.NewRequest(http.MethodPost, "/catalog/"+tc.entry.ID, strings.NewReader(form.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			v := &catalogView{Entry: &tc.entry, Fields: catalogFields(tc.entry), Namespace: "capstan-system", Name: tc.entry.ID}
			a, msg := catalogAddon(r, v, tc.trusted)
			if msg != "" {
				t.Fatal(msg)
			}
			if a.Namespace != "capstan-system" || a.Spec.TargetNamespace != tc.target || a.Spec.CreateNamespace != (tc.target != "") {
				t.Errorf("the Addon in %s sends its objects to %q (createNamespace %v); want %q",
					a.Namespace, a.Spec.TargetNamespace, a.Spec.CreateNamespace, tc.target)
			}
		})
	}
}

// TestCatalogFormSaysWhereObjectsGo renders an entry's form: it names the
// namespace field as the Addon's and says where the objects go.
func TestCatalogFormSaysWhereObjectsGo(t *testing.T) {
	e := entry(t, "longhorn")
	var buf bytes.Buffer
	v := &catalogView{Entry: &e, Fields: catalogFields(e), Namespace: e.Namespace, Name: e.ID, Trusted: []string{"capstan-system", "platform"}}
	if err := pages()["catalog"].ExecuteTemplate(&buf, "content", pageData{Catalog: v, CSRF: "csrf"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{">Namespace of the Addon<", "Its objects go to <code>longhorn-system</code>",
		"(<code>capstan-system</code>, <code>platform</code>)", "in any other namespace they stay in the Addon's own"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("the form lacks %q:\n%s", want, buf.String())
		}
	}
}

// TestCatalogDefinitionKeepsTheChart commits an operator's entries as the
// page does in a trusted namespace with an AddonRepository: the definition
// written, parsed back and turned into an Addon as the syncer does, holds
// the entry's whole chart. A signature check or a secretRef left out would
// install the chart unchecked, or fail to fetch a private one.
func TestCatalogDefinitionKeepsTheChart(t *testing.T) {
	digest := "sha256:" + strings.Repeat("c", 64)
	for _, chart := range []capstanv1.ChartSource{
		{OCI: "oci://registry.example/charts/wiki", Version: "1.4.0", Digest: digest,
			SecretRef: &capstanv1.LocalObjectReference{Name: "registry"},
			Verify: &capstanv1.ChartVerification{Cosign: &capstanv1.CosignVerification{
				SecretRef: capstanv1.LocalObjectReference{Name: "chart-keys"}, Key: "team.pub"}}},
		{Repo: "https://charts.example/", Name: "wiki", Version: ">=1.0.0 <2.0.0",
			SecretRef: &capstanv1.LocalObjectReference{Name: "repo-token"},
			Verify: &capstanv1.ChartVerification{Provenance: &capstanv1.ProvenanceVerification{
				SecretRef: capstanv1.LocalObjectReference{Name: "keyring"}}}},
	} {
		t.Run(chart.OCI+chart.Repo, func(t *testing.T) {
			e := catalog.Entry{ID: "wiki", Namespace: "wiki", Chart: &chart}
			r := httptest.NewRequest(http.MethodPost, "/catalog/wiki", strings.NewReader(""))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			a, msg := catalogAddon(r, &catalogView{Entry: &e, Namespace: "capstan-system", Name: "wiki"}, true)
			if msg != "" {
				t.Fatal(msg)
			}
			content, err := gitops.Encode(definitionOf(a, e.Namespace))
			if err != nil {
				t.Fatal(err)
			}
			def, err := gitops.Parse("addons/wiki.yaml", content)
			if err != nil {
				t.Fatalf("the committed definition does not parse: %v\n%s", err, content)
			}
			synced, err := def.Addon(gitops.Origin{Namespace: "capstan-system", Repository: "platform", File: "addons/wiki.yaml"})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(synced.Spec.Chart, &chart) {
				t.Errorf("the synced Addon's chart is\n%+v\nnot the entry's\n%+v\nfrom the definition\n%s", synced.Spec.Chart, &chart, content)
			}
		})
	}
}

// TestCatalogVersionIsAChartRepositorysOnly: the form of an entry from a
// chart repository or an OCI registry asks for a version, and the Addon
// takes the one posted; that of an https archive (chart.url), which is its
// own version and whose Addon the API server refuses with one, asks for
// none, and one posted all the same is not taken.
func TestCatalogVersionIsAChartRepositorysOnly(t *testing.T) {
	mirror := catalog.Entry{ID: "mirror", Title: "Mirror", Chart: &capstanv1.ChartSource{URL: "https://charts.example/longhorn-1.10.2.tgz"}}
	for _, tc := range []struct {
		name  string
		entry catalog.Entry
		// want is the Addon's chart.version after "2.0.0" is posted; ""
		// when the form asks for no version.
		want string
	}{
		{"chart repository", entry(t, "longhorn"), "2.0.0"},
		{"OCI registry", catalog.Entry{ID: "oci", Title: "OCI", Chart: &capstanv1.ChartSource{OCI: "oci://ghcr.io/org/e", Version: "1.0.0"}}, "2.0.0"},
		{"https archive", mirror, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			v := &catalogView{Entry: &tc.entry, Fields: catalogFields(tc.entry), Namespace: "apps", Name: tc.entry.ID}
			if err := pages()["catalog"].ExecuteTemplate(&buf, "content", pageData{Catalog: v, CSRF: "csrf"}); err != nil {
				t.Fatal(err)
			}
			if asks := strings.Contains(buf.String(), `name="version"`); asks != (tc.want != "") {
				t.Errorf("the form asks for a version: %v; want %v", asks, tc.want != "")
			}
			form := url.Values{"version": {"2.0.0"}}
			r := httptest.NewRequest(http.MethodPost, "/catalog/"+tc.entry.ID, strings.NewReader(form.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			a, msg := catalogAddon(r, v, false)
			if msg != "" {
				t.Fatal(msg)
			}
			if a.Spec.Chart.Version != tc.want {
				t.Errorf("chart.version %q; want %q", a.Spec.Chart.Version, tc.want)
			}
		})
	}
}

func entry(t *testing.T, id string) catalog.Entry {
	t.Helper()
	for _, e := range catalog.BuiltIn {
		if e.ID == id {
			return e
		}
	}
	t.Fatalf("no built-in entry %s", id)
	return catalog.Entry{}
}

// countingReader is a client.Reader with no objects that counts its Lists.
type countingReader struct {
	client.Reader
	lists atomic.Int32
}

func (c *countingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	c.lists.Add(1)
	return nil
}

// TestCatalogIsReadOncePerTTL: views of the catalog read its ConfigMaps, as
// the controller, at most once per catalogTTL however many there are, so
// that a loop of views does not flood the API server as the controller.
func TestCatalogIsReadOncePerTTL(t *testing.T) {
	var up atomic.Bool
	up.Store(true)
	now := time.Now()
	s, h := fakeReviewServer(t, &up, &now)
	reader := &countingReader{}
	s.Controller = reader
	cookie := sessionCookieOf(postForm(h, "/signin", url.Values{"token": {"a-token"}}, nil))
	if cookie == nil {
		t.Fatal("signing in made no session")
	}
	view := func() {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, "/catalog", nil)
		req.AddCookie(cookie)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("GET /catalog: %d", w.Code)
		}
	}
	for range 100 {
		view()
	}
	if n := reader.lists.Load(); n != 1 {
		t.Errorf("100 views of the catalog within an instant listed its ConfigMaps %d times; want once", n)
	}
	now = now.Add(catalogTTL)
	view()
	if n := reader.lists.Load(); n != 2 {
		t.Errorf("a view %v after the catalog was read listed its ConfigMaps %d times in all; want twice", catalogTTL, n)
	}
}

// failingReader is a client.Reader whose Lists fail while fail is set,
// count, and each take the time slow on the clock it moves.
type failingReader struct {
	client.Reader
	lists atomic.Int32
	fail  atomic.Bool
	now   *time.Time
	slow  time.Duration
}

func (f *failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	f.lists.Add(1)
	*f.now = f.now.Add(f.slow)
	if f.fail.Load() {
		return errors.New("the API server is overloaded")
	}
	return nil
}

// TestCatalogFailureIsKept: while the API server fails, views of the
// catalog get the error of the last read, not a read each: one read per
// catalogTTL from the start of the last, and none until catalogFailureTTL
// after a slow one failed; once it answers, the entries are read again.
func TestCatalogFailureIsKept(t *testing.T) {
	start := time.Now()
	now := start
	clock := func() time.Time { return now }
	reader := &failingReader{now: &now}
	reader.fail.Store(true)
	c := &catalogCache{}
	view := func(wantErr bool) {
		t.Helper()
		entries, _, err := c.entries(context.Background(), reader, "capstan-system", clock)
		switch {
		case wantErr && (err == nil || !strings.Contains(err.Error(), "overloaded") || !strings.Contains(err.Error(), "reload the page")):
			t.Fatalf("a view while the catalog cannot be read: %v; want the read's error, saying when to try again", err)
		case !wantErr && (err != nil || len(entries) == 0):
			t.Fatalf("a view once the catalog can be read: %d entries, %v; want the entries", len(entries), err)
		}
	}
	lists := func(want int32, when string) {
		t.Helper()
		if n := reader.lists.Load(); n != want {
			t.Fatalf("%s: the catalog's ConfigMaps were listed %d times in all; want %d", when, n, want)
		}
	}

	for range 100 {
		view(true)
	}
	lists(1, "100 views while the API server fails")
	now = start.Add(catalogTTL - time.Nanosecond)
	view(true)
	lists(1, "a view just under catalogTTL after the failed read began")
	now = start.Add(catalogTTL)
	view(true)
	lists(2, "a view catalogTTL after the failed read began")

	// A read that fails slowly is kept catalogFailureTTL after it failed,
	// though it began more than catalogTTL ago.
	reader.slow = catalogTTL
	now = start.Add(2 * catalogTTL)
	view(true)
	lists(3, "a view catalogTTL after the second failed read began")
	reader.slow = 0
	failed := start.Add(3 * catalogTTL)
	now = failed.Add(catalogFailureTTL - time.Nanosecond)
	for range 100 {
		view(true)
	}
	lists(3, "100 views just under catalogFailureTTL after a slow read failed")

	reader.fail.Store(false)
	now = failed.Add(catalogFailureTTL)
	view(false)
	lists(4, "a view catalogFailureTTL after a slow read failed")
	for range 100 {
		view(false)
	}
	lists(4, "100 views after the catalog was read")
}
