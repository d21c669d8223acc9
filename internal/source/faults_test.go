package source

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for h, want := range map[string]time.Duration{
		"":      0,
		"7":     7 * time.Second,
		"0":     0,
		"-5":    0,
		"soon":  0,
		"86400": MaxRetryAfter,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(-time.Hour).Format(http.TimeFormat):       0,
	} {
		if got := retryAfter(h, now); got != want {
			t.Errorf("retryAfter(%q) = %s, want %s", h, got, want)
		}
	}
}

// TestServersThatAskToWait checks that a chart repository answering 429,
// or 503 with Retry-After, gives a RetryAfterError with the time asked,
// and that a 503 without it stays a plain failure.
func TestServersThatAskToWait(t *testing.T) {
	status, after := 0, ""
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if after != "" {
			w.Header().Set("Retry-After", after)
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	f := newTestFetcher(t, Options{}, srv)
	for _, tc := range []struct {
		status int
		after  string
		want   time.Duration // -1: no RetryAfterError
	}{
		{429, "12", 12 * time.Second},
		{429, "", 0},
		{503, "3", 3 * time.Second},
		{503, "", -1},
	} {
		status, after = tc.status, tc.after
		_, err := f.Chart(context.Background(), capstanv1.ChartSource{Repo: srv.URL, Name: "demo"}, nil)
		var ra *RetryAfterError
		switch got := errors.As(err, &ra); {
		case tc.want < 0 && got:
			t.Errorf("%d without Retry-After gave %v", tc.status, err)
		case tc.want >= 0 && (!got || ra.After != tc.want):
			t.Errorf("%d Retry-After %q: got %v, want a RetryAfterError of %s", tc.status, tc.after, err, tc.want)
		case err == nil || !strings.Contains(err.Error(), fmt.Sprint(tc.status)):
			t.Errorf("%d: the error %v does not name the status", tc.status, err)
		}
	}
}

// TestIndexDigestMismatch serves an index.yaml whose digest does not match
// the archive: the fetch fails and says the repository is broken.
func TestIndexDigestMismatch(t *testing.T) {
	r := newChartRepo(t)
	r.put("/demo-1.0.0.tgz", chartArchive(t, "demo", "1.0.0"))
	r.put("/index.yaml", []byte("apiVersion: v1\nentries:\n  demo:\n  - apiVersion: v2\n    name: demo\n    version: 1.0.0\n    digest: "+
		strings.Repeat("ab", 32)+"\n    urls: [demo-1.0.0.tgz]\n"))
	f := newTestFetcher(t, Options{}, r.Server)
	_, err := f.Chart(context.Background(), capstanv1.ChartSource{Repo: r.URL, Name: "demo"}, nil)
	if err == nil || !strings.Contains(err.Error(), "index.yaml lists sha256:abab") || !strings.Contains(err.Error(), "nothing was applied") {
		t.Fatalf("got %v, want the digest mismatch named", err)
	}
	if n, _ := f.charts.stats(); n != 0 {
		t.Error("a mismatched archive was cached")
	}
	r.put("/index.yaml", []byte("apiVersion: v1\nentries:\n  demo:\n  - apiVersion: v2\n    name: demo\n    version: 1.0.0\n    digest: "+
		strings.TrimPrefix(Digest(chartArchive(t, "demo", "1.0.0")), "sha256:")+"\n    urls: [demo-1.0.0.tgz]\n"))
	f = newTestFetcher(t, Options{}, r.Server)
	if _, err := f.Chart(context.Background(), capstanv1.ChartSource{Repo: r.URL, Name: "demo"}, nil); err != nil {
		t.Fatalf("the right digest was refused: %v", err)
	}
}

// TestHostileValuesFiles loads charts whose values.yaml is nested past the
// YAML decoder's depth of 10,000: each ends with an error that names it,
// within a second or so, never a crash or a stack overflow.
func TestHostileValuesFiles(t *testing.T) {
	f := newTestFetcher(t, Options{})
	deep := strings.Repeat("[", 50000) + strings.Repeat("]", 50000)
	// NOTE: block style nested this deep is quadratic in size, and the size
	// limit refuses it first; flow style reaches the depth in a few bytes.
	mapping := strings.Repeat("{a: ", 12000) + "1" + strings.Repeat("}", 12000)
	for name, values := range map[string]string{"deep lists": deep, "deep mappings": mapping} {
		began := time.Now()
		archive := tgz(t, file("demo/Chart.yaml", "apiVersion: v2\nname: demo\nversion: 1.0.0\n"), file("demo/values.yaml", values))
		_, _, err := f.verify("test", archive, "")
		t.Logf("%s: %v in %s", name, err, time.Since(began).Round(time.Millisecond))
		if err == nil || !strings.Contains(err.Error(), "exceeded max depth") {
			t.Errorf("%s: got %v, want the depth named", name, err)
		}
	}
}

// TestLargeValuesFile loads a chart whose values.yaml is 50 MiB (5 MiB
// compressed, within the archive limits): it is refused before it is
// parsed, which would take some 2 GiB.
func TestLargeValuesFile(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 50<<20; i++ {
		fmt.Fprintf(&b, "key%d: value number %d of a large values file\n", i, i)
	}
	archive := tgz(t, file("demo/Chart.yaml", "apiVersion: v2\nname: demo\nversion: 1.0.0\n"), file("demo/values.yaml", b.String()))
	f := newTestFetcher(t, Options{})
	began := time.Now()
	_, _, err := f.verify("test", archive, "")
	t.Logf("%d bytes of archive: %v in %s", len(archive), err, time.Since(began).Round(time.Millisecond))
	if err == nil || !strings.Contains(err.Error(), "over the limit of 8388608 for a values file") {
		t.Fatalf("got %v, want the values file refused", err)
	}
}

// indexWithDigest is an index.yaml listing name at version, its archive at
// url with the sha256 digest (hex) given.
func indexWithDigest(name, version, url, digest string) []byte {
	return []byte(fmt.Sprintf("apiVersion: v1\nentries:\n  %s:\n  - apiVersion: v2\n    name: %s\n    version: %s\n    digest: %s\n    urls: [%s]\n",
		name, name, version, digest, url))
}

// TestRepoChartCacheFollowsTheIndexDigest: a chart pushed again at the
// same version (ChartMuseum, Artifactory and Harbor allow an overwrite)
// has a new digest in index.yaml. Once the index is read again, the new
// archive is fetched and checked against it, not the cached one served;
// an archive that does not match what the index lists is still refused.
func TestRepoChartCacheFollowsTheIndexDigest(t *testing.T) {
	r := newChartRepo(t)
	first := chartArchive(t, "demo", "1.0.0")
	r.put("/demo-1.0.0.tgz", first)
	r.put("/index.yaml", indexWithDigest("demo", "1.0.0", "demo-1.0.0.tgz", strings.TrimPrefix(Digest(first), "sha256:")))
	now := time.Unix(1700000000, 0)
	f := newTestFetcher(t, Options{IndexTTL: time.Minute, Now: func() time.Time { return now }}, r.Server)
	spec := capstanv1.ChartSource{Repo: r.URL, Name: "demo", Version: "1.0.0"}
	ctx := context.Background()
	if c, err := f.Chart(ctx, spec, nil); err != nil || c.Digest != Digest(first) {
		t.Fatalf("first fetch: %v, %v", c, err)
	}

	again := rebuilt(t, "demo", "1.0.0")
	r.put("/demo-1.0.0.tgz", again)
	r.put("/index.yaml", indexWithDigest("demo", "1.0.0", "demo-1.0.0.tgz", strings.TrimPrefix(Digest(again), "sha256:")))
	now = now.Add(2 * time.Minute)
	if c, err := f.Chart(ctx, spec, nil); err != nil || c.Digest != Digest(again) {
		t.Fatalf("after the chart was pushed again and the index expired: %v, %v; want the new archive, %s", c, err, Digest(again))
	}
	if got := r.count("/demo-1.0.0.tgz"); got != 2 {
		t.Fatalf("the archive was fetched %d times, want twice", got)
	}

	// The index lists a digest the archive served does not have.
	r.put("/index.yaml", indexWithDigest("demo", "1.0.0", "demo-1.0.0.tgz", strings.Repeat("ab", 32)))
	now = now.Add(2 * time.Minute)
	if _, err := f.Chart(ctx, spec, nil); err == nil || !strings.Contains(err.Error(), "index.yaml lists sha256:abab") {
		t.Fatalf("got %v, want the archive refused for the digest the index lists", err)
	}
}
