package gitops

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"capstan.dev/capstan/internal/gitops/gitserver"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/source"
)

func def(name, extra string) []byte {
	return []byte("# " + name + " keeps this comment\nname: " + name + "\nhelm:\n  repo: https://charts.example.com/\n  chart: " + name + "\n  version: 1.0.0\n" + extra)
}

func TestWriter(t *testing.T) {
	ctx := context.Background()
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	w.Write("README.md", "gitops\n").CommitAndPush("start")

	writer := &Writer{URL: url, AuthorName: "Ada", AuthorEmail: "ada@example.com"}
	if _, err := writer.Install(ctx, def("grafana", "")); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Install(ctx, def("grafana", "")); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Fatalf("second install: %v", err)
	}
	if _, err := writer.Install(ctx, []byte("name: bad\nhelm: {repo: http://x, chart: c}\n")); err == nil || !strings.Contains(err.Error(), "addons/bad.yaml:2: helm.repo") {
		t.Fatalf("an invalid definition must not be committed: %v", err)
	}
	if _, err := writer.Suspend(ctx, "grafana"); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Suspend(ctx, "grafana"); !errors.Is(err, ErrNoChange) {
		t.Fatalf("suspending twice: %v", err)
	}
	w.Pull()
	got := w.Git("show", "HEAD:addons/grafana.yaml")
	if !strings.Contains(got, "suspend: true") || !strings.Contains(got, "# grafana keeps this comment") {
		t.Fatalf("suspended definition:\n%s", got)
	}
	if log := w.Git("log", "-1", "--format=%an <%ae>|%s"); strings.TrimSpace(log) != "Ada <ada@example.com>|Suspend add-on grafana" {
		t.Fatalf("commit: %q", log)
	}
	if _, err := writer.Resume(ctx, "grafana"); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Edit(ctx, "grafana", def("grafana", "prune: true\n"), ""); err != nil {
		t.Fatal(err)
	}
	w.Pull()
	if got := w.Git("show", "HEAD:addons/grafana.yaml"); strings.Contains(got, "suspend") || !strings.Contains(got, "prune: true") {
		t.Fatalf("edited definition:\n%s", got)
	}
	if _, err := writer.ChangeValues(ctx, "grafana", ValueChanges(nil, map[string]any{"replicas": 3, "ingress": map[string]any{"enabled": true}})); err != nil {
		t.Fatal(err)
	}
	w.Pull()
	got = w.Git("show", "HEAD:addons/grafana.yaml")
	if !strings.Contains(got, "values:\n  ingress:\n    enabled: true\n  replicas: 3\n") || !strings.Contains(got, "# grafana keeps this comment") || !strings.Contains(got, "prune: true") {
		t.Fatalf("definition with values:\n%s", got)
	}
	if _, err := writer.Remove(ctx, "grafana"); err != nil {
		t.Fatal(err)
	}
	// The folder stays, with a file that says why: one that is gone would
	// read as a mistake, and keep the Addon.
	w.Pull()
	if out := w.Git("ls-files", "addons"); strings.TrimSpace(out) != "addons/.keep" {
		t.Fatalf("files left: %q; want addons/.keep alone", out)
	}
	if _, s := readHead(t, url, "main", "addons"); len(s.Definitions)+len(s.Invalid) != 0 {
		t.Fatalf("the folder after the last removal: %+v", s)
	}
	if n := strings.Count(w.Git("log", "--format=%s"), "\n"); n != 7 {
		t.Fatalf("want 7 commits (start and one per change), got %d:\n%s", n, w.Git("log", "--oneline"))
	}
}

func TestWriterRaces(t *testing.T) {
	ctx := context.Background()
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	gitserver.Clone(t, url).Write("addons/shared.yaml", string(def("shared", ""))).CommitAndPush("start")

	// Another file lands between our read and our push: the push is retried
	// on the new head and both changes land.
	other := &Writer{URL: url}
	a := &Writer{URL: url}
	once := sync.Once{}
	a.beforePush = func() {
		once.Do(func() {
			if _, err := other.Install(ctx, def("other", "")); err != nil {
				t.Error(err)
			}
		})
	}
	if _, err := a.Install(ctx, def("mine", "")); err != nil {
		t.Fatal(err)
	}

	// The same file changes between our read and our push: a conflict, and
	// the other change stays.
	b := &Writer{URL: url}
	once2 := sync.Once{}
	b.beforePush = func() {
		once2.Do(func() {
			if _, err := other.Edit(ctx, "shared", def("shared", "prune: true\n"), ""); err != nil {
				t.Error(err)
			}
		})
	}
	_, err := b.Suspend(ctx, "shared")
	var conflict *ConflictError
	if !errors.As(err, &conflict) || conflict.File != "addons/shared.yaml" {
		t.Fatalf("want a conflict on addons/shared.yaml, got %v", err)
	}

	// Real concurrency: writers on different files all land.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for _, name := range []string{"p1", "p2", "p3", "p4"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := (&Writer{URL: url, Attempts: 10}).Install(ctx, def(name, ""))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}

	w := gitserver.Clone(t, url)
	files := strings.Fields(w.Git("ls-files", "addons"))
	if strings.Join(files, " ") != "addons/mine.yaml addons/other.yaml addons/p1.yaml addons/p2.yaml addons/p3.yaml addons/p4.yaml addons/shared.yaml" {
		t.Fatalf("files: %v", files)
	}
	if got := w.Git("show", "HEAD:addons/shared.yaml"); !strings.Contains(got, "prune: true") || strings.Contains(got, "suspend") {
		t.Fatalf("the conflicting change overwrote the other:\n%s", got)
	}
}

// TestWriterPushWhoseAnswerIsLost: a push that lands on the server, whose
// answer the writer never sees (a proxy's 502 after receive-pack), is the
// change made: Remove returns the commit the branch is at, not the
// conflict a retry would find with its own change, which would take off
// the uninstall mark of a removal that is in git.
func TestWriterPushWhoseAnswerIsLost(t *testing.T) {
	ctx := context.Background()
	srv := gitserver.Start(t)
	repoURL := srv.Create(t, "gitops")
	w := gitserver.Clone(t, repoURL)
	w.Write("addons/grafana.yaml", string(def("grafana", ""))).Write("addons/loki.yaml", string(def("loki", ""))).CommitAndPush("start")

	target, err := neturl.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var landed atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
			rec := httptest.NewRecorder()
			proxy.ServeHTTP(rec, r)
			if rec.Code == http.StatusOK {
				landed.Add(1)
			}
			http.Error(rw, "bad gateway", http.StatusBadGateway)
			return
		}
		proxy.ServeHTTP(rw, r)
	}))
	t.Cleanup(front.Close)

	commit, err := (&Writer{URL: front.URL + strings.TrimPrefix(repoURL, srv.URL)}).Remove(ctx, "grafana")
	if err != nil {
		t.Fatalf("a removal that landed, whose answer was lost: %v", err)
	}
	if n := landed.Load(); n != 1 {
		t.Fatalf("%d pushes reached the server; want 1", n)
	}
	w.Pull()
	if head := strings.TrimSpace(w.Git("rev-parse", "HEAD")); head != commit {
		t.Fatalf("the branch is at %s; Remove returned %s", head, commit)
	}
	if files := strings.TrimSpace(w.Git("ls-files", "addons")); files != "addons/loki.yaml" {
		t.Fatalf("files: %q; want addons/loki.yaml alone", files)
	}
}

// TestWriterPushCutByItsContext: a push whose context ends after the
// server took it (a caller's deadline, a Ctrl-C) is the change made as
// well: the branch is read on a bound of its own, and Remove returns the
// commit, so a removal that is in git keeps its uninstall mark.
func TestWriterPushCutByItsContext(t *testing.T) {
	srv := gitserver.Start(t)
	repoURL := srv.Create(t, "gitops")
	w := gitserver.Clone(t, repoURL)
	w.Write("addons/grafana.yaml", string(def("grafana", ""))).Write("addons/loki.yaml", string(def("loki", ""))).CommitAndPush("start")
	hold := srv.HoldAt(t, "/git-receive-pack", 1, true)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		<-hold.Reached
		cancel()
	}()
	commit, err := (&Writer{URL: hold.URL + "/gitops.git"}).Remove(ctx, "grafana")
	if err != nil {
		t.Fatalf("a removal that landed, whose context ended before its answer: %v", err)
	}
	w.Pull()
	if head := strings.TrimSpace(w.Git("rev-parse", "HEAD")); head != commit {
		t.Fatalf("the branch is at %s; Remove returned %s", head, commit)
	}
	if files := strings.TrimSpace(w.Git("ls-files", "addons")); files != "addons/loki.yaml" {
		t.Fatalf("files: %q; want addons/loki.yaml alone", files)
	}
}

// TestWriterPushesThroughTheFetchGuard commits with the auth the controller
// gives the server's writers (source.Fetcher.GitAuth): its pushes go
// through the fetch guard, and land.
func TestWriterPushesThroughTheFetchGuard(t *testing.T) {
	ctx := context.Background()
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	w.Write("README.md", "gitops\n").CommitAndPush("start")

	fetcher, err := source.NewFetcher(source.Options{Guard: netguard.Config{Allow: []string{"127.0.0.1/32"}, LoopbackOnly: true}})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := fetcher.GitAuth(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	writer := &Writer{URL: url, Auth: auth, AuthorName: "Ada", AuthorEmail: "ada@example.com"}
	if _, err := writer.Install(ctx, def("grafana", "")); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Suspend(ctx, "grafana"); err != nil {
		t.Fatal(err)
	}
	w.Pull()
	if got := w.Git("show", "HEAD:addons/grafana.yaml"); !strings.Contains(got, "suspend: true") {
		t.Fatalf("the pushed definition:\n%s", got)
	}
}

// TestWriterYml changes a definition written as name.yml, which the syncer
// reads as well as name.yaml: the writer edits that file, and never adds a
// name.yaml beside it, which would define the add-on twice.
func TestWriterYml(t *testing.T) {
	ctx := context.Background()
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	w.Write("addons/grafana.yml", string(def("grafana", ""))).CommitAndPush("start")
	writer := &Writer{URL: url}

	if _, err := writer.Install(ctx, def("grafana", "")); err == nil || !strings.Contains(err.Error(), "addons/grafana.yml exists already") {
		t.Fatalf("install beside addons/grafana.yml: %v", err)
	}
	if _, err := writer.Suspend(ctx, "grafana"); err != nil {
		t.Fatal(err)
	}
	w.Pull()
	if got := w.Git("show", "HEAD:addons/grafana.yml"); !strings.Contains(got, "suspend: true") {
		t.Fatalf("suspended definition:\n%s", got)
	}
	if _, err := writer.Remove(ctx, "grafana"); err != nil {
		t.Fatal(err)
	}
	w.Pull()
	if out := w.Git("ls-files", "addons"); strings.TrimSpace(out) != "addons/.keep" {
		t.Fatalf("files left: %q; want addons/.keep alone", out)
	}

	// Both files: the syncer applies neither, and the writer says which.
	w.Write("addons/loki.yml", string(def("loki", ""))).Write("addons/loki.yaml", string(def("loki", ""))).CommitAndPush("twice")
	if _, err := writer.Suspend(ctx, "loki"); err == nil || !strings.Contains(err.Error(), "addons/loki.yaml and addons/loki.yml both define add-on loki") {
		t.Fatalf("suspend of a definition written twice: %v", err)
	}
}

// TestWriterSuspendsAHandWrittenFileOnce: a definition that says suspend
// already, in a layout of its own, is no change, and nothing is committed.
func TestWriterSuspendsAHandWrittenFileOnce(t *testing.T) {
	ctx := context.Background()
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	const hand = "---\nname: grafana\n\nhelm:\n    repo: https://charts.example.com/\n    chart: grafana\n\nsuspend: True\n"
	w.Write("addons/grafana.yaml", hand).CommitAndPush("by hand")
	before := strings.TrimSpace(w.Git("rev-parse", "HEAD"))

	if _, err := (&Writer{URL: url}).Suspend(ctx, "grafana"); !errors.Is(err, ErrNoChange) {
		t.Fatalf("suspending a suspended add-on: %v; want ErrNoChange", err)
	}
	w.Pull()
	if after := strings.TrimSpace(w.Git("rev-parse", "HEAD")); after != before {
		t.Fatalf("a commit was pushed:\n%s", w.Git("show", "HEAD"))
	}
}

// TestWriterTakesTurns checks that no more than MaxConcurrentCommits
// commits, each a clone in memory, are made at once in a process: the next
// waits for a turn, and is refused with ErrBusy when none comes.
func TestWriterTakesTurns(t *testing.T) {
	ctx := context.Background()
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	gitserver.Clone(t, url).Write("README.md", "gitops\n").CommitAndPush("start")
	defer func(d time.Duration) { commitWait = d }(commitWait)
	commitWait = 200 * time.Millisecond

	// MaxConcurrentCommits writers stop before their push, holding every turn.
	held, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	for i := range MaxConcurrentCommits {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// NOTE: once, since the push that loses the race between them
			// is retried, and pushes again.
			var once sync.Once
			w := &Writer{URL: url, Attempts: 10, beforePush: func() { once.Do(func() { held <- struct{}{}; <-release }) }}
			if _, err := w.Install(ctx, def(fmt.Sprintf("held%d", i), "")); err != nil {
				t.Error(err)
			}
		}()
	}
	for range MaxConcurrentCommits {
		<-held
	}
	if _, err := (&Writer{URL: url}).Install(ctx, def("late", "")); !errors.Is(err, ErrBusy) {
		t.Errorf("a commit past every turn: %v; want ErrBusy", err)
	}
	close(release)
	wg.Wait()
	if _, err := (&Writer{URL: url}).Install(ctx, def("late", "")); err != nil {
		t.Fatalf("a commit once the turns are free: %v", err)
	}
}

// TestWriterRefusesARemovalAnotherFileKeeps: addons/10-grafana.yaml, a
// file renamed from grafana.yaml that still says name: grafana, is
// invalid, and the syncer keeps the Addon grafana for it. A removal of
// grafana.yaml would then leave the Addon (and one marked for uninstall
// would stay marked): it is refused, names that file, and commits
// nothing. A file that names another add-on does not stop it.
func TestWriterRefusesARemovalAnotherFileKeeps(t *testing.T) {
	ctx := context.Background()
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	w.Write("addons/grafana.yaml", string(def("grafana", ""))).Write("addons/10-grafana.yaml", string(def("grafana", ""))).
		Write("addons/loki.yaml", string(def("loki", ""))).Write("addons/20-loki.yaml", string(def("loki-old", ""))).CommitAndPush("start")
	head := strings.TrimSpace(w.Git("rev-parse", "HEAD"))
	writer := &Writer{URL: url}

	_, err := writer.Remove(ctx, "grafana")
	if !errors.Is(err, ErrKeptByAnotherFile) || !strings.Contains(err.Error(), "removing addons/grafana.yaml: addons/10-grafana.yaml names the add-on too") {
		t.Fatalf("removal of grafana beside 10-grafana.yaml: %v; want it refused, naming that file", err)
	}
	w.Pull()
	if now := strings.TrimSpace(w.Git("rev-parse", "HEAD")); now != head {
		t.Fatalf("the branch moved to %s; want nothing committed", now)
	}
	if _, err := writer.Remove(ctx, "loki"); err != nil {
		t.Fatalf("removal of loki, whose other file names loki-old: %v", err)
	}
}
