// Package gitserver runs a real git server on loopback for tests: git's own
// http-backend behind net/http/cgi, with pushes enabled, and working copies
// driven by the git command.
package gitserver

import (
	"bytes"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// Server serves bare repositories from a temporary folder over smart HTTP.
type Server struct {
	// Root is the folder that holds the bare repositories.
	Root string
	// URL is the server's base URL, such as http://127.0.0.1:40123.
	URL string

	fetches, listings atomic.Int64
}

// Listings is how many ref listings the server has answered: one per
// ls-remote, and one at the start of each fetch.
func (s *Server) Listings() int64 { return s.listings.Load() }

// Fetches is how many fetches (clones) of any repository the server has
// answered: the upload-pack requests that send objects, not the ref
// listings that ls-remote reads.
func (s *Server) Fetches() int64 { return s.fetches.Load() }

// Start runs a server until the test ends. It skips the test when git or its
// http-backend is not installed.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	execPath := strings.TrimSpace(run(t, "", "git", "--exec-path"))
	backend := filepath.Join(execPath, "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("git-http-backend is not installed: %v", err)
	}
	root := t.TempDir()
	h := &cgi.Handler{
		Path: backend,
		Root: "/",
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	s := &Server{Root: root}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack"):
			s.fetches.Add(1)
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/info/refs"):
			s.listings.Add(1)
		}
		h.ServeHTTP(w, r)
	})) // httptest listens on 127.0.0.1 only.
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Create makes an empty bare repository that accepts pushes, with main as
// its default branch, and returns its URL.
func (s *Server) Create(t testing.TB, name string) string {
	t.Helper()
	dir := filepath.Join(s.Root, name+".git")
	run(t, "", "git", "init", "-q", "--bare", "-b", "main", dir)
	run(t, dir, "git", "config", "http.receivepack", "true")
	return s.URL + "/" + name + ".git"
}

// Work is a working copy of a repository.
type Work struct {
	t   testing.TB
	Dir string
}

// Clone checks out a repository into a temporary folder.
func Clone(t testing.TB, url string) *Work {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "work")
	run(t, "", "git", "clone", "-q", url, dir)
	w := &Work{t: t, Dir: dir}
	w.Git("config", "user.name", "Test")
	w.Git("config", "user.email", "test@example.com")
	w.Git("config", "commit.gpgsign", "false")
	if strings.TrimSpace(w.Git("branch", "--show-current")) == "" {
		w.Git("checkout", "-q", "-b", "main")
	}
	return w
}

// Git runs a git command in the working copy and returns its output.
func (w *Work) Git(args ...string) string {
	w.t.Helper()
	return run(w.t, w.Dir, "git", args...)
}

// Write writes a file, creating its folders.
func (w *Work) Write(name, content string) *Work {
	w.t.Helper()
	p := filepath.Join(w.Dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
	return w
}

// Symlink makes a symbolic link.
func (w *Work) Symlink(name, target string) *Work {
	w.t.Helper()
	p := filepath.Join(w.Dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		w.t.Fatal(err)
	}
	return w
}

// Remove deletes a file or folder.
func (w *Work) Remove(name string) *Work {
	w.t.Helper()
	if err := os.RemoveAll(filepath.Join(w.Dir, filepath.FromSlash(name))); err != nil {
		w.t.Fatal(err)
	}
	return w
}

// Commit commits everything and returns the commit's hash.
func (w *Work) Commit(message string) string {
	w.t.Helper()
	w.Git("add", "-A")
	w.Git("commit", "-q", "--allow-empty", "-m", message)
	return strings.TrimSpace(w.Git("rev-parse", "HEAD"))
}

// Push pushes main.
func (w *Work) Push() *Work {
	w.t.Helper()
	w.Git("push", "-q", "origin", "HEAD:refs/heads/main")
	return w
}

// CommitAndPush commits everything, pushes main and returns the commit.
func (w *Work) CommitAndPush(message string) string {
	w.t.Helper()
	h := w.Commit(message)
	w.Push()
	return h
}

// ReplaceHistory force-pushes a new root commit, unrelated to the old
// history, that holds only the given files.
func (w *Work) ReplaceHistory(files map[string]string, message string) string {
	w.t.Helper()
	w.Git("checkout", "-q", "--orphan", "replaced")
	w.Git("rm", "-q", "-rf", "--ignore-unmatch", ".")
	for name, content := range files {
		w.Write(name, content)
	}
	h := w.Commit(message)
	w.Git("push", "-q", "-f", "origin", "HEAD:refs/heads/main")
	return h
}

// Pull fetches and resets the working copy to the remote's main.
func (w *Work) Pull() *Work {
	w.t.Helper()
	w.Git("fetch", "-q", "origin")
	w.Git("reset", "-q", "--hard", "origin/main")
	return w
}

func run(t testing.TB, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "HOME="+os.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}
