package source

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/memory"
)

// A git fetch lands in memory: go-git's memory storage unpacks every
// object of the pack whole. A pack is compressed, so a push of a few
// hundred KiB can hold a file of gigabytes of zeros, which the limits on
// the tree, checked once it is read, would come too late for: the
// controller would run out of memory first. So the pack is read twice.
// First its object headers alone, which give each object's unpacked size
// before anything is unpacked (a delta's, from the first bytes of the
// delta), against the limits; then, only when it fits, into the storage.

// GitStorage is a memory storage for one fetch that refuses a pack that
// would unpack past limits: more than MaxUncompressedBytes in all, or
// more than objectsPerFile objects per MaxFiles. What it holds is taken
// from the process's git budget (ProcessGitBudget); its user calls
// Release once it has read what it needs.
func GitStorage(limits Limits) *BoundedStorage {
	return ProcessGitBudget().Storage(limits)
}

func newBoundedStorage(limits Limits, budget *GitBudget) *BoundedStorage {
	return &BoundedStorage{Storage: memory.NewStorage(), limits: limits.withDefaults(), budget: budget}
}

// BoundedStorage is GitStorage's storage: go-git hands it each fetched
// pack whole, through PackfileWriter. The limits hold for all the packs
// of one storage together (a shallow fetch, then the whole history).
type BoundedStorage struct {
	*memory.Storage
	limits Limits
	// bytes and objects are what the packs taken so far unpack to.
	bytes, objects int64

	budget *GitBudget
	mu     sync.Mutex
	// taken is what the storage holds of the budget: the packs it holds
	// unpacked, and the one arriving.
	taken    int64
	released bool
}

// take takes n bytes of the budget for the storage.
func (s *BoundedStorage) take(n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return errors.New("the git storage was released: its fetch is over")
	}
	if err := s.budget.take(n, s.taken); err != nil {
		return err
	}
	s.taken += n
	return nil
}

// give returns n bytes the storage took.
func (s *BoundedStorage) give(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return
	}
	n = min(n, s.taken)
	s.taken -= n
	s.budget.give(n)
}

// Release returns all the storage holds to the budget. Its user calls it
// once done with the repository (a defer right after the clone or the
// fetch): the objects are garbage from then on. It may be called more
// than once.
func (s *BoundedStorage) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return
	}
	s.released = true
	s.budget.give(s.taken)
	s.taken = 0
}

// Release releases the budget a repository's storage holds, when it is a
// BoundedStorage.
func Release(st storage.Storer) {
	if s, ok := st.(*BoundedStorage); ok {
		s.Release()
	}
}

// PackfileWriter takes one pack, keeps it while it arrives (at most the
// unpacked limit, which a pack's compressed bytes cannot need more of),
// and on Close checks it and unpacks it into the storage. Both the pack
// and what it unpacks to are taken from the budget before they are held.
func (s *BoundedStorage) PackfileWriter() (io.WriteCloser, error) {
	return &packWriter{s: s}, nil
}

type packWriter struct {
	s      *BoundedStorage
	buf    bytes.Buffer
	failed bool
}

func (w *packWriter) Write(p []byte) (int, error) {
	if w.failed {
		return 0, errors.New("the pack was refused")
	}
	if int64(w.buf.Len()+len(p)) > w.s.limits.MaxUncompressedBytes-w.s.bytes {
		w.fail()
		return 0, w.s.tooLarge("its pack alone is over the limit")
	}
	if err := w.s.take(int64(len(p))); err != nil {
		w.fail()
		return 0, err
	}
	return w.buf.Write(p)
}

// fail drops the pack, and returns what it took.
func (w *packWriter) fail() {
	w.failed = true
	w.s.give(int64(w.buf.Len()))
	w.buf = bytes.Buffer{}
}

func (w *packWriter) Close() error {
	if w.failed || w.buf.Len() == 0 {
		return nil
	}
	// NOTE: the pack's bytes go back once it is unpacked, or refused.
	defer w.fail()
	size, objects, err := checkPack(w.buf.Bytes(), w.s.limits, w.s.bytes, w.s.objects)
	if err != nil {
		return err
	}
	if err := w.s.take(size); err != nil {
		return err
	}
	p, err := packfile.NewParserWithStorage(packfile.NewScanner(bytes.NewReader(w.buf.Bytes())), w.s.Storage)
	if err != nil {
		return err
	}
	// NOTE: a pack that fails half unpacked keeps its size taken from the
	// budget: the objects it stored stay in the storage until Release.
	if _, err = p.Parse(); err != nil {
		return err
	}
	w.s.bytes += size
	w.s.objects += objects
	return nil
}

// ErrGitTooLarge is the error of a fetch refused for its size.
var ErrGitTooLarge = errors.New("the repository is too large to read")

func (s *BoundedStorage) tooLarge(why string) error {
	return tooLarge(s.limits, why)
}

// tooLarge says why a fetch is refused, and what to do.
func tooLarge(limits Limits, why string) error {
	return fmt.Errorf("%w into memory: %s (one fetch may hold %s unpacked, in %d objects); "+
		"keep large files (build outputs, archives, images) out of the repository that holds the add-on, or move the add-on to a smaller one",
		ErrGitTooLarge, why, byteSize(limits.MaxUncompressedBytes), int64(limits.MaxFiles)*objectsPerFile)
}

// objectsPerFile is how many objects a fetch may hold per file of the
// tree limit: a file's blob, and the trees and commits around it.
const objectsPerFile = 4

// deltaHeaderBytes is enough of a delta to read its two sizes.
const deltaHeaderBytes = 32

// checkPack reads a pack's object headers, and each delta's first bytes,
// and refuses one whose objects would unpack past the limits, with what
// the storage holds already (bytes, objects), before any of them is
// unpacked into memory. It returns what the pack unpacks to.
func checkPack(pack []byte, limits Limits, held, heldObjects int64) (int64, int64, error) {
	sc := packfile.NewScanner(bytes.NewReader(pack))
	_, count, err := sc.Header()
	if err != nil {
		return 0, 0, err
	}
	if maxObjects := int64(limits.MaxFiles) * objectsPerFile; heldObjects+int64(count) > maxObjects {
		return 0, 0, tooLarge(limits, fmt.Sprintf("its packs hold %d objects", heldObjects+int64(count)))
	}
	total := held
	for range count {
		h, err := sc.NextObjectHeader()
		if err != nil {
			return 0, 0, err
		}
		size := h.Length
		if h.Type == plumbing.OFSDeltaObject || h.Type == plumbing.REFDeltaObject {
			if size > limits.MaxUncompressedBytes {
				return 0, 0, tooLarge(limits, "a delta in its pack is over the limit")
			}
			head := &headWriter{}
			if _, _, err := sc.NextObject(head); err != nil {
				return 0, 0, err
			}
			if size, err = deltaTargetSize(head.b); err != nil {
				return 0, 0, err
			}
		}
		if total += size; size > limits.MaxUncompressedBytes || total > limits.MaxUncompressedBytes {
			return 0, 0, tooLarge(limits, "its objects unpack to more than the limit")
		}
	}
	return total - held, int64(count), nil
}

// historyFactor is how much more than one tree's limits a fetch of an
// Addon's folder may hold in all: a commit no ref points at, from a
// server that sends no commit alone, needs the whole history.
const historyFactor = 4

// FetchLimits are the limits of one fetch for a tree of limits: its
// history is bounded by historyFactor times them, its tree by them as it
// is read.
func (l Limits) FetchLimits() Limits {
	l = l.withDefaults()
	l.MaxUncompressedBytes *= historyFactor
	l.MaxFiles *= historyFactor
	return l
}

// headWriter keeps the first deltaHeaderBytes written to it.
type headWriter struct{ b []byte }

func (w *headWriter) Write(p []byte) (int, error) {
	if room := deltaHeaderBytes - len(w.b); room > 0 {
		w.b = append(w.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// deltaTargetSize reads the size of the object a delta makes: the second
// of the two little-endian base-128 numbers a delta starts with.
func deltaTargetSize(b []byte) (int64, error) {
	var sizes [2]int64
	for i := range sizes {
		var n int64
		for shift := 0; ; shift += 7 {
			if len(b) == 0 || shift > 49 {
				return 0, errors.New("a delta in the pack has a malformed header")
			}
			n |= int64(b[0]&0x7f) << shift
			more := b[0]&0x80 != 0
			b = b[1:]
			if !more {
				break
			}
		}
		sizes[i] = n
	}
	return sizes[1], nil
}

// byteSize is n as a person reads it: in MiB from one up, in KiB for a
// whole number of them below, in bytes otherwise (64 KiB, 10 MiB, 1000
// bytes).
func byteSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
