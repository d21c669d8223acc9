package benchmark_test

import (
	"context"
	"path/filepath"
	"testing"

	"capstan.dev/capstan/internal/testcluster"
	"capstan.dev/capstan/internal/testcontroller"
)

// startFlux runs bin/flux/<name> with args as a process of its own, as
// testcontroller runs Capstan's: its own identity, memory and log, on
// loopback ports. It authenticates as user (a service account that
// fluxAccounts binds to cluster-admin), with leader election off and its
// metrics and health endpoints on free loopback ports. It returns once
// /readyz answers; Cleanup stops it.
func startFlux(tb testing.TB, c *testcluster.Cluster, fluxDir, dir, name, user string, args ...string) *testcontroller.Process {
	tb.Helper()
	p := testcontroller.Prepare(tb, c, dir, name, user)
	return testcontroller.StartCommand(tb, testcontroller.Command{
		Name: name,
		Path: filepath.Join(fluxDir, name),
		Args: append([]string{
			"--metrics-addr=" + p.MetricsAddr,
			"--health-addr=" + p.ProbeAddr,
			"--enable-leader-election=false",
		}, args...),
		// NOTE: Flux parses its flags with pflag, so controller-runtime's
		// --kubeconfig (a flag of the standard library's) is not among
		// them; the environment is how it finds the cluster outside of one.
		Env:        append(p.Env(), "KUBECONFIG="+p.Kubeconfig),
		LogPath:    c.LogPath(name),
		MetricsURL: "http://" + p.MetricsAddr + "/metrics",
		ReadyURL:   "http://" + p.ProbeAddr + "/readyz",
	})
}

// requestsOf sums a process's rest_client_requests_total, every client of
// it, from its /metrics.
func requestsOf(ctx context.Context, p *testcontroller.Process) (float64, error) {
	samples, err := p.Samples(ctx)
	if err != nil {
		return 0, err
	}
	return testcontroller.Sum(samples, "rest_client_requests_total", nil), nil
}
