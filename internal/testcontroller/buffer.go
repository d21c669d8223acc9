package testcontroller

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer that one goroutine or process writes while
// a test reads it: a controller's log, a command's output.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
