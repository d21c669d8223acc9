package render

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/procfs"

	"golang.org/x/sys/unix"
)

// workerProcAttr makes the kernel kill a worker when the controller dies,
// so that no worker outlives it.
func workerProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// processUsage reads a running process's CPU time and peak RSS from /proc;
// zero when it has already gone.
func processUsage(pid int) (time.Duration, int64) {
	proc, err := procfs.NewProc(pid)
	if err != nil {
		return 0, 0
	}
	var cpu time.Duration
	if stat, err := proc.Stat(); err == nil {
		cpu = time.Duration(stat.CPUTime() * float64(time.Second))
	}
	var peak int64
	if status, err := proc.NewStatus(); err == nil {
		peak = int64(status.VmHWM)
	}
	return cpu, peak
}

// limitMemory bounds this process's data memory, which holds Go's heap, to
// what it uses now plus memory bytes. Past it the kernel refuses memory and
// the Go runtime exits with "out of memory". RLIMIT_DATA, not RLIMIT_AS: Go
// reserves address space it never uses, and only what it uses counts here.
func limitMemory(memory int64) error {
	used, err := dataKiB()
	if err != nil {
		return err
	}
	limit := uint64(used)<<10 + uint64(memory)
	return unix.Setrlimit(unix.RLIMIT_DATA, &unix.Rlimit{Cur: limit, Max: limit})
}

// dataKiB reads VmData, this process's data memory, from /proc.
func dataKiB() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := bytes.CutPrefix(s.Bytes(), []byte("VmData:")); ok {
			fields := bytes.Fields(rest)
			if len(fields) == 0 {
				break
			}
			return strconv.ParseInt(string(fields[0]), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmData in /proc/self/status")
}
