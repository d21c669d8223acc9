package source

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/netguard"
)

// TestGitRedirectNamesItsOriginOnly: a git repository on the allow-listed
// 127.0.0.1 redirects its ref listing to a signed address, with a token in
// the path and in the query, as a CDN hands one out: on 127.0.0.2, which
// the guard refuses before any connection; on another server of 127.0.0.1
// that answers 500; and on plain http, a downgrade. Each error names where
// the redirect led by its origin alone, never either token.
func TestGitRedirectNamesItsOriginOnly(t *testing.T) {
	refused, refusedLn := tlsServerOn(t, "127.0.0.2:0", http.NotFoundHandler())
	failing := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "storage is down", http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	plain := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(plain.Close)
	var to string
	redirector := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, to+"/t/eyJhbGciOiJIUzI1NiJ9.pathtoken"+r.URL.Path+"?"+r.URL.RawQuery+"&X-Signature=topsecret", http.StatusFound)
	}))
	t.Cleanup(redirector.Close)
	f := newTestFetcher(t, Options{}, redirector, failing, refused)

	for _, c := range []struct {
		name, to, want string
		refused        bool
	}{
		{"refused by the guard", refused.URL, "redirect to " + refused.URL + ": fetch guard refused", true},
		{"answering 500", failing.URL, "unexpected status 500 from " + failing.URL, false},
		{"to plain http", plain.URL, plain.URL, false},
	} {
		to = c.to
		_, err := f.Git(context.Background(), capstanv1.GitSource{URL: redirector.URL + "/repo.git"}, nil)
		switch {
		case err == nil:
			t.Errorf("%s: the fetch succeeded", c.name)
		case strings.Contains(err.Error(), "pathtoken") || strings.Contains(err.Error(), "topsecret"):
			t.Errorf("%s: the error names the signed address: %v", c.name, err)
		case !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: %v; want it to say %q", c.name, err, c.want)
		case c.refused && !netguard.IsRefused(err):
			t.Errorf("%s: %v; want it to answer IsRefused still", c.name, err)
		}
	}
	if n := refusedLn.accepted.Load(); n != 0 {
		t.Fatalf("127.0.0.2 accepted %d connections", n)
	}
}
