package benchmark_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/procfs"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testcluster"
)

// buildCapstan builds cmd/capstan from this checkout into dir, so the
// benchmark measures the code as it is, not a stale bin/capstan.
func buildCapstan(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module root with `go env GOMOD`: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("`go env GOMOD` names no go.mod; run the benchmark from the checkout")
	}
	bin := filepath.Join(dir, "capstan")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/capstan")
	cmd.Dir = filepath.Dir(gomod)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/capstan: %w\n%s", err, msg)
	}
	return bin, nil
}

// controllerProcess is `capstan controller` running in a process group of
// its own, with plain-HTTP metrics and probes on loopback.
type controllerProcess struct {
	cmd        *exec.Cmd
	logPath    string
	metricsURL string
	readyURL   string
	done       chan struct{} // closed when the process has exited
	waitErr    error         // set before done is closed
}

// startController runs bin as the controller's service account, as
// `capstan dev` does, so it impersonates capstan-addons with its real
// rights. It returns once /readyz answers; Cleanup stops it.
func startController(tb testing.TB, c *testcluster.Cluster, bin, dir string, args ...string) *controllerProcess {
	tb.Helper()
	kubeconfig := filepath.Join(dir, "controller.kubeconfig")
	if err := writeKubeconfig(kubeconfig, c.ConfigFor(install.ControllerUser)); err != nil {
		tb.Fatal(err)
	}
	ports, err := testcluster.FreePorts(2)
	if err != nil {
		tb.Fatal(err)
	}
	metricsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	probeAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	// The log sits with the control plane's, so CAPSTAN_TESTCLUSTER_KEEP=1
	// keeps it.
	p := &controllerProcess{
		logPath:    c.LogPath("capstan-controller"),
		metricsURL: "http://" + metricsAddr + "/metrics",
		readyURL:   "http://" + probeAddr + "/readyz",
		done:       make(chan struct{}),
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		tb.Fatal(err)
	}
	all := append([]string{"controller",
		"--kubeconfig=" + kubeconfig,
		"--namespace=" + install.Namespace,
		"--metrics-bind-address=" + metricsAddr,
		"--health-probe-bind-address=" + probeAddr,
		"--http-bind-address=0",
		"--allow-file-git",
	}, args...)
	p.cmd = exec.Command(bin, all...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + os.TempDir()}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// NOTE: as in testcluster, the controller dies with the test binary
		// when `go test` times out or is interrupted.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := p.cmd.Start(); err != nil {
		_ = logFile.Close()
		tb.Fatalf("starting %s: %v", bin, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	tb.Cleanup(p.stop)
	tb.Logf("controller: pid %d, %s; log %s", p.cmd.Process.Pid, strings.Join(all[1:], " "), p.logPath)

	hc := &http.Client{Timeout: 2 * time.Second}
	for i := 0; ; i++ {
		if err := p.alive(); err != nil {
			tb.Fatal(err)
		}
		resp, err := hc.Get(p.readyURL)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if i >= 600 { // 60 s
			tb.Fatalf("the controller did not answer %s within 60 s (last: %v)\n%s", p.readyURL, err, p.logTail(20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// alive returns an error, with the end of the log, once the process exited.
func (p *controllerProcess) alive() error {
	select {
	case <-p.done:
		return fmt.Errorf("the controller exited: %v\n%s", p.waitErr, p.logTail(30))
	default:
		return nil
	}
}

// stop sends SIGTERM to the process group, and SIGKILL after 10 s.
func (p *controllerProcess) stop() {
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

// logTail returns the last n lines of the controller's log.
func (p *controllerProcess) logTail(n int) string {
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

// logProblems returns the log lines at level error, and those that mention
// client-side throttling.
func (p *controllerProcess) logProblems() (errs []string, throttled int) {
	f, err := os.Open(p.logPath)
	if err != nil {
		return nil, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, `"level":"error"`) {
			errs = append(errs, line)
		}
		if strings.Contains(line, "client-side throttling") {
			throttled++
		}
	}
	return errs, throttled
}

// procStatus reads the controller's peak resident set (VmHWM) and its CPU
// time so far from /proc.
func (p *controllerProcess) procStatus() (peakRSSKiB int64, cpu time.Duration, err error) {
	proc, err := procfs.NewProc(p.cmd.Process.Pid)
	if err != nil {
		return 0, 0, err
	}
	status, err := proc.NewStatus()
	if err != nil {
		return 0, 0, err
	}
	if status.VmHWM == 0 {
		return 0, 0, fmt.Errorf("no VmHWM in /proc/%d/status", p.cmd.Process.Pid)
	}
	stat, err := proc.Stat()
	if err != nil {
		return 0, 0, err
	}
	return int64(status.VmHWM / 1024), time.Duration(stat.CPUTime() * float64(time.Second)), nil
}

// writeKubeconfig writes cfg (a client certificate from testcluster) as a
// kubeconfig file.
func writeKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["bench"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["bench"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "bench"}
	kc.CurrentContext = "bench"
	return clientcmd.WriteToFile(*kc, path)
}

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrapeMetrics reads the controller's /metrics (plain text format).
func (p *controllerProcess) scrapeMetrics(ctx context.Context) ([]sample, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.metricsURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", p.metricsURL, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, err
	}
	return parseMetrics(string(body))
}

// parseMetrics parses the Prometheus text exposition format into one
// sample per counter, gauge or untyped series.
func parseMetrics(text string) ([]sample, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	var out []sample
	for _, name := range slices.Sorted(maps.Keys(families)) {
		for _, m := range families[name].GetMetric() {
			s := sample{name: name, labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.Counter != nil:
				s.value = m.GetCounter().GetValue()
			case m.Gauge != nil:
				s.value = m.GetGauge().GetValue()
			case m.Untyped != nil:
				s.value = m.GetUntyped().GetValue()
			default:
				continue // histograms and summaries are not used
			}
			out = append(out, s)
		}
	}
	return out, nil
}
