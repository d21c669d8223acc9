package source

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// randomBytes are n bytes that no compression makes smaller: a pack of
// them is as large as they are.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(b)
	return b
}

// gatedGitServer serves root's repositories over https like newGitServer,
// and, while gate is set, holds each pack's answer once it has sent
// gateAt bytes until gate returns true (or 10 s pass): two fetches then
// both hold part of their pack at once.
func gatedGitServer(t *testing.T, root string, gateAt int, gate *atomic.Pointer[func() bool]) *httptest.Server {
	t.Helper()
	backend := &cgi.Handler{
		Path: filepath.Join(run(t, "", "--exec-path"), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1"},
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g := gate.Load(); g != nil && strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
			w = &gatedWriter{ResponseWriter: w, at: gateAt, open: *g}
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

type gatedWriter struct {
	http.ResponseWriter
	at, sent int
	open     func() bool
	waited   bool
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.sent += n
	if !w.waited && w.sent >= w.at {
		w.waited = true
		w.ResponseWriter.(http.Flusher).Flush()
		for end := time.Now().Add(10 * time.Second); !w.open() && time.Now().Before(end); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	return n, err
}

func (w *gatedWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

// TestGitBudgetBoundsConcurrentFetches: two fetches of Addons' git
// folders that fit the process's git budget alone but not together run
// at once. One fails, transiently, saying that other fetches hold the
// budget, its size and its flag; what they held together never passed
// the budget; once it is back, the fetch succeeds, and every byte of
// the budget is returned after each fetch, failed or not.
func TestGitBudgetBoundsConcurrentFetches(t *testing.T) {
	// NOTE: noise, so the pack is as large as the file: 4 MiB to send,
	// then 4 MiB unpacked beside it while it unpacks.
	const fileBytes = 4 << 20
	noise := randomBytes(fileBytes)
	_, _, bare := packRepo(t, map[string][]byte{"big.bin": noise, "cm.yaml": []byte("kind: ConfigMap\n")})
	budget := NewGitBudget(9 << 20)
	var gate atomic.Pointer[func() bool]
	// Each answer waits, 3 MiB into its pack, until both fetches took
	// most of that from the budget (what is in flight is not taken yet):
	// each holds 2 MiB or more, and needs 8 MiB, of 9 MiB, to unpack.
	both := func() bool { return budget.Held() >= 5<<20 }
	gate.Store(&both)
	srv := gatedGitServer(t, filepath.Dir(bare), 3<<20, &gate)
	url := srv.URL + "/repo.git"
	// NOTE: a Fetcher each, as one Fetcher makes one fetch of a commit
	// for all who ask at once.
	fetcher := func() *Fetcher { return newTestFetcher(t, Options{GitBudget: budget}, srv) }

	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = fetcher().Git(context.Background(), capstanv1.GitSource{URL: url}, nil)
		})
	}
	wg.Wait()
	busy := 0
	for _, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, ErrGitMemoryBusy):
			busy++
			var fe *FetchError
			if !errors.As(err, &fe) || fe.Status != 0 || errors.Is(err, ErrGitTooLarge) {
				t.Errorf("a fetch refused for the budget is not a transient fetch error: %#v", err)
			}
			for _, want := range []string{"the git data of other fetches holds the controller's memory budget for git", "of its 9 MiB", "--git-memory-budget", "retried"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal %q does not say %q", err, want)
				}
			}
		default:
			t.Errorf("a fetch failed otherwise: %v", err)
		}
	}
	if busy == 0 {
		t.Fatalf("two fetches of %d MiB each fit a budget of %d MiB together: %v", fileBytes>>20, budget.Size()>>20, errs)
	}
	t.Log(errs)
	if peak := budget.Peak(); peak > budget.Size() {
		t.Fatalf("the fetches held %d bytes at once, over the budget of %d", peak, budget.Size())
	}
	if held := budget.Held(); held != 0 {
		t.Fatalf("after the fetches, %d bytes of the budget are still held", held)
	}

	// With the budget back, the fetch succeeds, and returns it all.
	gate.Store(nil)
	tree, err := fetcher().Git(context.Background(), capstanv1.GitSource{URL: url}, nil)
	if err != nil {
		t.Fatalf("a fetch alone, with the budget back: %v", err)
	}
	if got := readTreeFile(t, tree, "cm.yaml"); got != "kind: ConfigMap\n" {
		t.Fatalf("cm.yaml: %q", got)
	}
	if held := budget.Held(); held != 0 {
		t.Fatalf("after a fetch that succeeded, %d bytes of the budget are still held", held)
	}
}

// TestGitBudgetHeldByAnotherStorage: a fetch while another fetch's
// storage holds most of the budget is refused, without waiting for it;
// once that storage is released, the same fetch succeeds. A fetch that
// needs more than the whole budget alone is refused for its size, which
// no wait would change.
func TestGitBudgetHeldByAnotherStorage(t *testing.T) {
	noise := randomBytes(2 << 20)
	srv, url, _ := packRepo(t, map[string][]byte{"big.bin": noise})
	// NOTE: a fetch of it holds its 2 MiB pack and the 2 MiB it unpacks to
	// at once: it fits 5 MiB alone, not beside another fetch's 2 MiB.
	budget := NewGitBudget(5 << 20)
	other := budget.Storage(DefaultLimits)
	if _, err := git.CloneContext(context.Background(), other, nil, &git.CloneOptions{URL: url, InsecureSkipTLS: true, Depth: 1, NoCheckout: true}); err != nil {
		t.Fatal(err)
	}
	if held := budget.Held(); held < 2<<20 {
		t.Fatalf("a clone of a pack of 2 MiB holds %d bytes of the budget", held)
	}
	fetcher := func() *Fetcher { return newTestFetcher(t, Options{GitBudget: budget}, srv.Server) }
	// NOTE: the other storage is never released while this fetch runs: a
	// fetch that waited for it would end at the context's deadline.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := fetcher().Git(ctx, capstanv1.GitSource{URL: url}, nil); !errors.Is(err, ErrGitMemoryBusy) {
		t.Fatalf("a fetch while another holds the budget: %v; want it refused at once", err)
	}
	other.Release()
	other.Release()
	if _, err := fetcher().Git(context.Background(), capstanv1.GitSource{URL: url}, nil); err != nil {
		t.Fatalf("a fetch once the other released the budget: %v", err)
	}
	if held := budget.Held(); held != 0 {
		t.Fatalf("%d bytes of the budget are still held", held)
	}

	small := NewGitBudget(3 << 20)
	_, err := newTestFetcher(t, Options{GitBudget: small}, srv.Server).Git(context.Background(), capstanv1.GitSource{URL: url}, nil)
	if !errors.Is(err, ErrGitTooLarge) || errors.Is(err, ErrGitMemoryBusy) || !strings.Contains(err.Error(), "more than the controller's whole memory budget for git, 3 MiB") {
		t.Fatalf("a fetch larger than the whole budget: %v; want it refused for its size", err)
	}
	if held := small.Held(); held != 0 {
		t.Fatalf("after a refused fetch, %d bytes of the budget are still held", held)
	}
}

// TestGitBudgetRefusesWhatNeverFits: a fetch that needs more than the
// whole budget alone is refused for its size, even while another fetch
// holds a byte of it: called busy, it would be retried for ever, as if a
// wait could make room.
func TestGitBudgetRefusesWhatNeverFits(t *testing.T) {
	budget := NewGitBudget(10 << 20)
	other := budget.Storage(Limits{})
	defer other.Release()
	if err := other.take(1); err != nil {
		t.Fatal(err)
	}
	big := budget.Storage(Limits{})
	defer big.Release()
	if err := big.take(6 << 20); err != nil {
		t.Fatal(err)
	}
	err := big.take(6 << 20)
	if !errors.Is(err, ErrGitTooLarge) || errors.Is(err, ErrGitMemoryBusy) || !strings.Contains(err.Error(), "--git-memory-budget") {
		t.Fatalf("a fetch of 12 MiB under a 10 MiB budget, with 1 byte held by another: %v; want too large, naming the flag", err)
	}
	// One that would fit alone, refused while others hold the rest, is
	// busy: 6 MiB held, 2 more asked, with 3 MiB held by another.
	if err := other.take(3 << 20); err != nil {
		t.Fatal(err)
	}
	if err := big.take(2 << 20); !errors.Is(err, ErrGitMemoryBusy) {
		t.Fatalf("a fetch that fits alone, refused while another holds 3 MiB: %v; want busy", err)
	}
	big.Release()
	other.Release()
	if held := budget.Held(); held != 0 {
		t.Fatalf("after both released, %d bytes are held", held)
	}
}
