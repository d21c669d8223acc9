package source

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-billy/v5"
)

// Every git fetch of the controller lands in its memory: an Addon's git
// folder (Fetcher.Git), the gitops syncer's clone of a repository's
// branch, and the writer's clone for a commit from the page or the API.
// Each is bounded by its own limits, but many run at once, and together
// they could hold more than the pod may: the kernel would then end the
// controller, with every add-on's reconcile, and it would start again
// into the same fetches. A GitBudget bounds what they hold together.

// DefaultGitMemoryBudget is the budget of --git-memory-budget outside the
// chart (which sets what its pod's memory limit holds beside the render
// workers). It is also the most one fetch holds at once: its pack while
// it unpacks, and a commit's checkout beside its objects, so a fetch
// within its own limits may still be refused as too large for it.
const DefaultGitMemoryBudget int64 = 768 << 20

// GitBudgetFlag is the flag that sizes the controller's git budget, as
// messages name it.
const GitBudgetFlag = "--git-memory-budget"

// ErrGitMemoryBusy is the error of a fetch refused because the git data
// other fetches hold leave too little of the budget. It is transient:
// their memory returns when they end, and the fetch is retried.
var ErrGitMemoryBusy = errors.New("the git data of other fetches holds the controller's memory budget for git")

// GitBudget is a byte budget for git data in memory, shared by every
// fetch of the process. Bytes are only ever taken with TryAcquire
// semantics, never waited for: a fetch holding bytes that waited for
// more could wait on another that waits on it. It is safe for concurrent
// use.
type GitBudget struct {
	size int64
	mu   sync.Mutex
	held int64
	peak int64
}

// NewGitBudget is a budget of size bytes.
func NewGitBudget(size int64) *GitBudget {
	return &GitBudget{size: size}
}

// Size is the budget's size in bytes.
func (b *GitBudget) Size() int64 { return b.size }

// Held is what the fetches hold of the budget now.
func (b *GitBudget) Held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

// Peak is the most the fetches held at once.
func (b *GitBudget) Peak() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}

// Storage is a memory storage for one fetch that takes what it holds from
// the budget, and refuses a pack that would unpack past limits. Its user
// calls Release once done with it.
func (b *GitBudget) Storage(limits Limits) *BoundedStorage {
	return newBoundedStorage(limits, b)
}

// take takes n bytes for a storage that holds own of them already, or
// refuses them without waiting.
func (b *GitBudget) take(n, own int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held+n <= b.size {
		b.held += n
		b.peak = max(b.peak, b.held)
		return nil
	}
	if own+n > b.size {
		// NOTE: before any word of others: this fetch would not fit if
		// it were alone, so no wait makes room, and it is refused for
		// good, not retried for ever as if others held the memory.
		return b.tooLarge(own + n)
	}
	if others := b.held - own; others > 0 {
		return fmt.Errorf("%w (%s of its %s, %s): this fetch needed %s more, with %s free; it is retried shortly. "+
			"Should it happen often, raise %s, and the pod's memory limit with it",
			ErrGitMemoryBusy, byteSize(others), byteSize(b.size), GitBudgetFlag, byteSize(n), byteSize(b.size-b.held), GitBudgetFlag)
	}
	// NOTE: nothing else holds any of it: no wait makes room.
	return b.tooLarge(own + n)
}

// tooLarge refuses a fetch that needs need bytes at once, more than the
// whole budget: the fetch's own size, which a person must change.
func (b *GitBudget) tooLarge(need int64) error {
	return fmt.Errorf("%w into memory: reading it needs %s at once (its pack while it unpacks, and a commit's checkout), more than the controller's whole memory budget for git, %s; "+
		"keep large files out of the repository, or raise %s and the pod's memory limit with it",
		ErrGitTooLarge, byteSize(need), byteSize(b.size), GitBudgetFlag)
}

// give returns n bytes.
func (b *GitBudget) give(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held -= n
}

// processBudget is the budget of every fetch that names none: the
// controller's, sized by --git-memory-budget.
var processBudget atomic.Pointer[GitBudget]

func init() { processBudget.Store(NewGitBudget(DefaultGitMemoryBudget)) }

// ProcessGitBudget is the process's git budget.
func ProcessGitBudget() *GitBudget { return processBudget.Load() }

// SetProcessGitBudget sizes the process's git budget; the controller sets
// it once at start, before any fetch.
func SetProcessGitBudget(size int64) { processBudget.Store(NewGitBudget(size)) }

// MinGitMemoryBudget is the least budget the controller takes: below
// it, no repository worth a sync fits.
const MinGitMemoryBudget int64 = 32 << 20

// Worktree wraps a memory filesystem for the storage's checkout: what is
// written to it is taken from the storage's budget too, as a checkout
// holds each file of the tree a second time. It is returned on Release,
// with the rest.
func (s *BoundedStorage) Worktree(fs billy.Filesystem) billy.Filesystem {
	return budgetFS{Filesystem: fs, s: s}
}

// budgetFS is a filesystem whose writes take bytes of a storage's budget.
type budgetFS struct {
	billy.Filesystem
	s *BoundedStorage
}

func (f budgetFS) Create(name string) (billy.File, error) {
	file, err := f.Filesystem.Create(name)
	return f.wrap(file, err)
}

func (f budgetFS) OpenFile(name string, flag int, perm os.FileMode) (billy.File, error) {
	file, err := f.Filesystem.OpenFile(name, flag, perm)
	return f.wrap(file, err)
}

func (f budgetFS) TempFile(dir, prefix string) (billy.File, error) {
	file, err := f.Filesystem.TempFile(dir, prefix)
	return f.wrap(file, err)
}

func (f budgetFS) Chroot(dir string) (billy.Filesystem, error) {
	fs, err := f.Filesystem.Chroot(dir)
	if err != nil {
		return nil, err
	}
	return budgetFS{Filesystem: fs, s: f.s}, nil
}

// Capabilities are the wrapped filesystem's.
func (f budgetFS) Capabilities() billy.Capability { return billy.Capabilities(f.Filesystem) }

func (f budgetFS) wrap(file billy.File, err error) (billy.File, error) {
	if err != nil {
		return nil, err
	}
	return budgetFile{File: file, s: f.s}, nil
}

// budgetFile is a file whose writes take bytes of a storage's budget.
// NOTE: what a truncation or a removal frees is returned only on
// Release: a checkout is read, changed in a file or two and dropped.
type budgetFile struct {
	billy.File
	s *BoundedStorage
}

func (f budgetFile) Write(p []byte) (int, error) {
	if err := f.s.take(int64(len(p))); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}
