package source

import (
	"context"
	"testing"
	"time"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// rebuilt is chart name at version with other contents: the same name
// pushed again.
func rebuilt(t *testing.T, name, version string) []byte {
	t.Helper()
	entries := chartEntries(name, version)
	entries[1] = file(name+"/values.yaml", "replicas: 2\n")
	return tgz(t, entries...)
}

// TestRefetchReadsPastTheCaches: what a refresh asks for. Fetch serves a
// version range from the cached index and a URL or an OCI tag from the
// cached chart; Refetch reads each again, and what it read is what Fetch
// serves afterwards.
func TestRefetchReadsPastTheCaches(t *testing.T) {
	ctx := context.Background()
	t.Run("a version range in a chart repository", func(t *testing.T) {
		r := newChartRepo(t)
		r.put("/charts/demo-1.0.0.tgz", chartArchive(t, "demo", "1.0.0"))
		r.index("demo", map[string]string{"1.0.0": "charts/demo-1.0.0.tgz"})
		now := time.Unix(1700000000, 0)
		f := newTestFetcher(t, Options{IndexTTL: 5 * time.Minute, Now: func() time.Time { return now }}, r.Server)
		spec := capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{Repo: r.URL, Name: "demo", Version: "^1"}}
		if a, err := f.Fetch(ctx, spec, nil); err != nil || a.Version != "1.0.0" {
			t.Fatalf("first fetch: %v, %v", a, err)
		}
		r.put("/charts/demo-1.1.0.tgz", chartArchive(t, "demo", "1.1.0"))
		r.index("demo", map[string]string{"1.0.0": "charts/demo-1.0.0.tgz", "1.1.0": "charts/demo-1.1.0.tgz"})
		now = now.Add(time.Minute)
		if a, err := f.Fetch(ctx, spec, nil); err != nil || a.Version != "1.0.0" {
			t.Fatalf("within the index's TTL: %v, %v; want 1.0.0 from the cached index", a, err)
		}
		a, err := f.Refetch(ctx, spec, nil)
		if err != nil || a.Version != "1.1.0" {
			t.Fatalf("refetch: %v, %v; want 1.1.0", a, err)
		}
		if got := r.count("/index.yaml"); got != 2 {
			t.Fatalf("the index was read %d times, want twice", got)
		}
		if a, err := f.Fetch(ctx, spec, nil); err != nil || a.Version != "1.1.0" || r.count("/index.yaml") != 2 {
			t.Fatalf("after the refetch: %v, %v, %d index reads; want 1.1.0 from the index the refetch read", a, err, r.count("/index.yaml"))
		}
	})
	t.Run("an https archive pushed again", func(t *testing.T) {
		r := newChartRepo(t)
		r.put("/demo.tgz", chartArchive(t, "demo", "1.0.0"))
		f := newTestFetcher(t, Options{}, r.Server)
		spec := capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: r.URL + "/demo.tgz"}}
		first, err := f.Fetch(ctx, spec, nil)
		if err != nil {
			t.Fatal(err)
		}
		again := rebuilt(t, "demo", "1.0.0")
		r.put("/demo.tgz", again)
		if a, err := f.Fetch(ctx, spec, nil); err != nil || a.Chart.Digest != first.Chart.Digest {
			t.Fatalf("fetch: %v; want the cached archive", err)
		}
		a, err := f.Refetch(ctx, spec, nil)
		if err != nil || a.Chart.Digest != Digest(again) {
			t.Fatalf("refetch: %v; want the archive served now, %s", err, Digest(again))
		}
		if got := r.count("/demo.tgz"); got != 2 {
			t.Fatalf("the archive was read %d times, want twice", got)
		}
		if a, err := f.Fetch(ctx, spec, nil); err != nil || a.Chart.Digest != Digest(again) {
			t.Fatalf("after the refetch: %v; want the new archive from the cache", err)
		}
	})
	t.Run("an OCI tag pushed again", func(t *testing.T) {
		r := newOCIRegistry(t, "", "")
		r.push(t, chartArchive(t, "demo", "1.0.0"), "charts/demo:1.0.0", "", "")
		f := newTestFetcher(t, Options{}, r.Server)
		spec := capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{OCI: "oci://" + r.host + "/charts/demo", Version: "1.0.0"}}
		first, err := f.Fetch(ctx, spec, nil)
		if err != nil {
			t.Fatal(err)
		}
		again := rebuilt(t, "demo", "1.0.0")
		r.push(t, again, "charts/demo:1.0.0", "", "")
		if a, err := f.Fetch(ctx, spec, nil); err != nil || a.Chart.Digest != first.Chart.Digest {
			t.Fatalf("fetch: %v; want the cached chart", err)
		}
		if a, err := f.Refetch(ctx, spec, nil); err != nil || a.Chart.Digest != Digest(again) {
			t.Fatalf("refetch: %v; want the chart the tag names now, %s", err, Digest(again))
		}
	})
}
