package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// endlessTemplate never ends, and Helm's engine never reads a context. Its
// lists stay small, so the render meets the time bound, not the memory one
// (a list of two billion numbers is stopped for its memory at once).
const endlessTemplate = "{{ range until 100000 }}{{ range until 100000 }}{{ end }}{{ end }}\n"

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
