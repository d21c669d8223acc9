package cli

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestGitopsTokenRefusedOverHTTP: with CAPSTAN_GIT_TOKEN set, a --gitops
// command to a plain http repository is refused before any request, so
// the token never crosses the network in clear text.
func TestGitopsTokenRefusedOverHTTP(t *testing.T) {
	t.Setenv(envGitToken, "s3cr3t-token")
	var mu sync.Mutex
	var requests, authorized int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		requests++
		if r.Header.Get("Authorization") != "" {
			authorized++
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()

	_, err := runAddon(t, "", "get", "web", "--gitops", srv.URL+"/ops.git")
	mu.Lock()
	got, withAuth := requests, authorized
	mu.Unlock()
	if withAuth != 0 || got != 0 {
		t.Fatalf("the http server got %d requests, %d with an Authorization header; want none", got, withAuth)
	}
	if err == nil || !strings.Contains(err.Error(), "clear text") || !strings.Contains(err.Error(), "https://") {
		t.Fatalf("get --gitops over http with a token: %v; want it refused, saying to use https", err)
	}
	if strings.Contains(err.Error(), "s3cr3t-token") {
		t.Fatalf("the error quotes the token: %v", err)
	}
}

// TestGitopsTokenOnlyOverHTTPS: CAPSTAN_GIT_TOKEN goes to an https
// repository alone; an ssh or file:// repository gets no token.
func TestGitopsTokenOnlyOverHTTPS(t *testing.T) {
	t.Setenv(envGitToken, "s3cr3t-token")

	for _, tc := range []struct {
		url  string
		auth bool
	}{
		{"https://git.example/ops.git", true},
		{"HTTPS://git.example/ops.git", true},
		{"ssh://git@git.example/ops.git", false},
		{"git@git.example:ops.git", false},
		{"file:///srv/ops.git", false},
		{"/srv/ops.git", false},
	} {
		o := gitopsOptions{url: tc.url}
		w, err := o.reader()
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if (w.Auth != nil) != tc.auth {
			t.Errorf("%s: auth %v; want a token: %v", tc.url, w.Auth, tc.auth)
		}
	}
}
