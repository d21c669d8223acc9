package source

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	repo "helm.sh/helm/v4/pkg/repo/v1"
)

// bigIndex is an index.yaml of charts × versions entries, laid out as
// Helm writes one.
func bigIndex(charts, versions int) []byte {
	var b bytes.Buffer
	b.WriteString("apiVersion: v1\nentries:\n")
	for c := range charts {
		fmt.Fprintf(&b, "  chart-%d:\n", c)
		for v := range versions {
			fmt.Fprintf(&b, "  - apiVersion: v2\n    appVersion: 1.%d.0\n    created: \"2024-01-01T00:00:00Z\"\n    description: A chart for testing the cost of an index, number %d\n    digest: %064x\n    home: https://example.com/chart-%d\n    keywords:\n    - test\n    - index\n    maintainers:\n    - email: someone@example.com\n      name: someone\n    name: chart-%d\n    sources:\n    - https://github.com/example/chart-%d\n    urls:\n    - https://charts.example.com/chart-%d-1.%d.0.tgz\n    version: 1.%d.0\n", v, c, c*versions+v, c, c, c, c, v, v)
		}
	}
	b.WriteString("generated: \"2024-01-01T00:00:00Z\"\n")
	return b.Bytes()
}

// BenchmarkIndexParse measures parsing a generated index.yaml of 10,000
// versions (about 5.3 MB), as the controller does once per read, cut into
// its versions and, for comparison, whole (as Helm parses one). It reports
// the live heap's peak over the parse, sampled every millisecond, and
// what the parsed index keeps.
func BenchmarkIndexParse(b *testing.B) {
	data := bigIndex(500, 20)
	for _, bb := range []struct {
		name  string
		parse func([]byte) (*repo.IndexFile, error)
	}{{"cut", func(data []byte) (*repo.IndexFile, error) { return parseIndex(context.Background(), data) }}, {"whole", wholeIndex}} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportMetric(float64(len(data)), "index-bytes")
			b.ReportAllocs()
			var peak, kept uint64
			for b.Loop() {
				runtime.GC()
				base := liveHeap()
				stop := samplePeak(&peak)
				idx, err := bb.parse(data)
				stop()
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				kept = liveHeap() - base
				runtime.KeepAlive(idx)
				peak -= base
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
			b.ReportMetric(float64(kept)/(1<<20), "kept-MiB")
		})
	}
}

// liveHeap is the bytes of live and not yet swept heap objects.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// samplePeak records the heap's peak in *peak until stop is called.
func samplePeak(peak *uint64) (stop func()) {
	*peak = liveHeap()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				*peak = max(*peak, liveHeap())
			}
		}
	}()
	return func() { close(done); <-finished; *peak = max(*peak, liveHeap()) }
}

// BenchmarkIndexReread measures reading the same index.yaml again, as a
// version the index does not list has it read every 10 s: fetched over
// loopback, and not parsed again.
func BenchmarkIndexReread(b *testing.B) {
	data := bigIndex(500, 20)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(data) }))
	defer srv.Close()
	f := newTestFetcher(b, Options{}, srv)
	base, _ := url.Parse(srv.URL)
	ctx := context.Background()
	if _, _, _, err := f.index(ctx, base, nil, 0); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(data)), "index-bytes")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := f.index(ctx, base, nil, 0); err != nil {
			b.Fatal(err)
		}
	}
}
