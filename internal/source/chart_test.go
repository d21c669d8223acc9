package source

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/netguard"
)

func TestRepoChartResolvesVersions(t *testing.T) {
	r := newChartRepo(t)
	for _, v := range []string{"1.0.0", "1.1.0", "2.0.0-rc.1"} {
		r.put("/charts/demo-"+v+".tgz", chartArchive(t, "demo", v))
	}
	r.index("demo", map[string]string{
		"1.0.0":      "charts/demo-1.0.0.tgz",
		"1.1.0":      "charts/demo-1.1.0.tgz",
		"2.0.0-rc.1": "charts/demo-2.0.0-rc.1.tgz",
	})
	f := newTestFetcher(t, Options{}, r.Server)
	tests := []struct{ version, want string }{
		{"", "1.1.0"},               // newest stable
		{"1.0.0", "1.0.0"},          // exact
		{"~1.0", "1.0.0"},           // range
		{"^1", "1.1.0"},             // range
		{">=1.0.0-0", "2.0.0-rc.1"}, // range with prereleases
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			c, err := f.Chart(context.Background(), capstanv1.ChartSource{Repo: r.URL, Name: "demo", Version: tt.version}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.Version != tt.want || c.Chart.Metadata.Version != tt.want || c.Name != "demo" {
				t.Fatalf("got %s %s, want demo %s", c.Name, c.Version, tt.want)
			}
			if c.Digest != Digest(chartArchive(t, "demo", tt.want)) {
				t.Fatalf("digest %s is not the archive's", c.Digest)
			}
			if c.URL != r.URL+"/charts/demo-"+tt.want+".tgz" {
				t.Fatalf("URL %s", c.URL)
			}
			if len(c.Chart.Templates) != 1 {
				t.Fatalf("templates: %d", len(c.Chart.Templates))
			}
		})
	}
}

func TestRepoChartIsCachedAndIndexExpires(t *testing.T) {
	r := newChartRepo(t)
	r.put("/charts/demo-1.0.0.tgz", chartArchive(t, "demo", "1.0.0"))
	r.index("demo", map[string]string{"1.0.0": "charts/demo-1.0.0.tgz"})
	now := time.Unix(1700000000, 0)
	f := newTestFetcher(t, Options{IndexTTL: time.Minute, Now: func() time.Time { return now }}, r.Server)
	spec := capstanv1.ChartSource{Repo: r.URL, Name: "demo", Version: "1.0.0"}
	ctx := context.Background()

	first, err := f.Chart(ctx, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := f.Chart(ctx, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.count("/charts/demo-1.0.0.tgz"); got != 1 {
		t.Fatalf("the archive was fetched %d times, want once", got)
	}
	if got := r.count("/index.yaml"); got != 1 {
		t.Fatalf("the index was fetched %d times within its TTL, want once", got)
	}
	if first.Chart == second.Chart {
		t.Fatal("each call must get its own *chart.Chart: rendering changes charts")
	}
	if first.Digest != second.Digest {
		t.Fatal("the cached chart changed")
	}

	now = now.Add(2 * time.Minute)
	if _, err := f.Chart(ctx, spec, nil); err != nil {
		t.Fatal(err)
	}
	if got := r.count("/index.yaml"); got != 2 {
		t.Fatalf("the index was fetched %d times after its TTL, want 2", got)
	}
	if got := r.count("/charts/demo-1.0.0.tgz"); got != 1 {
		t.Fatalf("the archive was fetched %d times, want once", got)
	}
}

// TestRepoChartOutlivesARepositoryOutage: once the index has expired, a
// repository that cannot be read for a while (a server error, no
// connection) does not stop the chart it served: the index read last is
// used for IndexStaleFor after it was read, and the chart says so. A
// client error, a refresh, or an index past that time fail as before.
func TestRepoChartOutlivesARepositoryOutage(t *testing.T) {
	r := newChartRepo(t)
	r.put("/charts/demo-1.0.0.tgz", chartArchive(t, "demo", "1.0.0"))
	r.index("demo", map[string]string{"1.0.0": "charts/demo-1.0.0.tgz"})
	now := time.Unix(1700000000, 0)
	f := newTestFetcher(t, Options{IndexTTL: time.Minute, IndexStaleFor: time.Hour, Now: func() time.Time { return now }}, r.Server)
	spec := capstanv1.ChartSource{Repo: r.URL, Name: "demo", Version: "1.0.0"}
	ctx := context.Background()
	if c, err := f.Chart(ctx, spec, nil); err != nil || c.StaleIndex != "" {
		t.Fatalf("got %v, stale %q", err, c.StaleIndex)
	}

	r.answer("/index.yaml", http.StatusBadGateway)
	now = now.Add(2 * time.Minute)
	c, err := f.Chart(ctx, spec, nil)
	if err != nil {
		t.Fatalf("during the outage: %v", err)
	}
	if c.Version != "1.0.0" || !strings.Contains(c.StaleIndex, "index.yaml: HTTP 502") || !strings.Contains(c.StaleIndex, "the index read at 2023-11-14T22:13:20Z is used until 2023-11-14T23:13:20Z") {
		t.Fatalf("got %s, stale %q", c.Version, c.StaleIndex)
	}
	if a := ChartArtifact(&spec, c); a.Stale != c.StaleIndex {
		t.Fatalf("the artifact says %q", a.Stale)
	}
	if got := r.count("/charts/demo-1.0.0.tgz"); got != 1 {
		t.Fatalf("the archive was fetched %d times, want once", got)
	}
	if _, err := f.Refetch(ctx, capstanv1.AddonSpec{Chart: &spec}, nil); err == nil || !strings.Contains(err.Error(), "HTTP 502") {
		t.Fatalf("a refresh during the outage: %v, want the error", err)
	}
	// A version the older copy does not list may be in the repository's
	// index: the failure to read it is the error, which is retried.
	newer := capstanv1.ChartSource{Repo: r.URL, Name: "demo", Version: "1.1.0"}
	var fe *FetchError
	if _, err := f.Chart(ctx, newer, nil); !errors.As(err, &fe) || fe.Status != http.StatusBadGateway || !strings.Contains(err.Error(), "does not list it") {
		t.Fatalf("a version the older copy does not list: %v, want the failure to read the index", err)
	}

	r.answer("/index.yaml", http.StatusNotFound)
	if _, err := f.Chart(ctx, spec, nil); err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Fatalf("a repository gone: %v, want the error", err)
	}

	r.answer("/index.yaml", http.StatusServiceUnavailable)
	now = now.Add(time.Hour)
	if _, err := f.Chart(ctx, spec, nil); err == nil || !strings.Contains(err.Error(), "HTTP 503") {
		t.Fatalf("an hour after the index was read: %v, want the error", err)
	}

	r.answer("/index.yaml", 0)
	if c, err := f.Chart(ctx, spec, nil); err != nil || c.StaleIndex != "" {
		t.Fatalf("after the outage: %v, stale %q", err, c.StaleIndex)
	}
}

// TestRepoChartRereadsTheIndexForANewVersion: a version published after
// the index was cached is found once the index is 10 s old, without
// waiting for IndexTTL; an index read a moment ago is the answer.
func TestRepoChartRereadsTheIndexForANewVersion(t *testing.T) {
	r := newChartRepo(t)
	r.put("/charts/demo-1.0.0.tgz", chartArchive(t, "demo", "1.0.0"))
	r.index("demo", map[string]string{"1.0.0": "charts/demo-1.0.0.tgz"})
	now := time.Unix(1700000000, 0)
	f := newTestFetcher(t, Options{IndexTTL: 5 * time.Minute, Now: func() time.Time { return now }}, r.Server)
	ctx := context.Background()
	if _, err := f.Chart(ctx, capstanv1.ChartSource{Repo: r.URL, Name: "demo", Version: "1.0.0"}, nil); err != nil {
		t.Fatal(err)
	}

	r.put("/charts/demo-1.1.0.tgz", chartArchive(t, "demo", "1.1.0"))
	r.index("demo", map[string]string{"1.0.0": "charts/demo-1.0.0.tgz", "1.1.0": "charts/demo-1.1.0.tgz"})
	newer := capstanv1.ChartSource{Repo: r.URL, Name: "demo", Version: "1.1.0"}
	now = now.Add(5 * time.Second)
	if _, err := f.Chart(ctx, newer, nil); err == nil || !strings.Contains(err.Error(), "no version matching 1.1.0") {
		t.Fatalf("5 s after the index was read: %v; want the version not found", err)
	}
	if got := r.count("/index.yaml"); got != 1 {
		t.Fatalf("the index was read %d times within 10 s, want once", got)
	}
	now = now.Add(10 * time.Second)
	c, err := f.Chart(ctx, newer, nil)
	if err != nil || c.Version != "1.1.0" {
		t.Fatalf("15 s after the index was read: %v; want 1.1.0 found", err)
	}
	if got := r.count("/index.yaml"); got != 2 {
		t.Fatalf("the index was read %d times, want twice", got)
	}
	// What the cached index lists needs no new read.
	now = now.Add(time.Minute)
	if _, err := f.Chart(ctx, capstanv1.ChartSource{Repo: r.URL, Name: "demo", Version: "^1"}, nil); err != nil {
		t.Fatal(err)
	}
	if got := r.count("/index.yaml"); got != 2 {
		t.Fatalf("the index was read %d times for a version it lists, want twice", got)
	}
}

func TestRepoChartAbsoluteURLAndCredentialsStayOnRepoHost(t *testing.T) {
	r := newChartRepo(t)
	other := newChartRepo(t)
	other.put("/elsewhere/demo-1.0.0.tgz", chartArchive(t, "demo", "1.0.0"))
	// other is on 127.0.0.1 too, but a different port: another host for credentials.
	r.index("demo", map[string]string{"1.0.0": other.URL + "/elsewhere/demo-1.0.0.tgz"})
	r.auth = [2]string{"alice", "s3cret"}
	f := newTestFetcher(t, Options{}, r.Server, other.Server)
	spec := capstanv1.ChartSource{Repo: r.URL, Name: "demo"}

	_, err := f.Chart(context.Background(), spec, nil)
	if err == nil || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), "secretRef") {
		t.Fatalf("want a 401 that names secretRef, got %v", err)
	}
	c, err := f.Chart(context.Background(), spec, &Credentials{Username: "alice", Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Version != "1.0.0" || !strings.HasPrefix(c.URL, other.URL) {
		t.Fatalf("got %s from %s", c.Version, c.URL)
	}
	if other.authSeen.Load() != 0 {
		t.Fatal("credentials were sent to a host other than the repository's")
	}
}

// TestCredentialsDoNotFollowARedirectToAnotherPort fetches an archive
// whose repository redirects it to a server on another port of 127.0.0.1:
// the archive is fetched, and the other server never sees the credentials.
func TestCredentialsDoNotFollowARedirectToAnotherPort(t *testing.T) {
	other := newChartRepo(t)
	other.put("/demo-1.0.0.tgz", chartArchive(t, "demo", "1.0.0"))
	r := newChartRepo(t)
	r.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if u, p, ok := req.BasicAuth(); !ok || u != "alice" || p != "s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		http.Redirect(w, req, other.URL+req.URL.Path, http.StatusFound)
	})
	f := newTestFetcher(t, Options{}, r.Server, other.Server)
	c, err := f.Chart(context.Background(), capstanv1.ChartSource{URL: r.URL + "/demo-1.0.0.tgz"}, &Credentials{Username: "alice", Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "demo" || other.count("/demo-1.0.0.tgz") != 1 {
		t.Fatalf("the archive was not fetched through the redirect: %+v", c)
	}
	if n := other.authSeen.Load(); n != 0 {
		t.Fatal("the credentials followed the redirect to another port")
	}
}

// TestChartRefusedWithoutCredentialsSaysSo: a chart that names no
// secretRef is fetched without credentials, so a 401 says the server wants
// some, not that the credentials of a Secret were refused; one fetched with
// credentials the server refuses says that.
func TestChartRefusedWithoutCredentialsSaysSo(t *testing.T) {
	r := newChartRepo(t)
	r.put("/demo-1.0.0.tgz", chartArchive(t, "demo", "1.0.0"))
	r.auth = [2]string{"alice", "s3cret"}
	f := newTestFetcher(t, Options{}, r.Server)
	spec := capstanv1.ChartSource{URL: r.URL + "/demo-1.0.0.tgz"}
	_, err := f.Chart(context.Background(), spec, nil)
	if err == nil || !strings.Contains(err.Error(), "without credentials") || !strings.Contains(err.Error(), "spec.chart.secretRef") || strings.Contains(err.Error(), "refused the credentials") {
		t.Errorf("a chart fetched without credentials, refused with 401: %v; want it to say the server refuses to serve it without credentials, naming spec.chart.secretRef", err)
	}
	_, err = f.Chart(context.Background(), spec, &Credentials{Username: "alice", Password: "wrong"})
	if err == nil || !strings.Contains(err.Error(), "refused the credentials") {
		t.Errorf("a chart fetched with credentials the server refuses: %v; want it to say so", err)
	}
}

// TestRefusalAfterARedirectJudgesTheHopThatAnswered: a repository that
// redirects its archive to a server on another port, which answers 403 (a
// signed address that expired), is judged at that server. Fetched with
// credentials, the error does not say they were refused, since they never
// went past the redirect; fetched without, it does not send the user to
// name a secretRef, which would not go there either. A document refused
// with 401 says it must be readable without credentials.
func TestRefusalAfterARedirectJudgesTheHopThatAnswered(t *testing.T) {
	cdn := newChartRepo(t)
	cdn.answer("/demo-1.0.0.tgz", http.StatusForbidden)
	r := newChartRepo(t)
	var needAuth atomic.Bool
	r.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if u, p, ok := req.BasicAuth(); needAuth.Load() && (!ok || u != "alice" || p != "s3cret") {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		http.Redirect(w, req, cdn.URL+req.URL.Path, http.StatusFound)
	})
	f := newTestFetcher(t, Options{}, r.Server, cdn.Server)
	spec := capstanv1.ChartSource{URL: r.URL + "/demo-1.0.0.tgz"}
	cdnHost := strings.TrimPrefix(cdn.URL, "https://")

	needAuth.Store(true)
	_, err := f.Chart(context.Background(), spec, &Credentials{Username: "alice", Password: "s3cret"})
	if err == nil || strings.Contains(err.Error(), "refused the credentials") || !strings.Contains(err.Error(), "redirect to "+cdnHost) {
		t.Errorf("a chart whose redirect with credentials is refused: %v; want it to name %s, which was sent none, not credentials refused", err, cdnHost)
	}
	needAuth.Store(false)
	_, err = f.Chart(context.Background(), spec, nil)
	if err == nil || strings.Contains(err.Error(), "secretRef") || !strings.Contains(err.Error(), "redirect to "+cdnHost) {
		t.Errorf("a chart whose redirect without credentials is refused: %v; want it to name %s, not a secretRef to add", err, cdnHost)
	}

	doc := newChartRepo(t)
	doc.answer("/addon.json", http.StatusUnauthorized)
	f = newTestFetcher(t, Options{}, doc.Server)
	_, err = f.Document(context.Background(), doc.URL+"/addon.json", NoRedirect, 1<<16, "the registration manifest")
	if err == nil || !strings.Contains(err.Error(), "without credentials; it must be readable without them") {
		t.Errorf("a manifest refused without credentials: %v; want it to say it must be readable without them", err)
	}
}

func TestCachedChartIsNotServedToOtherCredentials(t *testing.T) {
	r := newChartRepo(t)
	r.put("/demo-1.0.0.tgz", chartArchive(t, "demo", "1.0.0"))
	r.index("demo", map[string]string{"1.0.0": "demo-1.0.0.tgz"})
	r.auth = [2]string{"alice", "s3cret"}
	f := newTestFetcher(t, Options{}, r.Server)
	spec := capstanv1.ChartSource{Repo: r.URL, Name: "demo", Version: "1.0.0"}
	if _, err := f.Chart(context.Background(), spec, &Credentials{Username: "alice", Password: "s3cret"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Chart(context.Background(), spec, nil); err == nil {
		t.Fatal("a chart fetched with credentials was served to a fetch without them")
	}
	if _, err := f.Chart(context.Background(), spec, &Credentials{Username: "alice", Password: "wrong"}); err == nil {
		t.Fatal("a chart fetched with credentials was served to a fetch with other credentials")
	}
}

func TestArchiveURLWithDigest(t *testing.T) {
	r := newChartRepo(t)
	data := chartArchive(t, "demo", "3.2.1")
	r.put("/demo.tgz", data)
	f := newTestFetcher(t, Options{}, r.Server)
	spec := capstanv1.ChartSource{URL: r.URL + "/demo.tgz", Digest: Digest(data)}
	for i := 0; i < 2; i++ {
		c, err := f.Chart(context.Background(), spec, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.Version != "3.2.1" || c.Digest != spec.Digest {
			t.Fatalf("got %s %s", c.Version, c.Digest)
		}
	}
	if n := r.count("/demo.tgz"); n != 1 {
		t.Fatalf("fetched %d times, want once", n)
	}
}

// TestBadInput: each case is a clear error, and nothing is cached.
func TestBadInput(t *testing.T) {
	good := chartArchive(t, "demo", "1.0.0")
	deep := "demo/" + strings.Repeat("d/", 40) + "f.yaml"
	manyFiles := chartEntries("demo", "1.0.0")
	for i := 0; i < 30; i++ {
		manyFiles = append(manyFiles, file(fmt.Sprintf("demo/templates/f%d.yaml", i), "# empty\n"))
	}
	subchartWithDotDot := tgz(t, file("sub/Chart.yaml", "apiVersion: v2\nname: sub\nversion: 0.1.0\n"), file("sub/../../evil", "x"))
	tests := []struct {
		name    string
		archive []byte
		limits  Limits
		digest  string
		version string
		want    []string
	}{
		{name: "unknown version", archive: good, version: "9.9.9", want: []string{`chart "demo"`, "no version matching 9.9.9", "newest versions: 1.0.0", "spec.chart.version"}},
		{name: "wrong digest", archive: good, digest: "sha256:" + strings.Repeat("0", 64), want: []string{"has digest " + Digest(good), "pins sha256:" + strings.Repeat("0", 64)}},
		{name: "corrupt archive", archive: []byte("this is not a chart"), want: []string{"not a gzip-compressed tar archive"}},
		{name: "truncated archive", archive: good[:len(good)/2], want: []string{"truncated"}},
		{name: "tar with ../", archive: tgz(t, append(chartEntries("demo", "1.0.0"), file("demo/../../etc/cron.d/x", "boom"))...), want: []string{`"demo/../../etc/cron.d/x"`, `contains ".."`}},
		{name: "absolute path", archive: tgz(t, append(chartEntries("demo", "1.0.0"), file("/etc/passwd", "x"))...), want: []string{"absolute path"}},
		{name: "symlink", archive: tgz(t, append(chartEntries("demo", "1.0.0"), entry{name: "demo/templates/x.yaml", typeflag: tar.TypeSymlink, link: "/etc/shadow"})...), want: []string{"is a link"}},
		{name: "hardlink", archive: tgz(t, append(chartEntries("demo", "1.0.0"), entry{name: "demo/x", typeflag: tar.TypeLink, link: "demo/values.yaml"})...), want: []string{"is a link"}},
		{name: "device", archive: tgz(t, append(chartEntries("demo", "1.0.0"), entry{name: "demo/dev", typeflag: tar.TypeChar})...), want: []string{"only files and folders"}},
		{name: "oversized archive", archive: good, limits: Limits{MaxArchiveBytes: 100}, want: []string{"at most 100 bytes"}},
		{name: "unpacks too large", archive: tgz(t, append(chartEntries("demo", "1.0.0"), file("demo/big", strings.Repeat("a", 1<<20)))...), limits: Limits{MaxUncompressedBytes: 64 << 10}, want: []string{"unpacks to more than 65536 bytes"}},
		{name: "too many files", archive: tgz(t, manyFiles...), limits: Limits{MaxFiles: 10}, want: []string{"more than 10 files"}},
		{name: "too deep", archive: tgz(t, append(chartEntries("demo", "1.0.0"), file(deep, "x"))...), want: []string{"folders deep, over the limit of 32"}},
		{name: "two top folders", archive: tgz(t, append(chartEntries("demo", "1.0.0"), file("other/x", "x"))...), want: []string{"outside the chart's folder"}},
		{name: "subchart with ../", archive: tgz(t, append(chartEntries("demo", "1.0.0"), entry{name: "demo/charts/sub-0.1.0.tgz", typeflag: tar.TypeReg, body: string(subchartWithDotDot)})...), want: []string{"subchart charts/sub-0.1.0.tgz", `contains ".."`}},
		{name: "invalid Chart.yaml", archive: tgz(t, file("demo/Chart.yaml", "apiVersion: v2\nname: demo\nversion: [not, a, version]\n"), file("demo/values.yaml", "")), want: []string{"invalid chart", "Chart.yaml"}},
		{name: "Chart.yaml without version", archive: tgz(t, file("demo/Chart.yaml", "apiVersion: v2\nname: demo\n"), file("demo/values.yaml", "")), want: []string{"invalid chart", "version"}},
		{name: "no Chart.yaml", archive: tgz(t, file("demo/values.yaml", "a: 1\n")), want: []string{"invalid chart", "Chart.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newChartRepo(t)
			r.put("/demo-1.0.0.tgz", tt.archive)
			r.index("demo", map[string]string{"1.0.0": "demo-1.0.0.tgz"})
			f := newTestFetcher(t, Options{Limits: tt.limits}, r.Server)
			c, err := f.Chart(context.Background(), capstanv1.ChartSource{Repo: r.URL, Name: "demo", Version: tt.version, Digest: tt.digest}, nil)
			if err == nil {
				t.Fatalf("want an error, got chart %s %s", c.Name, c.Version)
			}
			t.Log(err)
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\n does not say %q", err, w)
				}
			}
			if n, b := f.charts.stats(); n != 0 || b != 0 {
				t.Fatalf("the chart cache holds %d entries after an error", n)
			}
		})
	}
}

func TestWrongDigestCachesNothingThenRightDigestWorks(t *testing.T) {
	r := newChartRepo(t)
	data := chartArchive(t, "demo", "1.0.0")
	r.put("/demo-1.0.0.tgz", data)
	r.index("demo", map[string]string{"1.0.0": "demo-1.0.0.tgz"})
	f := newTestFetcher(t, Options{}, r.Server)
	spec := capstanv1.ChartSource{Repo: r.URL, Name: "demo", Version: "1.0.0", Digest: "sha256:" + strings.Repeat("a", 64)}
	_, err := f.Chart(context.Background(), spec, nil)
	var mm *DigestMismatchError
	if !errors.As(err, &mm) || mm.Actual != Digest(data) {
		t.Fatalf("want a digest mismatch, got %v", err)
	}
	spec.Digest = Digest(data)
	if _, err := f.Chart(context.Background(), spec, nil); err != nil {
		t.Fatal(err)
	}
	// A cached chart with another digest does not satisfy a new pin: it is fetched again and refused.
	spec.Digest = "sha256:" + strings.Repeat("b", 64)
	if _, err := f.Chart(context.Background(), spec, nil); !errors.As(err, &mm) {
		t.Fatalf("want a digest mismatch against the cache, got %v", err)
	}
	if n := r.count("/demo-1.0.0.tgz"); n != 3 {
		t.Fatalf("archive fetched %d times, want 3 (mismatch, fetch, mismatch again)", n)
	}
}

// specProblems are the cases of TestRepoErrors that only a change to the
// spec fixes.
var specProblems = map[string]bool{
	"invalid range": true, "plain http": true, "credentials in URL": true, "two sources": true, "bad digest": true,
	"a version that is no version": true, "no name": true,
}

func TestRepoErrors(t *testing.T) {
	r := newChartRepo(t)
	r.index("demo", map[string]string{"1.0.0": "demo-1.0.0.tgz"})
	empty := newChartRepo(t)
	broken := newChartRepo(t)
	broken.put("/index.yaml", []byte("entries: [this is: not an index"))
	port := closedPort(t)
	tests := []struct {
		name string
		spec capstanv1.ChartSource
		want []string
	}{
		{"unreachable repository", capstanv1.ChartSource{Repo: fmt.Sprintf("https://127.0.0.1:%d/charts", port), Name: "demo"},
			[]string{fmt.Sprintf("cannot fetch https://127.0.0.1:%d/charts/index.yaml", port), "connection refused", "check spec.chart.repo"}},
		{"unknown chart", capstanv1.ChartSource{Repo: r.URL, Name: "nope"}, []string{`chart "nope" is not in the repository`}},
		{"archive missing", capstanv1.ChartSource{Repo: r.URL, Name: "demo"}, []string{"HTTP 404"}},
		{"no index", capstanv1.ChartSource{Repo: empty.URL, Name: "demo"}, []string{"index.yaml: HTTP 404"}},
		{"broken index", capstanv1.ChartSource{Repo: broken.URL, Name: "demo"}, []string{"index.yaml of", "not valid YAML"}},
		{"invalid range", capstanv1.ChartSource{Repo: r.URL, Name: "demo", Version: ">>1"}, []string{"neither a version nor a semver range"}},
		{"a version that is no version", capstanv1.ChartSource{Repo: r.URL, Name: "demo", Version: "lastest"}, []string{`spec.chart.version "lastest" is neither a version nor a semver range`}},
		{"no name", capstanv1.ChartSource{Repo: r.URL}, []string{"spec.chart.name is required"}},
		{"plain http", capstanv1.ChartSource{Repo: "http://127.0.0.1/", Name: "demo"}, []string{"must be an https URL"}},
		{"credentials in URL", capstanv1.ChartSource{URL: "https://u:hunter2@127.0.0.1/x.tgz"}, []string{"must not hold credentials"}},
		{"two sources", capstanv1.ChartSource{URL: "https://127.0.0.1/x.tgz", OCI: "oci://127.0.0.1/x"}, []string{"exactly one"}},
		{"bad digest", capstanv1.ChartSource{URL: "https://127.0.0.1/x.tgz", Digest: "md5:abc"}, []string{"not \"sha256:\""}},
	}
	f := newTestFetcher(t, Options{}, r.Server, empty.Server, broken.Server)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.Chart(context.Background(), tt.spec, nil)
			if err == nil {
				t.Fatal("want an error")
			}
			t.Log(err)
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\n does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatal("the error shows a password")
			}
			// A spec wrong in itself is a SpecError, which the controller
			// stalls on; a source that fails is not.
			var se *SpecError
			if got, want := errors.As(err, &se), specProblems[tt.name]; got != want {
				t.Fatalf("a SpecError: %v, want %v", got, want)
			}
			if n, _ := f.charts.stats(); n != 0 {
				t.Fatal("something was cached")
			}
		})
	}
}

// TestGuardRefusesLocalhost: a URL whose name resolves to 127.0.0.1 is
// refused when 127.0.0.1 is not allow-listed, and the server sees no connection.
func TestGuardRefusesLocalhost(t *testing.T) {
	s, ln := tlsServerOn(t, "127.0.0.1:0", http.NotFoundHandler())
	port := s.Listener.Addr().(interface{ String() string }).String()
	port = port[strings.LastIndex(port, ":")+1:]
	f := newTestFetcher(t, Options{Guard: netguard.Config{Allow: []string{}}}, s)
	for _, spec := range []capstanv1.ChartSource{
		{Repo: "https://localhost:" + port + "/", Name: "demo"},
		{URL: "https://localhost:" + port + "/demo.tgz"},
		{URL: s.URL + "/demo.tgz"},
	} {
		_, err := f.Chart(context.Background(), spec, nil)
		if !netguard.IsRefused(err) {
			t.Fatalf("%+v: want a refusal, got %v", spec, err)
		}
		if !strings.Contains(err.Error(), "loopback") || !strings.Contains(err.Error(), "fetch guard") {
			t.Fatalf("the refusal must say why: %v", err)
		}
	}
	if n := ln.accepted.Load(); n != 0 {
		t.Fatalf("the server accepted %d connections", n)
	}
}

// TestRefusedRedirectNamesItsOriginOnly: a chart repository and a
// registry on the allow-listed 127.0.0.1 redirect an archive and a blob to
// a signed address on 127.0.0.2, which the guard refuses before any
// connection, with a token in the path and in the query, as a CDN hands
// one out. The error names 127.0.0.2 by its origin, neither token.
func TestRefusedRedirectNamesItsOriginOnly(t *testing.T) {
	target, targetLn := tlsServerOn(t, "127.0.0.2:0", http.NotFoundHandler())
	signed := target.URL + "/t/eyJhbGciOiJIUzI1NiJ9.pathtoken"
	r := newChartRepo(t)
	r.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, signed+req.URL.Path+"?X-Signature=topsecret", http.StatusFound)
	})
	reg := newOCIRegistry(t, "", "")
	reg.push(t, chartArchive(t, "demo", "1.0.0"), "charts/demo:1.0.0", "", "")
	reg.redirectBlobs(signed)
	f := newTestFetcher(t, Options{}, r.Server, reg.Server, target)

	for name, spec := range map[string]capstanv1.ChartSource{
		"an https chart": {URL: r.URL + "/demo-1.0.0.tgz"},
		"an OCI chart":   {OCI: "oci://" + reg.host + "/charts/demo", Version: "1.0.0"},
	} {
		_, err := f.Chart(context.Background(), spec, nil)
		if !netguard.IsRefused(err) || !strings.Contains(err.Error(), "redirect to "+target.URL+": fetch guard refused") ||
			strings.Contains(err.Error(), "pathtoken") || strings.Contains(err.Error(), "topsecret") {
			t.Errorf("%s redirected to a refused signed address: %v; want the refusal to name %s alone", name, err, target.URL)
		}
	}
	if n := targetLn.accepted.Load(); n != 0 {
		t.Fatalf("127.0.0.2 accepted %d connections", n)
	}
}

// TestGuardRefusesRedirectTo127002: the allow-listed repository on 127.0.0.1
// redirects the archive to 127.0.0.2, which is refused before any connection.
func TestGuardRefusesRedirectTo127002(t *testing.T) {
	target, targetLn := tlsServerOn(t, "127.0.0.2:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(chartArchive(t, "demo", "1.0.0"))
	}))
	r := newChartRepo(t)
	r.index("demo", map[string]string{"1.0.0": "demo-1.0.0.tgz"})
	redirect := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, target.URL+"/demo-1.0.0.tgz", http.StatusFound)
	})
	r.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/index.yaml" {
			_, _ = w.Write(r.files["/index.yaml"])
			return
		}
		redirect(w, req)
	})
	f := newTestFetcher(t, Options{}, r.Server, target)
	_, err := f.Chart(context.Background(), capstanv1.ChartSource{Repo: r.URL, Name: "demo"}, nil)
	if !netguard.IsRefused(err) || !strings.Contains(err.Error(), "127.0.0.2") {
		t.Fatalf("want a refusal of 127.0.0.2, got %v", err)
	}
	if n := targetLn.accepted.Load(); n != 0 {
		t.Fatalf("127.0.0.2 accepted %d connections", n)
	}
	if n, _ := f.charts.stats(); n != 0 {
		t.Fatal("something was cached")
	}
}

func TestLoadChart(t *testing.T) {
	dir := t.TempDir()
	data := chartArchive(t, "demo", "1.2.3")
	if err := writeFile(dir+"/demo-1.2.3.tgz", data); err != nil {
		t.Fatal(err)
	}
	c, err := LoadChart(dir + "/demo-1.2.3.tgz")
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "demo" || c.Version != "1.2.3" || c.Digest != Digest(data) {
		t.Fatalf("got %+v", c)
	}

	chartDir := dir + "/demo"
	for _, e := range chartEntries("demo", "1.2.3") {
		if err := writeFile(dir+"/"+e.name, []byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	c1, err := LoadChart(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if c1.Name != "demo" || len(c1.Chart.Templates) != 1 || !strings.HasPrefix(c1.Digest, "sha256:") {
		t.Fatalf("got %+v", c1)
	}
	if err := writeFile(chartDir+"/values.yaml", []byte("replicas: 2\n")); err != nil {
		t.Fatal(err)
	}
	c2, err := LoadChart(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if c2.Digest == c1.Digest {
		t.Fatal("a folder's digest must change with its files")
	}

	if err := symlink("/etc/passwd", chartDir+"/templates/passwd.yaml"); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadChart(chartDir); err == nil || !strings.Contains(err.Error(), "leaves the chart folder") {
		t.Fatalf("want a refusal of the link, got %v", err)
	}

	if err := writeFile(dir+"/bad.tgz", tgz(t, append(chartEntries("demo", "1.0.0"), file("demo/../x", "x"))...)); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadChart(dir + "/bad.tgz"); err == nil || !strings.Contains(err.Error(), `contains ".."`) {
		t.Fatalf("want a refusal, got %v", err)
	}
	if _, err := LoadChart(dir + "/missing"); err == nil {
		t.Fatal("want an error")
	}
}

func TestSubchartsLoad(t *testing.T) {
	sub := chartArchive(t, "sub", "0.1.0")
	parent := tgz(t,
		file("app/Chart.yaml", "apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n- name: sub\n  version: 0.1.0\n"),
		file("app/values.yaml", ""),
		entry{name: "app/charts/sub-0.1.0.tgz", typeflag: tar.TypeReg, body: string(sub)},
	)
	c, err := loadArchive(parent, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Dependencies()) != 1 || c.Dependencies()[0].Name() != "sub" {
		t.Fatalf("dependencies: %v", c.Dependencies())
	}
	// The subchart's files count against the parent's budget.
	if _, err := loadArchive(parent, Limits{MaxFiles: 4}.withDefaults()); err == nil || !strings.Contains(err.Error(), "more than 4 files") {
		t.Fatalf("want the file limit to count subchart files, got %v", err)
	}
}

func TestParseIndexKeepsWhatHelmKeeps(t *testing.T) {
	const head = "apiVersion: v1\nentries:\n  demo:\n  - apiVersion: v2\n    name: demo\n    version: 1.0.0\n    urls: [demo-1.0.0.tgz]\n"
	tests := []struct {
		name  string
		entry string // the rest of the one entry
		kept  bool
	}{
		{"a plain entry", "", true},
		{"dependencies with distinct names", "    dependencies:\n    - name: redis\n    - name: postgresql\n", true},
		// Artifactory strips aliases from the index (helm/helm#12748).
		{"dependencies whose aliases were stripped", "    dependencies:\n    - name: redis\n      version: 1.0.0\n    - name: redis\n      version: 1.0.0\n", true},
		{"the same alias twice", "    dependencies:\n    - name: a\n      alias: cache\n    - name: b\n      alias: cache\n", true},
		{"an alias Helm refuses", "    dependencies:\n    - name: redis\n      alias: not/valid\n", false},
		{"a chart type Helm refuses", "    type: plugin\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx, err := parseIndex(context.Background(), []byte(head+tt.entry))
			if err != nil {
				t.Fatal(err)
			}
			if got := len(idx.Entries["demo"]) == 1; got != tt.kept {
				t.Fatalf("kept %v, want %v", got, tt.kept)
			}
		})
	}
}

func TestIndexParsesAreBounded(t *testing.T) {
	r := newChartRepo(t)
	r.put("/charts/demo-1.0.0.tgz", chartArchive(t, "demo", "1.0.0"))
	r.index("demo", map[string]string{"1.0.0": "charts/demo-1.0.0.tgz"})
	f := newTestFetcher(t, Options{}, r.Server)
	spec := capstanv1.ChartSource{Repo: r.URL, Name: "demo", Version: "1.0.0"}
	// Two parses run elsewhere in the process: this one waits its turn,
	// and its caller stops waiting when its context ends (the shared
	// fetch waits on, under its own time bound).
	for range cap(indexParses) {
		indexParses <- struct{}{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := f.Chart(ctx, spec, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		<-indexParses
		<-indexParses
		t.Fatalf("got %v, want a wait for a turn to parse", err)
	}
	<-indexParses
	if _, err := f.Chart(context.Background(), spec, nil); err != nil {
		t.Fatal(err)
	}
	<-indexParses
}

func TestUnchangedIndexIsNotParsedAgain(t *testing.T) {
	r := newChartRepo(t)
	r.put("/charts/demo-1.0.0.tgz", chartArchive(t, "demo", "1.0.0"))
	r.index("demo", map[string]string{"1.0.0": "charts/demo-1.0.0.tgz"})
	now := time.Unix(1700000000, 0)
	f := newTestFetcher(t, Options{Now: func() time.Time { return now }}, r.Server)
	missing := capstanv1.ChartSource{Repo: r.URL, Name: "demo", Version: "9.9.9"}
	if _, err := f.Chart(context.Background(), missing, nil); err == nil {
		t.Fatal("want the version not found")
	}
	key := r.URL + "\x00" + (*Credentials)(nil).cacheKey()
	first, _ := f.indexes.get(key)
	now = now.Add(15 * time.Second)
	if _, err := f.Chart(context.Background(), missing, nil); err == nil {
		t.Fatal("want the version not found")
	}
	if got := r.count("/index.yaml"); got != 2 {
		t.Fatalf("the index was read %d times, want twice", got)
	}
	again, _ := f.indexes.get(key)
	if again.index != first.index {
		t.Fatal("the same index.yaml was parsed again")
	}
	if !again.fetched.Equal(now) {
		t.Fatal("the index read again does not count as fresh")
	}
}

// TestHostileIndexIsRefusedQuickly: a small gzip-compressed response that
// unpacks to an index of millions of tiny versions is refused at once,
// saying which bound, and does not hold up another repository's fetch.
func TestHostileIndexIsRefusedQuickly(t *testing.T) {
	for _, tt := range []struct {
		name, head, item, tail, bound string
	}{
		{"as Helm writes it", "apiVersion: v1\nentries:\n  demo:\n", "  - {}\n", "", "(MaxIndexVersions)"},
		// NOTE: an index that cannot be cut is parsed whole, and a whole
		// parse of 8 MiB of empty versions would take near 900 MiB.
		{"flow style", "apiVersion: v1\nentries: {demo: [", "{},", "]}\n", "(MaxWholeIndexValues)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hostileIndexIsRefusedQuickly(t, tt.head, tt.item, tt.tail, tt.bound)
		})
	}
}

func hostileIndexIsRefusedQuickly(t *testing.T, head, item, tail, bound string) {
	var packed bytes.Buffer
	zw := gzip.NewWriter(&packed)
	_, _ = zw.Write([]byte(head))
	_, _ = zw.Write(bytes.Repeat([]byte(item), (MaxWholeIndexBytes-len(head)-len(tail))/len(item)))
	_, _ = zw.Write([]byte(tail))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	hostile := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(packed.Bytes())
	}))
	t.Cleanup(hostile.Close)
	r := newChartRepo(t)
	r.put("/charts/demo-1.0.0.tgz", chartArchive(t, "demo", "1.0.0"))
	r.index("demo", map[string]string{"1.0.0": "charts/demo-1.0.0.tgz"})
	f := newTestFetcher(t, Options{}, r.Server, hostile)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	start := time.Now()
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := f.Chart(ctx, capstanv1.ChartSource{Repo: hostile.URL, Name: "demo"}, nil)
			errs <- err
		}()
	}
	if _, err := f.Chart(ctx, capstanv1.ChartSource{Repo: r.URL, Name: "demo", Version: "1.0.0"}, nil); err != nil {
		t.Fatalf("another repository's chart: %v", err)
	}
	for range 2 {
		err := <-errs
		if err == nil || !strings.Contains(err.Error(), "index.yaml of "+hostile.URL) || !strings.Contains(err.Error(), bound) {
			t.Fatalf("got %v, want the index refused for %s", err, bound)
		}
	}
	t.Logf("%d bytes on the wire refused in %s", packed.Len(), time.Since(start))
	if n, _ := f.indexes.stats(); n != 1 {
		t.Fatalf("the index cache holds %d indexes, want the good one alone", n)
	}
}

// TestUnreachable decides, on real fetches, which failures pass with
// time and so let a cached index be used a while longer.
func TestUnreachable(t *testing.T) {
	r := newChartRepo(t)
	r.put("/big", []byte(strings.Repeat("x", 100)))
	r.answer("/502", http.StatusBadGateway)
	r.answer("/404", http.StatusNotFound)
	r.answer("/401", http.StatusUnauthorized)
	r.answer("/429", http.StatusTooManyRequests)
	f := newTestFetcher(t, Options{}, r.Server)
	guarded := newTestFetcher(t, Options{Guard: netguard.Config{Allow: []string{}}}, r.Server)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		f    *Fetcher
		url  string
		want bool
	}{
		{"no connection", f, fmt.Sprintf("https://127.0.0.1:%d/index.yaml", closedPort(t)), true},
		{"a server error", f, r.URL + "/502", true},
		{"too many requests", f, r.URL + "/429", true},
		{"not found", f, r.URL + "/404", false},
		{"credentials refused", f, r.URL + "/401", false},
		{"too large", f, r.URL + "/big", false},
		{"refused by the fetch guard", guarded, r.URL + "/big", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.f.Document(ctx, tc.url, NoRedirect, 10, "the test URL")
			if err == nil {
				t.Fatal("want an error")
			}
			if got := unreachable(err); got != tc.want {
				t.Fatalf("unreachable(%v) = %v, want %v", err, got, tc.want)
			}
		})
	}
	if unreachable(errors.New("index.yaml of x: it is not valid YAML")) {
		t.Fatal("an index that does not parse passes with time")
	}
}

// TestDocumentFollowsNoRedirect reads a document from a loopback server
// that redirects to another, which serves it: with NoRedirect the read
// stops at the redirect, with an error saying so and where it pointed
// (without user information), and the other server is not asked. With
// FollowRedirects, as a chart download from the same server, it follows.
func TestDocumentFollowsNoRedirect(t *testing.T) {
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`{"name":"wiki"}`))
	}))
	defer target.Close()
	withUser := strings.Replace(target.URL, "http://", "http://admin:s3cret@", 1)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, withUser+"/admin", http.StatusFound)
	}))
	defer redirector.Close()
	f := newTestFetcher(t, Options{})
	_, err := f.Document(context.Background(), redirector.URL+"/m.json", NoRedirect, 1<<16, "the manifest")
	var fe *FetchError
	if !errors.As(err, &fe) || fe.Status != http.StatusFound || !strings.Contains(err.Error(), "not redirected") {
		t.Fatalf("Document = %v, want the redirect refused", err)
	}
	if !strings.Contains(err.Error(), "redirect to "+target.URL+"/admin") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Document = %v, want where the redirect pointed, without its user information", err)
	}
	if hits.Load() != 0 {
		t.Fatalf("the redirect's target was asked %d times, want none", hits.Load())
	}
	// A Location whose query (which url.URL.String leaves as it came)
	// holds a right-to-left override and a space is shown escaped, in
	// printable ASCII only.
	spoof := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Location", "/next?x=a\u202eb c#\u202e")
		w.WriteHeader(http.StatusFound)
	}))
	defer spoof.Close()
	_, err = f.Document(context.Background(), spoof.URL+"/m.json", NoRedirect, 1<<16, "the manifest")
	if err == nil || !strings.Contains(err.Error(), "redirect to "+spoof.URL+"/next?x=a%E2%80%AEb%20c#%E2%80%AE,") {
		t.Errorf("Document = %v, want the Location escaped", err)
	}
	for _, r := range fmt.Sprint(err) {
		if (r < ' ' || r > '~') && r != '…' {
			t.Errorf("Document = %q, holds %U", err, r)
			break
		}
	}
	if data, err := f.Document(context.Background(), redirector.URL+"/m.json", FollowRedirects, 1<<16, "the manifest"); err != nil || string(data) != `{"name":"wiki"}` || hits.Load() != 1 {
		t.Fatalf("Document following redirects: %q, %v, %d reads of the target; want the redirect followed", data, err, hits.Load())
	}
	if _, err := f.get(context.Background(), redirector.URL+"/c.tgz", httpAuth{}, 1<<16, "spec.chart.url"); err != nil || hits.Load() != 2 {
		t.Fatalf("a chart download: %v, %d reads of the target; want the redirect followed", err, hits.Load())
	}
}

// TestDocumentSaysItsLimit reads a document over its limit: the error
// names the document and its limit, and is a TooLargeError.
func TestDocumentSaysItsLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/sized" {
			w.Header().Set("Content-Length", "70000")
		}
		_, _ = w.Write(bytes.Repeat([]byte("x"), 70000))
	}))
	defer srv.Close()
	f := newTestFetcher(t, Options{})
	for path, want := range map[string]string{
		"/sized":    "the manifest is 70000 bytes; at most 64 KiB",
		"/streamed": "the manifest is more than 64 KiB, its limit",
	} {
		_, err := f.Document(context.Background(), srv.URL+path, NoRedirect, 64<<10, "the manifest")
		var tl *TooLargeError
		if !errors.As(err, &tl) || !strings.Contains(err.Error(), want) {
			t.Errorf("Document(%s) = %v, want %q", path, err, want)
		}
	}
}
