package testcluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// logTailLines is how many lines of a component's log an error shows.
const logTailLines = 20

// stopGrace is how long a component has to exit after SIGTERM before it gets
// SIGKILL.
const stopGrace = 5 * time.Second

// ComponentError says that one component of the control plane failed to
// start or to become ready. It names the component and carries the end of
// its log, which is where the reason is.
type ComponentError struct {
	// Component is the failed component: etcd, kube-apiserver,
	// kube-controller-manager, kube-scheduler or kwok.
	Component string
	// Err is what went wrong, as seen from outside the process.
	Err error
	// LogPath is the component's log file. It is removed with the cluster's
	// folder unless the folder is kept (see WithKeepDir).
	LogPath string
	// LogTail holds the last lines of the log.
	LogTail string
}

func (e *ComponentError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "testcluster: %s: %v", e.Component, e.Err)
	switch {
	case e.LogPath == "":
		return b.String()
	case e.LogTail == "":
		fmt.Fprintf(&b, " (its log %s is empty)", e.LogPath)
		return b.String()
	}
	fmt.Fprintf(&b, "\nlast %d lines of %s:\n%s", logTailLines, e.LogPath, e.LogTail)
	return b.String()
}

func (e *ComponentError) Unwrap() error { return e.Err }

// process is one running component, in a process group of its own.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	// reap is held while the process is reaped, and while its group is
	// signalled: a group is signalled only before its leader is reaped,
	// while the leader's PID, which is the group's ID, is still its own.
	reap    sync.Mutex
	done    chan struct{} // closed, with reap held, once the process is reaped
	waitErr error         // set before done is closed
}

// startProcess starts binary with args, writing stdout and stderr to logPath.
func startProcess(name, binary, logPath string, args, env []string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, &ComponentError{Component: name, Err: fmt.Errorf("creating its log file: %w", err), LogPath: logPath}
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// A process group of its own lets Stop end the component together
		// with anything it started.
		Setpgid: true,
		// NOTE: Pdeathsig ends the component when the thread that started
		// it dies, which is the whole test binary when `go test` times out
		// or is interrupted; without it the control plane would outlive the
		// test. Go only retires threads of goroutines that exit while
		// locked to their thread, and nothing here locks one.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, &ComponentError{
			Component: name,
			Err: fmt.Errorf("cannot run %s: %w; rebuild the control plane with `rm -f %s && make bin`",
				binary, err, filepath.Join(filepath.Dir(binary), ".controlplane-stamp")),
			LogPath: logPath,
		}
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		defer func() { _ = logFile.Close() }()
		exited := waitExited(cmd.Process.Pid)
		p.reap.Lock()
		defer p.reap.Unlock()
		// NOTE: the leader has exited and is not reaped yet, so its PID
		// still names its group and no other: killing the group now ends
		// whatever the leader left behind (a wrapper script's child, for
		// example). Once reaped, the PID may be given to any process of
		// the machine, and the group's ID with it; so neither this nor
		// stop signals the group after that. ESRCH just means nothing
		// was left.
		if exited {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// waitExited waits until the process pid has exited, without reaping it,
// and reports whether it saw it so: false means the PID may no longer be
// the process's (something else reaped it), and its group is not to be
// signalled.
func waitExited(pid int) bool {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err == nil
		}
	}
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError describes how an exited process ended.
func (p *process) exitError() error {
	if p.waitErr == nil {
		return errors.New("exited with status 0 before the control plane was ready")
	}
	return fmt.Errorf("exited before the control plane was ready: %w", p.waitErr)
}

// stop ends the process group: SIGTERM, then SIGKILL after stopGrace.
// The group is killed again, with whatever the leader left behind, as the
// leader exits, before it is reaped. A process already reaped is not
// signalled, so stopping twice, or after the process exited by itself,
// signals no one.
func (p *process) stop() {
	if !p.signalGroup(syscall.SIGTERM) {
		<-p.done
		return
	}
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		p.signalGroup(syscall.SIGKILL)
	}
	<-p.done
}

// signalGroup sends sig to the process's group, unless the process has
// been reaped, and reports whether it did.
func (p *process) signalGroup(sig syscall.Signal) bool {
	p.reap.Lock()
	defer p.reap.Unlock()
	if p.exited() {
		return false
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	return true
}

// failure builds a ComponentError for this process with the end of its log.
func (p *process) failure(err error) *ComponentError {
	return &ComponentError{Component: p.name, Err: err, LogPath: p.logPath, LogTail: tail(p.logPath, logTailLines)}
}

// tail returns the last n lines of the file at path, or "" if it cannot be
// read.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	data = bytes.TrimRight(data, "\n")
	if len(data) == 0 {
		return ""
	}
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// CPUTimes returns the CPU time (user and system) that each running
// component has used so far, by component name. A benchmark takes it before
// and after a phase to see which part of the control plane did the work.
func (c *Cluster) CPUTimes() (map[string]time.Duration, error) {
	c.procsMu.Lock()
	procs := append([]*process(nil), c.procs...)
	c.procsMu.Unlock()
	out := make(map[string]time.Duration, len(procs))
	for _, p := range procs {
		if p.cmd.Process == nil || p.exited() {
			continue
		}
		proc, err := procfs.NewProc(p.cmd.Process.Pid)
		if err != nil {
			return nil, fmt.Errorf("testcluster: reading %s's /proc: %w", p.name, err)
		}
		stat, err := proc.Stat()
		if err != nil {
			return nil, fmt.Errorf("testcluster: reading %s's /proc stat: %w", p.name, err)
		}
		out[p.name] += time.Duration(stat.CPUTime() * float64(time.Second))
	}
	return out, nil
}
