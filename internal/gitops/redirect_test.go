package gitops

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHeadNamesARedirectByItsOriginOnly: a gitops repository on loopback
// redirects its ref listing to a signed address on another loopback
// server, with a token in the path and in the query, which answers 500.
// The syncer's error, which goes to the AddonRepository's status, names
// that server by its origin alone, neither token.
func TestHeadNamesARedirectByItsOriginOnly(t *testing.T) {
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "storage is down", http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, failing.URL+"/t/eyJhbGciOiJIUzI1NiJ9.pathtoken"+r.URL.Path+"?"+r.URL.RawQuery+"&X-Signature=topsecret", http.StatusFound)
	}))
	t.Cleanup(redirector.Close)

	_, _, err := Repo{URL: redirector.URL + "/fleet.git"}.Head(context.Background(), "main")
	if err == nil || strings.Contains(err.Error(), "pathtoken") || strings.Contains(err.Error(), "topsecret") ||
		!strings.Contains(err.Error(), "unexpected status 500 from "+failing.URL) {
		t.Fatalf("a redirect to a signed address that answers 500: %v; want it named by its origin %s alone", err, failing.URL)
	}
}
