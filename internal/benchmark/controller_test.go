package benchmark_test

import (
	"bufio"
	"context"
	"errors"
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
	ports, err := freePorts(2)
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
	pid := strconv.Itoa(p.cmd.Process.Pid)
	status, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			peakRSSKiB, err = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("parsing VmHWM %q: %w", rest, err)
			}
		}
	}
	if peakRSSKiB == 0 {
		return 0, 0, errors.New("no VmHWM in /proc/" + pid + "/status")
	}
	stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0, 0, err
	}
	// Fields after the command name, which is in parentheses: state is
	// field 3, utime 14 and stime 15, in clock ticks (USER_HZ, 100 on Linux).
	_, after, ok := strings.Cut(string(stat), ") ")
	fields := strings.Fields(after)
	if !ok || len(fields) < 13 {
		return 0, 0, fmt.Errorf("unexpected /proc/%s/stat: %q", pid, stat)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("parsing /proc/%s/stat: %w", pid, err)
		}
		ticks += n
	}
	return peakRSSKiB, time.Duration(ticks) * 10 * time.Millisecond, nil
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

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
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

// parseMetrics parses the Prometheus text exposition format, enough for
// counters and gauges: name{label="value",...} value [timestamp].
func parseMetrics(text string) ([]sample, error) {
	var out []sample
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s := sample{labels: map[string]string{}}
		i := strings.IndexAny(line, "{ ")
		if i < 0 {
			return nil, fmt.Errorf("metrics line %q has no value", line)
		}
		s.name, line = line[:i], line[i:]
		if strings.HasPrefix(line, "{") {
			line = line[1:]
			for {
				line = strings.TrimLeft(line, ", ")
				if strings.HasPrefix(line, "}") {
					line = line[1:]
					break
				}
				eq := strings.Index(line, `="`)
				if eq < 0 {
					return nil, fmt.Errorf("metrics line of %s: bad labels %q", s.name, line)
				}
				key := line[:eq]
				line = line[eq+2:]
				var val strings.Builder
				for {
					if line == "" {
						return nil, fmt.Errorf("metrics line of %s: unterminated label %s", s.name, key)
					}
					ch := line[0]
					line = line[1:]
					if ch == '"' {
						break
					}
					if ch == '\\' && line != "" {
						switch line[0] {
						case 'n':
							val.WriteByte('\n')
						default:
							val.WriteByte(line[0])
						}
						line = line[1:]
						continue
					}
					val.WriteByte(ch)
				}
				s.labels[key] = val.String()
			}
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			return nil, fmt.Errorf("metrics line of %s has no value", s.name)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line of %s: %w", s.name, err)
		}
		s.value = v
		out = append(out, s)
	}
	return out, nil
}
