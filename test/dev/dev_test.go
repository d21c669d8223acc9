package dev_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/cli"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testcluster"
	"capstan.dev/capstan/internal/testcontroller"
)

// Bounds of one run of capstan dev: the control plane starts in 8–15 s on
// this machine with its binaries built, and the samples are two small
// add-ons from a local git repository.
const (
	upWithin    = 3 * time.Minute
	readyWithin = 2 * time.Minute
	stopWithin  = time.Minute
)

// capstanBin is cmd/capstan built from this checkout, once for the
// package, in binDir.
var capstanBin, binDir string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "capstan-dev-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if capstanBin, err = testcontroller.Build(ctx, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binDir = dir
	return m.Run()
}

// devRun is one `capstan dev` process, in a process group of its own as a
// terminal runs it, with its TMPDIR and HOME under root.
type devRun struct {
	root           string // the test's folder: TMPDIR and HOME
	tmp            string // its TMPDIR, where the control plane's folder goes
	cmd            *exec.Cmd
	stdout, stderr *testcontroller.SyncBuffer
	done           chan struct{}
	waitErr        error
}

// startDev runs `capstan dev` with args.
func startDev(t *testing.T, args ...string) *devRun {
	t.Helper()
	// A short folder, so that the egress guard's sockets stay in the
	// cluster's folder and a leftover of them is found below.
	root, err := os.MkdirTemp("/tmp", "cdev-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	r := &devRun{root: root, tmp: filepath.Join(root, "tmp"), stdout: &testcontroller.SyncBuffer{}, stderr: &testcontroller.SyncBuffer{}, done: make(chan struct{})}
	for _, d := range []string{r.tmp, filepath.Join(root, "home")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	r.cmd = exec.Command(capstanBin, append([]string{"dev"}, args...)...)
	r.cmd.Env = []string{"HOME=" + filepath.Join(root, "home"), "PATH=" + os.Getenv("PATH"), "TMPDIR=" + r.tmp}
	if dir := os.Getenv(testcluster.EnvBinDir); dir != "" {
		r.cmd.Env = append(r.cmd.Env, testcluster.EnvBinDir+"="+dir)
	}
	r.cmd.Stdout, r.cmd.Stderr = r.stdout, r.stderr
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.waitErr = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			// The test failed before Ctrl-C: end the whole group. The
			// control plane's processes die with dev (Pdeathsig).
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
			<-r.done
		}
		if t.Failed() {
			t.Logf("capstan dev, stdout:\n%s\nstderr (end):\n%s", r.stdout, tail(r.stderr.String(), 40))
		}
	})
	return r
}

// printed waits until stdout holds re, and returns its first group.
func (r *devRun) printed(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.After(upWithin)
	for {
		if m := re.FindStringSubmatch(r.stdout.String()); m != nil {
			return m[1]
		}
		select {
		case <-r.done:
			t.Fatalf("capstan dev ended (%v) before printing %s", r.waitErr, re)
		case <-deadline:
			t.Fatalf("capstan dev printed no %s within %s", re, upWithin)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// interrupt sends SIGINT to the process group, as Ctrl-C in a terminal
// does, and waits for dev to end.
func (r *devRun) interrupt(t *testing.T) error {
	t.Helper()
	if err := syscall.Kill(-r.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.done:
		return r.waitErr
	case <-time.After(stopWithin):
		t.Fatalf("capstan dev still runs %s after Ctrl-C", stopWithin)
		return nil
	}
}

// leftovers lists what still runs of this run (the control plane's
// processes name their folder under TMPDIR in their arguments; the
// controller's render workers run the binary in binDir) and the control
// plane's folders left under TMPDIR. The tests of this package run one
// after the other, so no other run's processes are about.
func (r *devRun) leftovers(t *testing.T) []string {
	t.Helper()
	var left []string
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(data, []byte(r.root)) && !bytes.Contains(data, []byte(binDir)) {
			continue // gone meanwhile, or not ours
		}
		left = append(left, fmt.Sprintf("process %s: %s", filepath.Base(filepath.Dir(p)), bytes.ReplaceAll(data, []byte{0}, []byte{' '})))
	}
	dirs, err := filepath.Glob(filepath.Join(r.tmp, "capstan-*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		left = append(left, "folder "+d)
	}
	return left
}

var (
	kubeconfigLine = regexp.MustCompile(`export KUBECONFIG=(\S+)`)
	tokenLine      = regexp.MustCompile(`token in (\S+)`)
)

// TestDevRunsTheWalkthroughAndStopsClean runs `capstan dev` on free
// loopback ports and follows the walkthrough it prints: hello becomes
// Ready, hello-kustomize waits for approval until `capstan addon sync`
// approves it, the API answers the printed token, and Ctrl-C ends it with
// status 0, no process left and no folder left.
func TestDevRunsTheWalkthroughAndStopsClean(t *testing.T) {
	ports, err := testcluster.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	web := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	r := startDev(t,
		"--http-bind-address="+web,
		"--metrics-bind-address="+net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])),
		"--health-probe-bind-address="+net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2])))
	kubeconfig := r.printed(t, kubeconfigLine)
	for _, want := range []string{"The web page: https://" + web + "/ ", "https://" + web + "/api/v1/namespaces/capstan-system/addons"} {
		if !strings.Contains(r.stdout.String(), want) {
			t.Errorf("the walkthrough should name the address given, %s: it lacks %q", web, want)
		}
	}
	tokenFile := r.printed(t, tokenLine)
	if !strings.HasPrefix(kubeconfig, r.tmp) || !strings.HasPrefix(tokenFile, r.tmp) {
		t.Fatalf("the kubeconfig %s and the token %s should be in the control plane's folder under %s", kubeconfig, tokenFile, r.tmp)
	}
	if strings.Contains(r.stdout.String(), readFile(t, tokenFile)) {
		t.Error("capstan dev printed the admin token itself; it should print only the file that holds it")
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: cli.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	waitAddon(t, c, "hello", "Ready", func(a *capstanv1.Addon) bool {
		return a.Status.Phase == capstanv1.PhaseSynced && apimeta.IsStatusConditionTrue(a.Status.Conditions, capstanv1.ConditionReady)
	})
	waitAddon(t, c, "hello-kustomize", "waiting for approval", func(a *capstanv1.Addon) bool {
		ready := apimeta.FindStatusCondition(a.Status.Conditions, capstanv1.ConditionReady)
		return a.Status.Phase == capstanv1.PhaseOutOfSync && ready != nil && ready.Reason == "AwaitingApproval"
	})

	// The walkthrough's commands, as printed: with the KUBECONFIG only.
	capstan := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), readyWithin)
		defer cancel()
		cmd := exec.CommandContext(ctx, capstanBin, args...)
		cmd.Env = []string{"HOME=" + filepath.Join(r.root, "home"), "PATH=" + os.Getenv("PATH"), "KUBECONFIG=" + kubeconfig}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("capstan %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	review := capstan("addon", "get", "hello-kustomize", "-n", "capstan-system", "--diff")
	if !strings.Contains(review, "Create    v1/ConfigMap samples/kz-hello") || !strings.Contains(review, "nothing applied yet") {
		t.Errorf("capstan addon get hello-kustomize -n capstan-system --diff should show the ConfigMap to create and nothing applied yet:\n%s", review)
	}
	// The sync names the plan just reviewed, with the command get printed.
	next := regexp.MustCompile("capstan addon sync hello-kustomize -n capstan-system --plan (sha256:[0-9a-f]{64})\n").FindStringSubmatch(review)
	if next == nil {
		t.Fatalf("capstan addon get hello-kustomize -n capstan-system --diff should print the sync command with the plan's hash:\n%s", review)
	}
	// capstan plan reads the samples' local git repository when told, as
	// the controller of capstan dev does.
	if out := capstan("plan", "hello", "-n", "capstan-system", "--allow-file-git"); !strings.Contains(out, "Plan sha256:") || !strings.Contains(out, "unchanged") {
		t.Errorf("capstan plan hello -n capstan-system should print the whole plan, nothing to change:\n%s", out)
	}
	capstan("addon", "sync", "hello-kustomize", "-n", "capstan-system", "--plan", next[1])
	waitAddon(t, c, "hello-kustomize", "Ready after the sync", func(a *capstanv1.Addon) bool {
		return a.Status.Phase == capstanv1.PhaseSynced && apimeta.IsStatusConditionTrue(a.Status.Conditions, capstanv1.ConditionReady)
	})

	// The API and the page, on the address given, with the token printed.
	https := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// capstan dev's certificate is self-signed, as it says.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback, a certificate made for this run
	}}
	body := get(t, https, "https://"+web+"/api/v1/namespaces/"+install.Namespace+"/addons", readFile(t, tokenFile))
	for _, name := range []string{`"hello"`, `"hello-kustomize"`} {
		if !strings.Contains(body, name) {
			t.Errorf("the API's list lacks %s:\n%s", name, tail(body, 20))
		}
	}
	if page := get(t, https, "https://"+web+"/signin", ""); !strings.Contains(page, "<form") {
		t.Errorf("the sign-in page has no form:\n%s", tail(page, 20))
	}

	if err := r.interrupt(t); err != nil {
		t.Errorf("capstan dev ended with %v after Ctrl-C; want status 0", err)
	}
	if !strings.Contains(r.stderr.String(), "Stopping the local control plane") {
		t.Error("capstan dev did not say it stopped the control plane")
	}
	// Pdeathsig and the stop are asynchronous for a moment.
	var left []string
	_ = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		left = r.leftovers(t)
		return len(left) == 0, nil
	})
	if len(left) > 0 {
		t.Errorf("after Ctrl-C, left behind:\n%s", strings.Join(left, "\n"))
	}
	for _, p := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d still held after Ctrl-C: %v", p, err)
			continue
		}
		l.Close()
	}
}

// TestDevRefusesATakenPortBeforeStarting holds the web port, as another
// program on a newcomer's machine may, and checks that capstan dev ends at
// once, naming the flag to change, with no control plane started.
func TestDevRefusesATakenPortBeforeStarting(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	ports, err := testcluster.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	r := startDev(t,
		"--http-bind-address="+held.Addr().String(),
		"--metrics-bind-address="+net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		"--health-probe-bind-address="+net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])))
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatal("capstan dev still runs 30 s after starting on a taken port")
	}
	var exit *exec.ExitError
	if !errors.As(r.waitErr, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("capstan dev on a taken port ended with %v; want a non-zero status", r.waitErr)
	}
	msg := r.stderr.String()
	for _, want := range []string{held.Addr().String(), "--http-bind-address", "make dev DEV_ARGS=--http-bind-address="} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error lacks %q:\n%s", want, tail(msg, 10))
		}
	}
	if strings.Contains(msg, "Starting the local control plane") || strings.Contains(r.stdout.String(), "Capstan is running") {
		t.Errorf("capstan dev started before refusing the port:\nstdout:\n%s\nstderr:\n%s", r.stdout, tail(msg, 10))
	}
	if left := r.leftovers(t); len(left) > 0 {
		t.Errorf("left behind:\n%s", strings.Join(left, "\n"))
	}
}

// waitAddon polls capstan-system/name until done holds, within readyWithin.
func waitAddon(t *testing.T, c client.Client, name, what string, done func(*capstanv1.Addon) bool) {
	t.Helper()
	a := &capstanv1.Addon{}
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, readyWithin, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: name}, a); err != nil {
			return false, nil
		}
		return done(a), nil
	})
	if err != nil {
		t.Fatalf("Addon %s not %s within %s: phase %q, conditions %+v", name, what, readyWithin, a.Status.Phase, a.Status.Conditions)
	}
}

// get reads url, with a bearer token when one is given, and wants 200.
func get(t *testing.T, c *http.Client, url, token string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, tail(string(body), 10))
	}
	return string(body)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
