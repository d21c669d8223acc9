package benchmark_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// envProfile names a folder: with it, the benchmark writes a CPU profile of
// kube-apiserver taken during Capstan's install and one during the floor's,
// to compare where the API server's time goes. It needs the control plane
// started with CAPSTAN_TESTCLUSTER_PROFILING=1.
const envProfile = "CAPSTAN_BENCH_APISERVER_PROFILE"

// profileSeconds is how long each profile samples, from the start of its
// phase: long enough to see the steady mix of requests, short enough to end
// within the shortest phase of a 200-add-on run.
const profileSeconds = 15

// cpuUse is the CPU time each part of the machine spent in one phase.
type cpuUse map[string]time.Duration

// workingCPU reads the CPU times so far of every process that works during
// a phase: the control plane, the controller and this benchmark's own
// process. The last is the floor's client in the floor's phase, so that its
// applies count as the controller's do in Capstan's; in Capstan's phase it
// only waits on a watch cache and serves the chart repository.
func workingCPU() (cpuUse, error) {
	u, err := cluster.CPUTimes()
	if err != nil {
		return nil, err
	}
	var self syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
		return nil, fmt.Errorf("reading the benchmark's own CPU time: %w", err)
	}
	u["benchmark"] = time.Duration(self.Utime.Nano() + self.Stime.Nano())
	return u, nil
}

// since is the CPU each component spent between two readings.
func (u cpuUse) since(before cpuUse) cpuUse {
	out := cpuUse{}
	for k, v := range u {
		out[k] = v - before[k]
	}
	return out
}

// total is the sum over the components.
func (u cpuUse) total() time.Duration {
	var t time.Duration
	for _, v := range u {
		t += v
	}
	return t
}

// String lists the components by name, then the total.
func (u cpuUse) String() string {
	names := keys(u)
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s %.1f s, ", n, u[n].Seconds())
	}
	fmt.Fprintf(&b, "total %.1f s", u.total().Seconds())
	return b.String()
}

// startProfile begins a CPU profile of kube-apiserver into dir/name.pprof
// when envProfile is set; wait returns once it is written.
func startProfile(ctx context.Context, cfg *rest.Config, name string) (wait func() error) {
	dir := os.Getenv(envProfile)
	if dir == "" {
		return func() error { return nil }
	}
	done := make(chan error, 1)
	go func() { done <- profile(ctx, cfg, filepath.Join(dir, name+".pprof")) }()
	return func() error { return <-done }
}

func profile(ctx context.Context, cfg *rest.Config, path string) error {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, (profileSeconds+30)*time.Second)
	defer cancel()
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", cfg.Host, profileSeconds)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("profiling kube-apiserver: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("profiling kube-apiserver: %s: %s (start the control plane with CAPSTAN_TESTCLUSTER_PROFILING=1)", resp.Status, msg)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}
