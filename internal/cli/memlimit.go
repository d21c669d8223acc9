package cli

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
)

// cgroupMemoryFiles hold the container's memory limit: cgroup v2's, then
// cgroup v1's.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// setMemoryLimit gives the Go runtime a soft memory limit below the
// container's, unless GOMEMLIMIT sets one: the collector then works harder
// as the heap nears it, instead of letting garbage grow to twice the live
// heap and the kernel end the pod at its limit, with every add-on's
// reconcile. reserved is what the render workers, which share the
// container, may take; gitBudget is the git data the controller's heap may
// hold (--git-memory-budget). A limit too small for both beside the
// controller's own needs is set still, and the log says what to raise.
func setMemoryLimit(reserved, gitBudget int64, log logr.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	for _, name := range cgroupMemoryFiles {
		data, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		limit, ok := controllerMemoryLimit(string(data), reserved)
		if !ok {
			if limit < 0 {
				log.Info("The render workers' memory bound takes the whole container's memory limit: raise the limit or lower --render-memory-limit or --render-workers", "containerLimit", strings.TrimSpace(string(data)), "workersReserve", reserved)
			}
			return
		}
		debug.SetMemoryLimit(limit)
		log.Info("Set the Go runtime's soft memory limit from the container's", "limit", limit, "containerLimit", strings.TrimSpace(string(data)), "workersReserve", reserved)
		if err := checkMemorySizing(limit, gitBudget); err != nil {
			log.Info("The container's memory limit is too small for the controller", "reason", err.Error())
		}
		return
	}
}

// minControllerMemory is the least soft limit worth setting: below it the
// collector would run all the time.
const minControllerMemory = 64 << 20

// controllerMemoryLimit is the controller's soft memory limit for the
// content of a cgroup memory limit file: nine tenths of what the render
// workers leave, or false when there is no limit (and a negative limit
// when the workers leave too little).
func controllerMemoryLimit(content string, reserved int64) (int64, bool) {
	s := strings.TrimSpace(content)
	if s == "max" || s == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	// NOTE: cgroup v1 writes "no limit" as a number near the largest
	// int64, rounded to a page.
	if err != nil || n <= 0 || n >= 1<<60 {
		return 0, false
	}
	left := (n - reserved) / 10 * 9
	if left < minControllerMemory {
		return -1, false
	}
	return left, true
}

// controllerMemoryFloor is what the controller's heap needs beside the git
// budget at the least: its informer caches, chart cache, plans and HTTP
// server.
const controllerMemoryFloor = 256 << 20

// checkMemorySizing refuses a soft limit, from controllerMemoryLimit, that
// cannot hold the git budget and controllerMemoryFloor together. The git
// data is in the controller's own heap: with less room than that, once
// fetches hold their budget the collector runs all the time and the pod
// nears its limit, where the kernel ends it.
func checkMemorySizing(soft, gitBudget int64) error {
	need := gitBudget + controllerMemoryFloor
	if soft >= need {
		return nil
	}
	// The container's limit that gives a soft limit of need, past the
	// render workers' share: need is nine tenths of what they leave.
	more := (need - soft + 8) / 9 * 10
	return fmt.Errorf("the controller's soft memory limit, %s (nine tenths of the container's limit less the render workers' --render-workers × --render-memory-limit), "+
		"cannot hold the git budget (%s, --git-memory-budget) and the %s the controller needs beside it: "+
		"raise the container's memory limit by %s, or lower --render-memory-limit, --render-workers or --git-memory-budget",
		mebibytes(soft), mebibytes(gitBudget), mebibytes(controllerMemoryFloor), mebibytes(more))
}

// mebibytes writes n bytes as whole MiB, rounded up.
func mebibytes(n int64) string {
	return fmt.Sprintf("%dMi", (n+(1<<20)-1)>>20)
}
