package benchmark_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"capstan.dev/capstan/internal/testcontroller"
)

// Settings of BenchmarkColdRender.
const (
	// envRenderRuns is how many paired runs it makes; default 10.
	envRenderRuns = "CAPSTAN_BENCH_RENDER_RUNS"
	// envRenderBin is a capstan binary to measure instead of one built from
	// this checkout, such as one built from an earlier commit.
	envRenderBin = "CAPSTAN_BENCH_RENDER_BIN"
)

// BenchmarkColdRender is issue 19: `capstan render` of the 330-object test
// chart against `helm template` of the same chart, each a process of its
// own, so that start-up counts as a user sees it. The runs alternate, one
// of each in turn, so both see the same load on a shared machine. It reports
// the median wall and CPU time of each and the ratio of the medians.
//
// The runs happen once per process, whatever b.N is: run it with
// -benchtime=1x (make bench-render).
func BenchmarkColdRender(b *testing.B) {
	b.StopTimer()
	runs := 10
	if v := os.Getenv(envRenderRuns); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want a positive number of runs", envRenderRuns, v)
		}
		runs = n
	}
	binDir := os.Getenv("CAPSTAN_BIN_DIR")
	if binDir == "" {
		binDir = filepath.Join("..", "..", "bin")
	}
	helm, err := filepath.Abs(filepath.Join(binDir, "helm"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := os.Stat(helm); err != nil {
		b.Fatalf("%s is missing: run make bin", helm)
	}
	dir := b.TempDir()
	capstan := os.Getenv(envRenderBin)
	if capstan == "" {
		buildCtx, cancel := context.WithTimeout(b.Context(), 20*time.Minute)
		capstan, err = testcontroller.Build(buildCtx, dir)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
	chart, err := filepath.Abs(filepath.Join("..", "render", "testdata", "charts", "large"))
	if err != nil {
		b.Fatal(err)
	}
	// Both as a user types them; capstan render includes the CRDs and leaves
	// out the tests by default.
	commands := [][]string{
		{helm, "template", "big", chart, "--namespace", "big", "--include-crds", "--skip-tests"},
		{capstan, "render", "big", chart, "--namespace", "big"},
	}
	// Helm gets a home of its own, so no user configuration leaks in.
	env := []string{"HOME=" + dir, "HELM_CACHE_HOME=" + dir, "HELM_CONFIG_HOME=" + dir, "HELM_DATA_HOME=" + dir}
	wall := make([][]time.Duration, len(commands))
	cpu := make([][]time.Duration, len(commands))
	for range runs {
		for i, args := range commands {
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Env = env
			start := time.Now()
			if out, err := cmd.Output(); err != nil {
				b.Fatalf("%s: %v\n%s", filepath.Base(args[0]), err, out)
			}
			wall[i] = append(wall[i], time.Since(start))
			cpu[i] = append(cpu[i], cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	helmWall, capstanWall := median(wall[0]), median(wall[1])
	b.ReportMetric(ms(helmWall), "helm-wall-ms")
	b.ReportMetric(ms(capstanWall), "capstan-wall-ms")
	b.ReportMetric(float64(capstanWall)/float64(helmWall), "x-helm-wall")
	b.ReportMetric(ms(median(cpu[0])), "helm-cpu-ms")
	b.ReportMetric(ms(median(cpu[1])), "capstan-cpu-ms")
	b.Logf("%d paired runs, wall ms:\nhelm    %v\ncapstan %v", runs, rounded(wall[0]), rounded(wall[1]))
}

// rounded lists ds in whole milliseconds.
func rounded(ds []time.Duration) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond).Milliseconds()
	}
	return out
}

// median is the middle of ds, or the mean of the two middles.
func median(ds []time.Duration) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
