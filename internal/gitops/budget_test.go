package gitops

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5"

	"capstan.dev/capstan/internal/gitops/gitserver"
	"capstan.dev/capstan/internal/source"
)

// TestGitBudgetReturnedByClonesAndCommits: every clone of the syncer's
// kind and every commit's clone, with its checkout, takes its memory
// from the git budget and returns all of it, whether it succeeded or
// failed, and a push retried on a new head holds one clone at a time. A
// commit while other fetches hold the budget fails transiently, with
// nothing committed.
func TestGitBudgetReturnedByClonesAndCommits(t *testing.T) {
	ctx := context.Background()
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	work := gitserver.Clone(t, url)
	// NOTE: a file of some size, so that a clone and its checkout are
	// told apart from a clone alone.
	work.Write("addons/shared.yaml", string(def("shared", ""))).
		Write("docs/big.txt", strings.Repeat("a line of the manual, not an add-on\n", 1<<15)).
		CommitAndPush("start")
	budget := source.NewGitBudget(64 << 20)
	returned := func(what string) {
		t.Helper()
		if held := budget.Held(); held != 0 {
			t.Fatalf("after %s, %d bytes of the git budget are still held", what, held)
		}
	}

	repo := Repo{URL: url, Budget: budget}
	g, commit, release, err := repo.Clone(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	cloned := budget.Held()
	if cloned < 1<<20 {
		t.Fatalf("a clone of a tree of over 1 MiB holds %d bytes of the budget", cloned)
	}
	if _, err := ReadSnapshot(g.Storer, commit, "addons"); err != nil {
		t.Fatal(err)
	}
	release()
	release()
	returned("a clone released twice")
	if _, _, _, err := repo.Clone(ctx, "nope"); err == nil {
		t.Fatal("a clone of a missing branch must fail")
	}
	returned("a clone that failed")

	w := &Writer{URL: url, Budget: budget}
	var mu sync.Mutex
	var atPush []int64
	w.beforePush = func() {
		mu.Lock()
		defer mu.Unlock()
		atPush = append(atPush, budget.Held())
		if len(atPush) == 1 {
			// Another commit lands first: the push is retried on a new clone.
			if _, err := (&Writer{URL: url}).Install(ctx, def("other", "")); err != nil {
				t.Error(err)
			}
		}
	}
	if _, err := w.Install(ctx, def("mine", "")); err != nil {
		t.Fatal(err)
	}
	returned("a commit pushed at its second attempt")
	if len(atPush) != 2 {
		t.Fatalf("pushes: %d, want 2", len(atPush))
	}
	// The checkout is the tree a second time.
	if atPush[0] < cloned*3/2 {
		t.Errorf("a commit's clone and checkout hold %d bytes, a clone alone %d: the checkout is not counted", atPush[0], cloned)
	}
	if atPush[1] > atPush[0]*3/2 {
		t.Errorf("at the second push, %d bytes are held, at the first %d: the first attempt's clone is still held", atPush[1], atPush[0])
	}
	w.beforePush = nil
	for what, change := range map[string]func() error{
		"a commit that changed nothing": func() error { _, err := w.Install(ctx, def("mine", "")); return err },
		"a read":                        func() error { _, err := w.Read(ctx, "mine"); return err },
		"a read of a missing add-on":    func() error { _, err := w.Read(ctx, "missing"); return err },
		"a suspend":                     func() error { _, err := w.Suspend(ctx, "mine"); return err },
		"a suspend again":               func() error { _, err := w.Suspend(ctx, "mine"); return err },
	} {
		_ = change()
		returned(what)
	}

	// Another fetch holds most of a budget: the commit is refused at
	// once, transiently, and nothing is committed.
	small := source.NewGitBudget(cloned * 3 / 2)
	other := small.Storage(CloneLimits)
	if _, err := git.CloneContext(ctx, other, nil, &git.CloneOptions{URL: url, Depth: 1, NoCheckout: true}); err != nil {
		t.Fatal(err)
	}
	head := work.Git("ls-remote", "origin", "main")
	if _, err := (&Writer{URL: url, Budget: small}).Resume(ctx, "mine"); !errors.Is(err, source.ErrGitMemoryBusy) {
		t.Fatalf("a commit while others hold the budget: %v; want it refused for the budget", err)
	}
	if now := work.Git("ls-remote", "origin", "main"); now != head {
		t.Fatalf("a refused commit moved the branch: %s, was %s", now, head)
	}
	other.Release()
	if held := small.Held(); held != 0 {
		t.Fatalf("after a refused commit, %d bytes of the git budget are still held", held)
	}
}
