package benchmark_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"capstan.dev/capstan/internal/testcluster"
	"capstan.dev/capstan/internal/testcontroller"
)

// fluxProcess is one of Flux's controllers, run from bin/flux as a process
// of its own against the local control plane, as testcontroller runs
// Capstan's: its own identity, memory and log, on loopback ports.
type fluxProcess struct {
	name       string
	logPath    string
	metricsURL string
	cmd        *exec.Cmd
	done       chan struct{} // closed when the process has exited
	waitErr    error         // set before done is closed
}

// startFlux runs bin/flux/<name> with args, authenticated as user (a
// service account that fluxAccounts binds to cluster-admin), with
// leader election off and its metrics and health endpoints on free loopback
// ports. It returns once /readyz answers; Cleanup stops it.
func startFlux(tb testing.TB, c *testcluster.Cluster, fluxDir, dir, name, user string, args ...string) *fluxProcess {
	tb.Helper()
	kubeconfig := filepath.Join(dir, name+".kubeconfig")
	if err := testcontroller.WriteKubeconfig(kubeconfig, c.ConfigFor(user)); err != nil {
		tb.Fatal(err)
	}
	ports, err := testcluster.FreePorts(2)
	if err != nil {
		tb.Fatal(err)
	}
	metricsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	healthAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	p := &fluxProcess{
		name:       name,
		logPath:    c.LogPath(name),
		metricsURL: "http://" + metricsAddr + "/metrics",
		done:       make(chan struct{}),
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	home := filepath.Join(dir, name+"-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		tb.Fatal(err)
	}
	all := append([]string{
		"--metrics-addr=" + metricsAddr,
		"--health-addr=" + healthAddr,
		"--enable-leader-election=false",
	}, args...)
	p.cmd = exec.Command(filepath.Join(fluxDir, name), all...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	// NOTE: Flux parses its flags with pflag, so controller-runtime's
	// --kubeconfig (a flag of the standard library's) is not among them;
	// the environment is how it finds the cluster outside of one.
	p.cmd.Env = []string{"KUBECONFIG=" + kubeconfig, "HOME=" + home, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + os.TempDir()}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		_ = logFile.Close()
		tb.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	tb.Cleanup(p.stop)
	tb.Logf("%s: pid %d, %s; log %s", name, p.cmd.Process.Pid, strings.Join(all, " "), p.logPath)

	hc := &http.Client{Timeout: 2 * time.Second}
	for i := 0; ; i++ {
		if err := p.alive(); err != nil {
			tb.Fatal(err)
		}
		resp, err := hc.Get("http://" + healthAddr + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if i >= 600 { // 60 s
			tb.Fatalf("%s did not answer /readyz within 60 s (last: %v)\n%s", name, err, p.logTail(20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// alive returns an error, with the end of the log, once the process exited.
func (p *fluxProcess) alive() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v\n%s", p.name, p.waitErr, p.logTail(30))
	default:
		return nil
	}
}

// stop sends SIGTERM to the process group, and SIGKILL after 10 s.
func (p *fluxProcess) stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	pgid := -p.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-p.done
	}
}

// procStatus reads the process's peak resident set (VmHWM) and CPU time.
func (p *fluxProcess) procStatus() (peakRSSKiB int64, cpu time.Duration, err error) {
	return testcontroller.ProcStatusOf(p.cmd.Process.Pid)
}

// requests sums the process's rest_client_requests_total, every client of
// it, from its /metrics.
func (p *fluxProcess) requests(ctx context.Context) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.metricsURL, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", p.metricsURL, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return 0, err
	}
	samples, err := parseMetrics(string(body))
	if err != nil {
		return 0, err
	}
	total := 0.0
	for _, s := range samples {
		if s.name == "rest_client_requests_total" {
			total += s.value
		}
	}
	return total, nil
}

// logTail returns the last n lines of the log.
func (p *fluxProcess) logTail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logErrors counts the log's lines at level error (Flux logs JSON).
func (p *fluxProcess) logErrors() int {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return 0
	}
	return strings.Count(string(data), `"level":"error"`)
}
