// Package testcontroller runs `capstan controller` as a process of its own
// against a local control plane (internal/testcluster), for the tests and
// benchmarks that need the controller exactly as it ships: its own
// binary, flags, identity, memory and log, and a process that can be
// stopped or killed.
package testcontroller

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

	"github.com/prometheus/procfs"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testcluster"
)

// Build builds cmd/capstan from this checkout into dir, so a test runs the
// code as it is, not a stale bin/capstan.
func Build(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module root with `go env GOMOD`: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("`go env GOMOD` names no go.mod; run the test from the checkout")
	}
	bin := filepath.Join(dir, "capstan")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/capstan")
	cmd.Dir = filepath.Dir(gomod)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/capstan: %w\n%s", err, msg)
	}
	return bin, nil
}

// Process is `capstan controller`, or another controller a benchmark runs
// beside it, running in a process group of its own, with plain-HTTP
// metrics and probes on loopback.
type Process struct {
	// LogPath is the process's log (stdout and stderr).
	LogPath string
	// MetricsURL is its Prometheus endpoint.
	MetricsURL string

	name     string
	cmd      *exec.Cmd
	readyURL string
	done     chan struct{} // closed when the process has exited
	waitErr  error         // set before done is closed
}

// Command is a process for StartCommand to run.
type Command struct {
	// Name names the process in messages.
	Name string
	// Path is the binary; Args its arguments; Env its whole environment.
	Path       string
	Args, Env  []string
	LogPath    string
	MetricsURL string
	// ReadyURL answers 200 once the process is ready.
	ReadyURL string
}

// StartCommand runs c in a process group of its own that dies with the
// test binary, and returns once c.ReadyURL answers, within 60 s; Cleanup
// stops it.
func StartCommand(tb testing.TB, c Command) *Process {
	tb.Helper()
	p := &Process{name: c.Name, LogPath: c.LogPath, MetricsURL: c.MetricsURL, readyURL: c.ReadyURL, done: make(chan struct{})}
	logFile, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	p.cmd = exec.Command(c.Path, c.Args...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.Env = c.Env
	p.cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// NOTE: as in testcluster, the process dies with the test binary
		// when `go test` times out or is interrupted.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := p.cmd.Start(); err != nil {
		_ = logFile.Close()
		tb.Fatalf("starting %s: %v", c.Path, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	tb.Cleanup(p.Stop)
	tb.Logf("%s: pid %d, %s; log %s", c.Name, p.cmd.Process.Pid, strings.Join(c.Args, " "), p.LogPath)

	hc := &http.Client{Timeout: 2 * time.Second}
	for i := 0; ; i++ {
		if err := p.Alive(); err != nil {
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
			tb.Fatalf("%s did not answer %s within 60 s (last: %v)\n%s", c.Name, p.readyURL, err, p.LogTail(20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Start runs bin as the controller's user, as `capstan dev` does, so it
// impersonates capstan-addons with its real rights. args are added to the
// flags Start sets. It returns once /readyz answers; Cleanup stops it.
func Start(tb testing.TB, c *testcluster.Cluster, bin, dir string, args ...string) *Process {
	tb.Helper()
	return start(tb, c, bin, dir, nil, args)
}

// StartWithEnv runs bin as Start does, with env added to its environment.
func StartWithEnv(tb testing.TB, c *testcluster.Cluster, bin, dir string, env []string, args ...string) *Process {
	tb.Helper()
	return start(tb, c, bin, dir, env, args)
}

// StartInPod runs bin as Start does, as the replica of the Pod named pod in
// install.Namespace: POD_NAME and POD_NAMESPACE are set, as the
// Deployment's downward API sets them.
func StartInPod(tb testing.TB, c *testcluster.Cluster, bin, dir, pod string, args ...string) *Process {
	tb.Helper()
	return start(tb, c, bin, dir, []string{"POD_NAME=" + pod, "POD_NAMESPACE=" + install.Namespace}, args)
}

func start(tb testing.TB, c *testcluster.Cluster, bin, dir string, env, args []string) *Process {
	tb.Helper()
	// The log sits with the control plane's, so CAPSTAN_TESTCLUSTER_KEEP=1
	// keeps it; each binary's name has a log of its own.
	logName := "capstan-controller"
	if base := filepath.Base(bin); base != "capstan" {
		logName = base
	}
	p := Prepare(tb, c, dir, "controller", install.ControllerUser)
	return StartCommand(tb, Command{
		Name: "controller",
		Path: bin,
		Args: append([]string{"controller",
			"--kubeconfig=" + p.Kubeconfig,
			"--namespace=" + install.Namespace,
			"--metrics-bind-address=" + p.MetricsAddr,
			"--health-probe-bind-address=" + p.ProbeAddr,
			"--http-bind-address=0",
			"--allow-file-git",
			// NOTE: no fetch of the tests' controller leaves loopback, not
			// even a DNS question for a public name an Addon may hold.
			"--fetch-loopback-only",
		}, args...),
		Env:        append(p.Env(), env...),
		LogPath:    c.LogPath(logName),
		MetricsURL: "http://" + p.MetricsAddr + "/metrics",
		ReadyURL:   "http://" + p.ProbeAddr + "/readyz",
	})
}

// Prepared is what a controller process needs before it starts: a
// kubeconfig, a home folder and two free loopback addresses.
type Prepared struct {
	Kubeconfig, Home       string
	MetricsAddr, ProbeAddr string
}

// Env is the process's environment: its home, and this process's PATH and
// temporary folder.
func (p Prepared) Env() []string {
	return []string{"HOME=" + p.Home, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + os.TempDir()}
}

// Prepare writes name's kubeconfig in dir, authenticating as user, makes
// its home folder there, and picks two free loopback ports for its metrics
// and its health probes.
func Prepare(tb testing.TB, c *testcluster.Cluster, dir, name, user string) Prepared {
	tb.Helper()
	p := Prepared{Kubeconfig: filepath.Join(dir, name+".kubeconfig"), Home: filepath.Join(dir, name+"-home")}
	if err := WriteKubeconfig(p.Kubeconfig, c.ConfigFor(user)); err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(p.Home, 0o700); err != nil {
		tb.Fatal(err)
	}
	ports, err := testcluster.FreePorts(2)
	if err != nil {
		tb.Fatal(err)
	}
	p.MetricsAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	p.ProbeAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	return p
}

// Alive returns an error, with the end of the log, once the process exited.
func (p *Process) Alive() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v\n%s", p.name, p.waitErr, p.LogTail(30))
	default:
		return nil
	}
}

// Stop sends SIGTERM to the process group, and SIGKILL after 10 s.
func (p *Process) Stop() {
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

// Kill sends SIGKILL to the process group and waits for the exit: the
// controller gets no chance to finish what it was doing.
func (p *Process) Kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Named copies bin to dir under name, so that a test can run several
// controllers and tell them apart: the name is each one's log and, as the
// client's default user agent, its name in the API server's audit log.
func Named(bin, dir, name string) (string, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, name)
	return out, os.WriteFile(out, data, 0o755)
}

// LogTail returns the last n lines of the process's log.
func (p *Process) LogTail(n int) string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// LogProblems returns the log lines at level error, and the count of
// those that mention client-side throttling.
func (p *Process) LogProblems() (errs []string, throttled int) {
	f, err := os.Open(p.LogPath)
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

// ProcStatus reads the process's peak resident set (VmHWM) and its CPU
// time so far from /proc.
func (p *Process) ProcStatus() (peakRSSKiB int64, cpu time.Duration, err error) {
	return ProcStatusOf(p.cmd.Process.Pid)
}

// ProcStatusOf reads the peak resident set (VmHWM) and the CPU time so far
// of the process pid from /proc, for any process a benchmark runs beside
// the controller.
func ProcStatusOf(pid int) (peakRSSKiB int64, cpu time.Duration, err error) {
	proc, err := procfs.NewProc(pid)
	if err != nil {
		return 0, 0, err
	}
	status, err := proc.NewStatus()
	if err != nil {
		return 0, 0, err
	}
	if status.VmHWM == 0 {
		return 0, 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
	}
	stat, err := proc.Stat()
	if err != nil {
		return 0, 0, err
	}
	return int64(status.VmHWM / 1024), time.Duration(stat.CPUTime() * float64(time.Second)), nil
}

// Metrics reads the process's /metrics, in the Prometheus text format.
func (p *Process) Metrics(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.MetricsURL, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", p.MetricsURL, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	return string(body), err
}

// WriteKubeconfig writes cfg (a client certificate from testcluster) as a
// kubeconfig file.
func WriteKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["local"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "local"}
	kc.CurrentContext = "local"
	return clientcmd.WriteToFile(*kc, path)
}

// Name is the process's name in messages.
func (p *Process) Name() string { return p.name }
