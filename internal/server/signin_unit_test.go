package server

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestSignInWhileTheAPIServerCannotReview signs the page in while the API
// server cannot review tokens: 503, saying the token could not be checked,
// not that it was refused, and no session is made.
func TestSignInWhileTheAPIServerCannotReview(t *testing.T) {
	var up atomic.Bool
	now := time.Now()
	_, h := fakeReviewServer(t, &up, &now)

	resp := postForm(h, "/signin", url.Values{"token": {"a-token"}}, nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a sign-in the API server could not review: %d; want 503", resp.StatusCode)
	}
	if !strings.Contains(string(body), "could not check the token") || strings.Contains(string(body), "did not accept") {
		t.Errorf("a sign-in the API server could not review says:\n%s\nwant that the token could not be checked", body)
	}
	if c := sessionCookieOf(resp); c != nil {
		t.Errorf("a sign-in the API server could not review set a session cookie: %v", c)
	}
}
