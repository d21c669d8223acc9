package render

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"capstan.dev/capstan/internal/source"
)

// largeChart is the generated chart of the benchmark: 110 components of a
// Deployment, a Service and a ConfigMap each.
var largeChart = filepath.Join("testdata", "charts", "large")

func TestLargeChartRenders300Objects(t *testing.T) {
	res, err := Helm(context.Background(), loadChart(t, "large"), nil, Options{ReleaseName: "big", Namespace: "big", Capabilities: testCaps})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != 330 {
		t.Errorf("rendered %d objects, want 330", len(res.Objects))
	}
}

// helmTemplateTime runs bin/helm template on the large chart n times and
// returns the median wall time. It reports false when bin/helm is missing.
func helmTemplateTime(b *testing.B, n int) (time.Duration, bool) {
	b.Helper()
	dir := os.Getenv("CAPSTAN_BIN_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "bin")
	}
	helm := filepath.Join(dir, "helm")
	if _, err := os.Stat(helm); err != nil {
		return 0, false
	}
	home := b.TempDir()
	times := make([]time.Duration, 0, n)
	for range n {
		cmd := exec.Command(helm, "template", "big", largeChart, "--namespace", "big", "--kube-version", "v1.33.2",
			"--api-versions", "example.com/v1", "--include-crds")
		cmd.Env = []string{"HOME=" + home, "HELM_CACHE_HOME=" + home, "HELM_CONFIG_HOME=" + home, "HELM_DATA_HOME=" + home}
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("helm template: %v\n%s", err, out)
		}
		times = append(times, time.Since(start))
	}
	slices.Sort(times)
	return times[len(times)/2], true
}

// BenchmarkLargeChart renders the 330-object chart warm (a chart already
// loaded in memory rendered again, its templates executed again, with the
// decoded-document cache warm: what the controller does on every resync) and
// cold (the chart read from disk, checked against the archive limits,
// loaded and rendered with every cache empty: what `capstan render` does, but
// without the process start that helm template pays), and reports each
// as a ratio of `helm template`'s wall time on the same chart in the same
// run (the median of five runs of bin/helm, process start included).
//
//	go test ./internal/render -run '^$' -bench LargeChart -benchtime 20x
func BenchmarkLargeChart(b *testing.B) {
	opts := Options{ReleaseName: "big", Namespace: "big", Capabilities: testCaps}
	helmTime, haveHelm := helmTemplateTime(b, 5)
	if !haveHelm {
		b.Log("bin/helm is missing (run make bin): no ratio to helm template is reported")
	}
	report := func(b *testing.B, elapsed time.Duration) {
		perOp := elapsed / time.Duration(b.N)
		if haveHelm {
			b.ReportMetric(float64(helmTime.Microseconds())/1000, "helm-template-ms")
			b.ReportMetric(float64(perOp)/float64(helmTime), "x-helm-template")
		}
	}
	b.Run("warm", func(b *testing.B) {
		ch := loadChart(b, "large")
		if _, err := Helm(context.Background(), ch, nil, opts); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		for range b.N {
			if _, err := Helm(context.Background(), ch, nil, opts); err != nil {
				b.Fatal(err)
			}
		}
		report(b, time.Since(start))
	})
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		start := time.Now()
		for range b.N {
			// Cold means nothing cached: not the chart, not a decoded document.
			documents.Clear()
			loaded, err := source.LoadChart(largeChart)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := Helm(context.Background(), loaded.Chart, nil, opts); err != nil {
				b.Fatal(err)
			}
		}
		report(b, time.Since(start))
	})
}
