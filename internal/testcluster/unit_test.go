package testcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestWithServiceAccountGroups(t *testing.T) {
	tests := []struct {
		name   string
		user   string
		groups []string
		want   []string
	}{
		{"plain user keeps its groups", "alice", []string{"dev"}, []string{"dev"}},
		{"plain user without groups", "alice", nil, nil},
		{"service account gets both groups", "system:serviceaccount:apps:deployer", nil,
			[]string{"system:serviceaccounts", "system:serviceaccounts:apps"}},
		{"service account keeps extra groups", "system:serviceaccount:apps:deployer", []string{"extra"},
			[]string{"extra", "system:serviceaccounts", "system:serviceaccounts:apps"}},
		{"groups given already are not repeated", "system:serviceaccount:apps:deployer", []string{"system:serviceaccounts:apps"},
			[]string{"system:serviceaccounts:apps", "system:serviceaccounts"}},
		{"malformed service account name is a plain user", "system:serviceaccount:apps", nil, nil},
		{"empty namespace is a plain user", "system:serviceaccount::deployer", nil, nil},
		{"extra colon is a plain user", "system:serviceaccount:apps:a:b", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := withServiceAccountGroups(tt.user, tt.groups); !slices.Equal(got, tt.want) {
				t.Errorf("withServiceAccountGroups(%q, %q) = %q, want %q", tt.user, tt.groups, got, tt.want)
			}
		})
	}
}

func TestDeclaresCapstanModule(t *testing.T) {
	tests := []struct {
		goMod string
		want  bool
	}{
		{"module capstan.dev/capstan\n\ngo 1.26.0\n", true},
		{"// comment\nmodule capstan.dev/capstan\r\n", true},
		{"module capstan.dev/hack/controlplane/etcd\n", false},
		{"module capstan.dev/capstanx\n", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := declaresCapstanModule([]byte(tt.goMod)); got != tt.want {
			t.Errorf("declaresCapstanModule(%q) = %v, want %v", tt.goMod, got, tt.want)
		}
	}
}

func TestTail(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for i := range 30 {
		lines = append(lines, strings.Repeat("x", i))
	}
	path := filepath.Join(dir, "log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := tail(path, 20), strings.Join(lines[10:], "\n"); got != want {
		t.Errorf("tail = %q, want the last 20 lines %q", got, want)
	}
	if got := tail(filepath.Join(dir, "missing"), 20); got != "" {
		t.Errorf("tail of a missing file = %q, want empty", got)
	}
}

func TestStagesYAMLHoldsEveryStage(t *testing.T) {
	data, err := stagesYAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"node-initialize", "node-heartbeat-with-lease", "pod-ready", "pod-complete", "pod-fail", "pod-delete"} {
		if !strings.Contains(string(data), "name: "+name+"\n") {
			t.Errorf("kwok's stages lack %s", name)
		}
	}
}

func TestIsPortClash(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"component could not bind", fmt.Errorf("wrapped: %w", &ComponentError{Component: Etcd, LogTail: "listen tcp 127.0.0.1:2379: bind: address already in use"}), true},
		{"component failed otherwise", &ComponentError{Component: Etcd, LogTail: "permission denied"}, false},
		{"not a component's failure", errors.New("address already in use"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isPortClash(tt.err); got != tt.want {
				t.Errorf("isPortClash(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestEgressSocketDirFitsWithALongTempDir gives the cluster a folder, and
// $TMPDIR a path, too long for a Unix socket: the sockets go to a folder
// of their own under /tmp, where the path fits.
func TestEgressSocketDirFitsWithALongTempDir(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("x", 60), strings.Repeat("y", 40))
	if err := os.MkdirAll(long, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", long)
	socketDir, ownDir, err := egressSocketDir(long)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(ownDir)
	if ownDir == "" || socketDir != ownDir || !strings.HasPrefix(ownDir, "/tmp/capstan-egress-") {
		t.Fatalf("socket folder %q (own %q); want a folder of its own under /tmp", socketDir, ownDir)
	}
	if n := len(filepath.Join(socketDir, "egress-controlplane.sock")); n >= 100 {
		t.Errorf("the socket path is %d bytes; a Unix socket's must stay under 108", n)
	}
	short := t.TempDir()
	if socketDir, ownDir, err := egressSocketDir(short); err != nil || socketDir != short || ownDir != "" {
		t.Errorf("a short cluster folder: got %q, %q, %v; want the folder itself", socketDir, ownDir, err)
	}
}

// TestStopSignalsNoGroupAfterItsLeaderIsReaped: a component reaped
// long ago (it exited by itself, or StopComponent stopped it) is not
// signalled again by a later stop, since its PID, and the group's ID with
// it, may belong to another process group by then. A stop still ends what
// the leader left behind.
func TestStopSignalsNoGroupAfterItsLeaderIsReaped(t *testing.T) {
	dir := t.TempDir()
	// A group whose leader leaves a child behind: stopping it ends both.
	childFile := filepath.Join(dir, "child")
	p, err := startProcess("wrapper", "/bin/sh", filepath.Join(dir, "wrapper.log"),
		[]string{"-c", "sleep 300 & echo $! >" + childFile + "; exit 0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	data, err := os.ReadFile(childFile)
	if err != nil {
		t.Fatal(err)
	}
	var child int
	if _, err := fmt.Sscan(string(data), &child); err != nil {
		t.Fatalf("the child's PID %q: %v", data, err)
	}
	p.stop()
	p.stop()
	for deadline := time.Now().Add(5 * time.Second); ; {
		state := procState(child)
		if state == "" || state == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child %d of an exited leader still runs (state %s)", child, state)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Another process group, as another test cluster's component would be,
	// whose ID is the PID of a process this cluster reaped earlier.
	other := exec.Command("sleep", "300")
	other.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() { _ = other.Wait(); close(ended) }()
	t.Cleanup(func() { _ = other.Process.Kill(); <-ended })
	done := make(chan struct{})
	close(done)
	reaped := &process{name: "reaped", cmd: &exec.Cmd{Process: other.Process}, done: done}
	reaped.stop()
	select {
	case <-ended:
		t.Fatal("stopping a process reaped earlier killed the process group that now has its PID")
	case <-time.After(300 * time.Millisecond):
	}
}

// procState is the state letter of the process pid, or "" when there is
// no such process.
func procState(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The state follows the command's name, in parentheses.
	_, after, _ := strings.Cut(string(data), ") ")
	state, _, _ := strings.Cut(after, " ")
	return state
}
