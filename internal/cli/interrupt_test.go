package cli

import (
	"bytes"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/testcontroller"
)

// endlessTemplate never ends, and Helm's engine never reads a context.
const endlessTemplate = "{{ range until 2000000000 }}{{ end }}\n"

// lockedBuffer is a bytes.Buffer that a process writes while a test reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestASecondInterruptEndsTheProcess: the first Ctrl-C cancels the
// command's context, which a chart's template never reads; the second ends
// the process, where it used to be caught too and the render went on.
func TestASecondInterruptEndsTheProcess(t *testing.T) {
	chart := t.TempDir()
	for name, data := range map[string]string{
		"Chart.yaml":          "apiVersion: v2\nname: endless\nversion: 1.0.0\n",
		"templates/loop.yaml": endlessTemplate,
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(chart, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(chart, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), cliArgsEnv+"="+strings.Join([]string{"render", "endless", chart}, "\x1f"))
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	time.Sleep(time.Second) // into the template
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), "press Ctrl-C again") {
		if time.Now().After(deadline) {
			t.Fatalf("the first Ctrl-C was not reported\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case err := <-ended:
		t.Fatalf("the render ended on the first Ctrl-C (%v), which its template never reads: the test proves nothing", err)
	default:
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGINT {
			t.Errorf("the process ended with %v; want it killed by the second SIGINT", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the process still runs 10s after the second Ctrl-C\n%s", stderr.String())
	}
}

// TestPlanRendersInTheSandbox: capstan plan renders a chart that whoever
// wrote the Addon chose, a tenant's perhaps, in a worker bounded as the
// controller's: a template that loops for ever fails the plan after
// --render-timeout instead of holding the person's machine.
func TestPlanRendersInTheSandbox(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	archive, err := testcontroller.ChartArchive("endless", map[string]string{
		"Chart.yaml":          "apiVersion: v2\nname: endless\nversion: 1.0.0\n",
		"templates/loop.yaml": endlessTemplate,
	})
	if err != nil {
		t.Fatal(err)
	}
	charts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(archive) }))
	t.Cleanup(charts.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: charts.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "endless"},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: charts.URL + "/endless-1.0.0.tgz"}}}
	if err := c.Create(t.Context(), a); err != nil {
		t.Fatal(err)
	}

	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		out, err := capstan(t, cluster, "plan", "endless", "-n", ns, "--fetch-allow", "127.0.0.1/32", "--ca-file", caFile, "--render-timeout", "2s")
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		if r.err == nil || !strings.Contains(r.err.Error(), "took longer than 2s to render") {
			t.Errorf("plan of a chart that loops for ever: %v; want the render stopped at --render-timeout\n%s", r.err, r.out)
		}
		if took := time.Since(start); took > 45*time.Second {
			t.Errorf("the plan took %s", took)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the plan of a chart that loops for ever still runs after 60s: it renders unbounded")
	}
}
