//go:build !linux

package render

import (
	"syscall"
	"time"
)

// processUsage: /proc is Linux's.
func processUsage(int) (time.Duration, int64) { return 0, 0 }

// workerProcAttr: only Linux kills a worker with its parent.
func workerProcAttr() *syscall.SysProcAttr { return nil }

// limitMemory: only Linux has a memory bound the kernel keeps; elsewhere
// the soft limit of the Go runtime is all there is, and the time bound.
func limitMemory(int64) error { return nil }
