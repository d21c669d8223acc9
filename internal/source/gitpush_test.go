package source

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-billy/v5/memfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"
	corev1 "k8s.io/api/core/v1"

	"capstan.dev/capstan/internal/netguard"
)

// pushFile clones u with auth, commits one file and pushes main, as
// gitops.Writer does with the auth the server gets from Fetcher.GitAuth.
func pushFile(t *testing.T, u string, auth transport.AuthMethod, name string) error {
	t.Helper()
	ctx := context.Background()
	repo, err := git.CloneContext(ctx, memory.NewStorage(), memfs.New(), &git.CloneOptions{URL: u, Auth: auth})
	if err != nil {
		return err
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	f, err := wt.Filesystem.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte("pushed\n"))
	f.Close()
	if _, err := wt.Add(name); err != nil {
		t.Fatal(err)
	}
	if _, err := wt.Commit("push "+name, &git.CommitOptions{Author: &object.Signature{Name: "t", Email: "t@example.com", When: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	return repo.PushContext(ctx, &git.PushOptions{Auth: auth})
}

func tokenSecret(token string) *corev1.Secret {
	return &corev1.Secret{Data: map[string][]byte{SecretKeyToken: []byte(token)}}
}

// TestGitPushThroughTheGuard pushes with the auth Fetcher.GitAuth gives the
// server's commits: it lands, with the credentials, through the guard.
func TestGitPushThroughTheGuard(t *testing.T) {
	repo := newGitRepo(t)
	run(t, repo.bare, "config", "http.receivepack", "true")
	srv := newGitServer(t, repo.root)
	srv.auth = [2]string{"x-access-token", "tok3n"}
	f := newTestFetcher(t, Options{}, srv.Server)
	u := srv.URL + "/repo.git"

	auth, err := f.GitAuth(context.Background(), u, tokenSecret("tok3n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pushFile(t, u, auth, "pushed.txt"); err != nil {
		t.Fatalf("a push through the guard: %v", err)
	}
	if got := run(t, repo.bare, "show", "main:pushed.txt"); got != "pushed" {
		t.Fatalf("pushed.txt on main: %q", got)
	}
}

// TestGitPushRefusedByTheGuard: a push to an address the guard refuses is
// refused before anything is dialled.
func TestGitPushRefusedByTheGuard(t *testing.T) {
	repo := newGitRepo(t)
	run(t, repo.bare, "config", "http.receivepack", "true")
	srv := newGitServer(t, repo.root)
	u := srv.URL + "/repo.git"
	// The clone goes through a Fetcher that allows the server; the push
	// through one that does not.
	allowed := newTestFetcher(t, Options{}, srv.Server)
	refusing := newTestFetcher(t, Options{Guard: netguard.Config{Allow: []string{}}}, srv.Server)
	fetchAuth, err := allowed.GitAuth(context.Background(), u, nil)
	if err != nil {
		t.Fatal(err)
	}
	pushAuth, err := refusing.GitAuth(context.Background(), u, nil)
	if err != nil {
		t.Fatal(err)
	}
	repoMem, err := git.CloneContext(context.Background(), memory.NewStorage(), nil, &git.CloneOptions{URL: u, Auth: fetchAuth, NoCheckout: true})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := srv.counts()
	err = repoMem.PushContext(context.Background(), &git.PushOptions{Auth: pushAuth})
	if !netguard.IsRefused(err) {
		t.Fatalf("want a refusal, got %v", err)
	}
	if after, _ := srv.counts(); after != before {
		t.Fatalf("the refused push made %d requests", after-before)
	}

	// Over ssh, the address is judged before go-git dials; only the
	// decision runs here.
	ssh := newGitTransports(refusing.client, refusing.guard).ssh
	for _, host := range []string{"127.0.0.1", "169.254.169.254", "fd00:ec2::254"} {
		if _, err := ssh.NewReceivePackSession(&transport.Endpoint{Protocol: "ssh", Host: host, Path: "/repo.git"}, nil); !netguard.IsRefused(err) {
			t.Errorf("ssh push to %s: want a refusal, got %v", host, err)
		}
	}
}

// TestGitPushRedirectDropsCredentials: a push whose ref listing is
// redirected to another origin goes there without the credentials, which
// are meant for the repository's own host.
func TestGitPushRedirectDropsCredentials(t *testing.T) {
	repo := newGitRepo(t)
	run(t, repo.bare, "config", "http.receivepack", "true")
	target := newGitServer(t, repo.root)
	var sawAuth atomic.Int32
	other := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			sawAuth.Add(1)
		}
		target.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(other.Close)
	redirector := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusFound)
	}))
	t.Cleanup(redirector.Close)
	f := newTestFetcher(t, Options{}, target.Server, other, redirector)

	// The clone, without credentials, comes from the target itself.
	fetchAuth, err := f.GitAuth(context.Background(), target.URL+"/repo.git", nil)
	if err != nil {
		t.Fatal(err)
	}
	repoMem, err := git.CloneContext(context.Background(), memory.NewStorage(), nil, &git.CloneOptions{URL: target.URL + "/repo.git", Auth: fetchAuth, NoCheckout: true})
	if err != nil {
		t.Fatal(err)
	}
	u := redirector.URL + "/repo.git"
	pushAuth, err := f.GitAuth(context.Background(), u, tokenSecret("tok3n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repoMem.CreateRemote(&config.RemoteConfig{Name: "redirected", URLs: []string{u}}); err != nil {
		t.Fatal(err)
	}
	_ = repoMem.PushContext(context.Background(), &git.PushOptions{RemoteName: "redirected", Auth: pushAuth, RefSpecs: []config.RefSpec{"refs/heads/main:refs/heads/elsewhere"}})
	if n := sawAuth.Load(); n != 0 {
		t.Fatalf("the other origin got the credentials %d times", n)
	}
	if out, _ := os.ReadFile(repo.bare + "/refs/heads/elsewhere"); !strings.Contains(string(out), repo.second) {
		t.Fatalf("the redirected push did not land (elsewhere: %q)", out)
	}
}
