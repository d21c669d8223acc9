package testcluster_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"capstan.dev/capstan/internal/testcluster"
)

// binDirWith makes a bin folder that links every component to the real
// binaries, except those in replace, which get the given file content (or
// are left out when it is empty).
func binDirWith(t *testing.T, replace map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range testcluster.Components {
		path := filepath.Join(dir, name)
		content, replaced := replace[name]
		switch {
		case !replaced:
			if err := os.Symlink(filepath.Join(cluster.BinDir, name), path); err != nil {
				t.Fatal(err)
			}
		case content != "":
			if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// processesMentioning lists the command lines of running processes whose
// arguments contain dir.
func processesMentioning(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("reading /proc: %v", err)
	}
	var found []string
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // the process ended while we looked
		}
		if cmdline := strings.ReplaceAll(string(data), "\x00", " "); strings.Contains(cmdline, dir) {
			found = append(found, e.Name()+": "+cmdline)
		}
	}
	return found
}

// assertNothingLeft checks that no process runs from base and that the
// cluster folder under it is gone.
func assertNothingLeft(t *testing.T, base string) {
	t.Helper()
	if procs := processesMentioning(t, base); len(procs) > 0 {
		t.Errorf("processes left behind:\n%s", strings.Join(procs, "\n"))
	}
	entries, err := os.ReadDir(base)
	if err != nil {
		t.Fatalf("reading %s: %v", base, err)
	}
	for _, e := range entries {
		t.Errorf("left behind in %s: %s", base, e.Name())
	}
}

func TestStartReportsTheFailingComponent(t *testing.T) {
	tests := []struct {
		name      string
		replace   map[string]string
		component string
		wantErr   string // in the error's message
		wantLog   string // in the log tail
	}{
		{
			name:      "missing binary",
			replace:   map[string]string{testcluster.Etcd: ""},
			component: testcluster.Etcd,
			wantErr:   "run `make bin`",
		},
		{
			name:      "binary that exits at once",
			replace:   map[string]string{testcluster.KubeScheduler: "#!/bin/sh\necho 'simulated: cannot read the scheduler configuration' >&2\nexit 3\n"},
			component: testcluster.KubeScheduler,
			wantErr:   "exit status 3",
			wantLog:   "simulated: cannot read the scheduler configuration",
		},
		{
			name:      "binary that is not a program",
			replace:   map[string]string{testcluster.Kwok: "\x7fELF this is not a program"},
			component: testcluster.Kwok,
			wantErr:   "exec format error",
		},
		{
			name:      "process killed during start",
			replace:   map[string]string{testcluster.KubeControllerManager: "#!/bin/sh\necho 'simulated: starting controllers'\nsleep 1\necho 'simulated: killed by the OOM killer' >&2\nkill -9 $$\n"},
			component: testcluster.KubeControllerManager,
			wantErr:   "signal: killed",
			wantLog:   "simulated: killed by the OOM killer",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
			defer cancel()
			c, err := testcluster.Start(ctx, testcluster.WithBinDir(binDirWith(t, tt.replace)), testcluster.WithBaseDir(base))
			if err == nil {
				c.Stop()
				t.Fatal("Start succeeded, want an error")
			}
			var ce *testcluster.ComponentError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T %q, want a *ComponentError", err, err)
			}
			if ce.Component != tt.component {
				t.Errorf("blamed %q, want %q; error: %v", ce.Component, tt.component, err)
			}
			if !strings.Contains(err.Error(), tt.component) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not name %s and say %q", err, tt.component, tt.wantErr)
			}
			if !strings.Contains(ce.LogTail, tt.wantLog) || !strings.Contains(err.Error(), tt.wantLog) {
				t.Errorf("log tail %q (in the error) does not show %q", ce.LogTail, tt.wantLog)
			}
			assertNothingLeft(t, base)
		})
	}
}

func TestStartReportsATakenPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	base := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	c, err := testcluster.Start(ctx, testcluster.WithBinDir(cluster.BinDir), testcluster.WithBaseDir(base), testcluster.WithAPIServerPort(port))
	if err == nil {
		c.Stop()
		t.Fatalf("Start on taken port %d succeeded, want an error", port)
	}
	var ce *testcluster.ComponentError
	if !errors.As(err, &ce) || ce.Component != testcluster.KubeAPIServer {
		t.Fatalf("error %q, want a *ComponentError for %s", err, testcluster.KubeAPIServer)
	}
	if !strings.Contains(ce.LogTail, "address already in use") {
		t.Errorf("log tail does not say the address is in use:\n%s", ce.LogTail)
	}
	assertNothingLeft(t, base)
}

// TestStartAndStop starts a second cluster with two nodes, measures how long
// a warm start takes, and checks that Stop leaves nothing behind.
func TestStartAndStop(t *testing.T) {
	base := t.TempDir()
	var progress strings.Builder
	began := time.Now()
	c, err := testcluster.Start(t.Context(), testcluster.WithBinDir(cluster.BinDir), testcluster.WithBaseDir(base),
		testcluster.WithNodes(2), testcluster.WithProgress(&progress))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Logf("warm start took %s:\n%s", time.Since(began).Round(time.Millisecond), progress.String())
	defer c.Stop()
	if !strings.Contains(progress.String(), "kubeconfig: "+c.Kubeconfig) {
		t.Errorf("progress does not say where the kubeconfig is:\n%s", progress.String())
	}
	nodes, err := clientFor(t, c.Config).CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing nodes: %v", err)
	}
	ready := 0
	for _, n := range nodes.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	if ready != 2 {
		t.Errorf("%d Ready nodes, want 2", ready)
	}
	if len(processesMentioning(t, base)) != len(testcluster.Components) {
		t.Errorf("running processes from %s: %v; want one per component", base, processesMentioning(t, base))
	}
	c.Stop()
	c.Stop() // a second Stop does nothing
	assertNothingLeft(t, base)
}
