package source

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/netguard"
)

// gitRepo is a bare repository made with the system git, with two commits:
// the first (not a branch tip) and the second (main's tip, tagged v1.0.0).
type gitRepo struct {
	root   string // GIT_PROJECT_ROOT
	bare   string // root/repo.git
	first  string
	second string
}

func run(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
		"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func newGitRepo(t *testing.T) *gitRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	root := t.TempDir()
	work := filepath.Join(root, "work")
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(work, "deploy", "base"), 0o755))
	run(t, work, "init", "-q", "-b", "main")
	must(os.WriteFile(filepath.Join(work, "deploy", "base", "cm.yaml"), []byte("kind: ConfigMap\nversion: one\n"), 0o644))
	run(t, work, "add", ".")
	run(t, work, "commit", "-q", "-m", "first")
	first := run(t, work, "rev-parse", "HEAD")
	must(os.WriteFile(filepath.Join(work, "deploy", "base", "cm.yaml"), []byte("kind: ConfigMap\nversion: two\n"), 0o644))
	must(os.Symlink("base/cm.yaml", filepath.Join(work, "deploy", "link.yaml")))
	must(os.Symlink("../../../../etc/passwd", filepath.Join(work, "deploy", "escape.yaml")))
	must(os.Symlink("base", filepath.Join(work, "deploy", "dirlink")))
	run(t, work, "add", ".")
	run(t, work, "commit", "-q", "-m", "second")
	second := run(t, work, "rev-parse", "HEAD")
	run(t, work, "tag", "-a", "v1.0.0", "-m", "release")
	run(t, work, "branch", "old", first)
	bare := filepath.Join(root, "repo.git")
	run(t, root, "clone", "-q", "--bare", work, bare)
	run(t, bare, "update-server-info")
	return &gitRepo{root: root, bare: bare, first: first, second: second}
}

// gitServer serves repositories over smart HTTP with git http-backend behind
// net/http/cgi, on loopback TLS, recording the upload-pack requests.
type gitServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests int
	deepen   int // upload-pack requests that asked for a shallow fetch
	uploads  int // upload-pack requests (the fetches' POSTs)
	auth     [2]string
	// busy, when set, answers every upload-pack request with 429 and a
	// Retry-After of a minute.
	busy bool
}

func newGitServer(t *testing.T, root string) *gitServer {
	t.Helper()
	execPath := run(t, "", "--exec-path")
	backend := &cgi.Handler{
		Path:   filepath.Join(execPath, "git-http-backend"),
		Env:    []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1"},
		Stderr: io.Discard,
	}
	s := &gitServer{}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests++
		need := s.auth
		s.mu.Unlock()
		if need[0] != "" {
			u, p, ok := r.BasicAuth()
			if !ok || u != need[0] || p != need[1] {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		}
		if strings.HasSuffix(r.URL.Path, "/git-upload-pack") && r.Method == http.MethodPost {
			s.mu.Lock()
			s.uploads++
			busy := s.busy
			s.mu.Unlock()
			if busy {
				w.Header().Set("Retry-After", "60")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte("deepen 1")) {
				s.mu.Lock()
				s.deepen++
				s.mu.Unlock()
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *gitServer) counts() (requests, deepen int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests, s.deepen
}

func readTreeFile(t *testing.T, tr *Tree, name string) string {
	t.Helper()
	b, err := fs.ReadFile(tr.FS, name)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

func TestGitOverSmartHTTP(t *testing.T) {
	repo := newGitRepo(t)
	srv := newGitServer(t, repo.root)
	f := newTestFetcher(t, Options{}, srv.Server)
	ctx := context.Background()
	u := srv.URL + "/repo.git"

	tests := []struct {
		name, revision, commit, version string
	}{
		{"default branch", "", repo.second, "two"},
		{"branch", "main", repo.second, "two"},
		{"annotated tag", "v1.0.0", repo.second, "two"},
		{"full ref", "refs/heads/old", repo.first, "one"},
		{"commit at a branch tip", repo.first, repo.first, "one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := f.Git(ctx, capstanv1.GitSource{URL: u, Revision: tt.revision}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tr.Commit != tt.commit {
				t.Fatalf("commit %s, want %s", tr.Commit, tt.commit)
			}
			if got := readTreeFile(t, tr, "deploy/base/cm.yaml"); !strings.Contains(got, "version: "+tt.version) {
				t.Fatalf("cm.yaml: %q", got)
			}
		})
	}
	_, deepen := srv.counts()
	if deepen == 0 {
		t.Fatal("no fetch was shallow (depth 1)")
	}
	if got := f.Stats().GitFetches.Load(); got != 2 {
		t.Fatalf("fetched %d times, want 2 (one per commit)", got)
	}

	// A cached commit is served without any request.
	before, _ := srv.counts()
	tr, err := f.Git(ctx, capstanv1.GitSource{URL: u, Revision: repo.second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if after, _ := srv.counts(); after != before || tr.Commit != repo.second {
		t.Fatalf("a cached commit made %d requests", after-before)
	}

	// Symlinks: inside the tree they resolve; one that leaves it is refused.
	if got := readTreeFile(t, tr, "deploy/link.yaml"); !strings.Contains(got, "version: two") {
		t.Fatalf("link.yaml: %q", got)
	}
	if got := readTreeFile(t, tr, "deploy/dirlink/cm.yaml"); !strings.Contains(got, "version: two") {
		t.Fatalf("dirlink/cm.yaml: %q", got)
	}
	if _, err := fs.ReadFile(tr.FS, "deploy/escape.yaml"); !errors.Is(err, ErrLinkLeavesTree) {
		t.Fatalf("want ErrLinkLeavesTree, got %v", err)
	}
	sub, err := fs.Sub(tr.FS, "deploy")
	if err != nil {
		t.Fatal(err)
	}
	if got := readTreeFile(t, &Tree{FS: sub}, "base/cm.yaml"); !strings.Contains(got, "two") {
		t.Fatal("fs.Sub does not work")
	}
}

// TestGitCommitNotAtATip fetches a commit no ref points at: shallow where the
// server allows fetching by hash, and with a full fetch where it does not.
func TestGitCommitNotAtATip(t *testing.T) {
	for _, allow := range []bool{true, false} {
		t.Run(map[bool]string{true: "server allows hash wants", false: "server refuses hash wants"}[allow], func(t *testing.T) {
			repo := newGitRepo(t)
			run(t, repo.bare, "branch", "-D", "old")
			if allow {
				run(t, repo.bare, "config", "uploadpack.allowReachableSHA1InWant", "true")
			}
			srv := newGitServer(t, repo.root)
			f := newTestFetcher(t, Options{}, srv.Server)
			tr, err := f.Git(context.Background(), capstanv1.GitSource{URL: srv.URL + "/repo.git", Revision: repo.first}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := readTreeFile(t, tr, "deploy/base/cm.yaml"); !strings.Contains(got, "version: one") {
				t.Fatalf("cm.yaml: %q", got)
			}
			if _, deepen := srv.counts(); (deepen > 0) != allow {
				t.Fatalf("shallow fetches: %d, want shallow only when the server allows it", deepen)
			}
		})
	}
}

// gitSpecProblems are the cases of TestGitErrors that only a change to
// the spec, or to the credentials Secret it names, fixes.
var gitSpecProblems = map[string]bool{
	"file not allowed": true, "credentials over http": true, "credentials in URL": true, "a token as the URL's user": true,
	"ssh without key": true, "key over https": true, "not a git URL": true, "scheme not supported": true,
	"credentials for a file repository": true,
}

func TestGitErrors(t *testing.T) {
	repo := newGitRepo(t)
	srv := newGitServer(t, repo.root)
	port := closedPort(t)
	f := newTestFetcher(t, Options{}, srv.Server)
	withFiles := newTestFetcher(t, Options{AllowFileGit: true}, srv.Server)
	tests := []struct {
		name  string
		spec  capstanv1.GitSource
		creds *Credentials
		want  []string
	}{
		{"unknown revision", capstanv1.GitSource{URL: srv.URL + "/repo.git", Revision: "nope"}, nil,
			[]string{`revision "nope" is neither a branch`, "branches: main, old", "tags: v1.0.0"}},
		{"unknown commit", capstanv1.GitSource{URL: srv.URL + "/repo.git", Revision: strings.Repeat("a", 40)}, nil,
			[]string{"commit aaaa", "is not in"}},
		{"unknown repository", capstanv1.GitSource{URL: srv.URL + "/nope.git"}, nil, []string{"cannot fetch", "nope.git"}},
		{"unreachable", capstanv1.GitSource{URL: "https://127.0.0.1:" + itoa(port) + "/repo.git"}, nil, []string{"connection refused"}},
		{"file not allowed", capstanv1.GitSource{URL: "file://" + repo.bare}, nil, []string{"file:// repositories are not allowed"}},
		{"credentials over http", capstanv1.GitSource{URL: "http://127.0.0.1:1/repo.git"}, &Credentials{Token: "t"}, []string{"only sent over https or ssh"}},
		{"credentials in URL", capstanv1.GitSource{URL: "https://u:hunter2@127.0.0.1/repo.git"}, nil, []string{"must not hold credentials"}},
		{"a token as the URL's user", capstanv1.GitSource{URL: "https://ghp_hunter2@127.0.0.1/repo.git"}, nil, []string{"must not hold credentials"}},
		{"ssh without key", capstanv1.GitSource{URL: "ssh://git@127.0.0.1/repo.git"}, nil, []string{"needs a Secret with an SSH key"}},
		{"key over https", capstanv1.GitSource{URL: srv.URL + "/repo.git"}, &Credentials{Identity: []byte("k"), KnownHosts: []byte("h")}, []string{"needs an ssh:// URL"}},
		{"not a git URL", capstanv1.GitSource{URL: "https://u:hunter2@[::1"}, nil, []string{"is not a git URL"}},
		{"scheme not supported", capstanv1.GitSource{URL: "ftp://127.0.0.1/repo.git"}, nil, []string{`scheme "ftp" is not supported`}},
		{"credentials for a file repository", capstanv1.GitSource{URL: "file://" + repo.bare}, &Credentials{Token: "t"}, []string{"a file:// repository takes no credentials"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := f
			if tt.name == "credentials for a file repository" {
				f = withFiles
			}
			_, err := f.Git(context.Background(), tt.spec, tt.creds)
			if err == nil {
				t.Fatal("want an error")
			}
			t.Log(err)
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\n does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatal("the error shows a password")
			}
			// A spec wrong in itself, or a credentials Secret that does
			// not fit its URL, is a SpecError, which the controller stalls
			// on; a source that fails is not.
			var se *SpecError
			if got, want := errors.As(err, &se), gitSpecProblems[tt.name]; got != want {
				t.Fatalf("a SpecError: %v, want %v", got, want)
			}
			if n, _ := f.trees.stats(); n != 0 {
				t.Fatal("something was cached")
			}
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestHoldsCredentials: a password anywhere, and a token as an http or
// https URL's user, are credentials; a user name alone (Azure DevOps',
// Bitbucket's, ssh's git@) is not.
func TestHoldsCredentials(t *testing.T) {
	for raw, want := range map[string]bool{
		"https://github.com/org/repo.git":           false,
		"https://ghp_token@github.com/org/repo.git": true,
		"https://glpat-abc@gitlab.com/org/repo.git": true,
		"https://oauth2@gitlab.com/org/repo.git":    true,
		"http://user@127.0.0.1/repo.git":            false,
		"https://org@dev.azure.com/org/p/_git/r":    false,
		"https://someone@bitbucket.org/ws/r.git":    false,
		"https://user:pass@github.com/org/repo":     true,
		"ssh://git@github.com/org/repo.git":         false,
		"ssh://git:pass@github.com/org/repo.git":    true,
		"git@github.com:org/repo.git":               false,
		"file:///srv/repo.git":                      false,
	} {
		ep, err := transport.NewEndpoint(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := HoldsCredentials(ep); got != want {
			t.Errorf("%s: %v, want %v", raw, got, want)
		}
	}
}

func TestGitGuard(t *testing.T) {
	repo := newGitRepo(t)
	srv := newGitServer(t, repo.root)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	f := newTestFetcher(t, Options{Guard: netguard.Config{Allow: []string{}}}, srv.Server)
	for _, u := range []string{srv.URL + "/repo.git", "https://localhost:" + port + "/repo.git"} {
		_, err := f.Git(context.Background(), capstanv1.GitSource{URL: u}, nil)
		if !netguard.IsRefused(err) {
			t.Fatalf("%s: want a refusal, got %v", u, err)
		}
	}
	if n, _ := srv.counts(); n != 0 {
		t.Fatalf("the git server saw %d requests", n)
	}
}

func TestGitBasicAndTokenAuth(t *testing.T) {
	repo := newGitRepo(t)
	srv := newGitServer(t, repo.root)
	srv.auth = [2]string{"x-access-token", "tok3n"}
	f := newTestFetcher(t, Options{}, srv.Server)
	spec := capstanv1.GitSource{URL: srv.URL + "/repo.git", Revision: "main"}
	_, err := f.Git(context.Background(), spec, nil)
	if err == nil || !strings.Contains(err.Error(), "secretRef") {
		t.Fatalf("want an auth error naming secretRef, got %v", err)
	}
	tr, err := f.Git(context.Background(), spec, &Credentials{Token: "tok3n"})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Commit != repo.second {
		t.Fatal("wrong commit")
	}
	if _, err := f.Git(context.Background(), spec, &Credentials{Username: "x-access-token", Password: "tok3n"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Git(context.Background(), spec, &Credentials{Username: "x-access-token", Password: "wrong"}); err == nil {
		t.Fatal("wrong credentials must fail, also when the commit is cached for others")
	}
}

// TestGitHubAppAuth runs the GitHub App path on loopback: a stand-in for the
// GitHub API's installation token endpoint, and a git server that takes the
// token. Real GitHub is not contacted.
func TestGitHubAppAuth(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	var tokenRequests int
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/app/installations/42/access_tokens" || !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
			return
		}
		tokenRequests++
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"token": "ghs_installation", "expires_at": time.Now().Add(time.Hour).Format(time.RFC3339)})
	}))
	defer api.Close()
	repo := newGitRepo(t)
	srv := newGitServer(t, repo.root)
	srv.auth = [2]string{"x-access-token", "ghs_installation"}
	f := newTestFetcher(t, Options{}, srv.Server, api)
	creds := &Credentials{GitHubAppID: 7, GitHubAppInstallationID: 42, GitHubAppPrivateKey: keyPEM, GitHubAppBaseURL: api.URL}
	for i := 0; i < 2; i++ {
		tr, err := f.Git(context.Background(), capstanv1.GitSource{URL: srv.URL + "/repo.git"}, creds)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Commit != repo.second {
			t.Fatal("wrong commit")
		}
	}
	if tokenRequests != 1 {
		t.Fatalf("the installation token was requested %d times, want once (reused until expiry)", tokenRequests)
	}

	bad := *creds
	bad.GitHubAppPrivateKey = []byte("not a key")
	if _, err := f.Git(context.Background(), capstanv1.GitSource{URL: srv.URL + "/repo.git"}, &bad); err == nil || !strings.Contains(err.Error(), "not a usable GitHub App private key") {
		t.Fatalf("want a key error, got %v", err)
	}
}

// TestGitHubAppTokenIsBounded: a token endpoint that sends its headers and
// then stalls in the body is given up after the guard's timeout, although
// ghinstallation calls the transport, not the client that carries it.
func TestGitHubAppTokenIsBounded(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	release := make(chan struct{})
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"token":`))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		case <-time.After(30 * time.Second):
		}
	}))
	defer api.Close()
	defer close(release) // before Close, which waits for the handler
	f := newTestFetcher(t, Options{Guard: netguard.Config{Allow: []string{"127.0.0.1/32"}, Timeout: time.Second}}, api)
	creds := &Credentials{GitHubAppID: 7, GitHubAppInstallationID: 42, GitHubAppPrivateKey: keyPEM, GitHubAppBaseURL: api.URL}
	done := make(chan error, 1)
	go func() {
		_, err := f.Git(context.Background(), capstanv1.GitSource{URL: api.URL + "/repo.git"}, creds)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "GitHub App installation token") {
			t.Fatalf("want a token error, got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the token request was not given up after the guard's timeout of 1s")
	}
}

func TestGitFileURL(t *testing.T) {
	repo := newGitRepo(t)
	f, err := NewFetcher(Options{AllowFileGit: true})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := f.Git(context.Background(), capstanv1.GitSource{URL: "file://" + repo.bare, Revision: "v1.0.0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Commit != repo.second || !strings.Contains(readTreeFile(t, tr, "deploy/base/cm.yaml"), "two") {
		t.Fatalf("got %s", tr.Commit)
	}
	tr, err = f.Git(context.Background(), capstanv1.GitSource{URL: "file://" + repo.bare, Revision: repo.first}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(readTreeFile(t, tr, "deploy/base/cm.yaml"), "one") {
		t.Fatal("wrong content")
	}
}

func TestGitTreeLimits(t *testing.T) {
	repo := newGitRepo(t)
	f, err := NewFetcher(Options{AllowFileGit: true, Limits: Limits{MaxFiles: 2}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Git(context.Background(), capstanv1.GitSource{URL: "file://" + repo.bare}, nil)
	if err == nil || !strings.Contains(err.Error(), "more than 2 files") || !strings.Contains(err.Error(), "raise the controller's --max-source-files") {
		t.Fatalf("want the file limit and the flag that raises it, got %v", err)
	}
	if n, _ := f.trees.stats(); n != 0 {
		t.Fatal("something was cached")
	}
}
