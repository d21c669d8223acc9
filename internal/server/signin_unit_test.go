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

// TestSignInOverTheBound: a sign-in form over 64 KiB (a kubeconfig pasted
// in place of the token) is 413 and says the bound, not 401 "paste a
// token", and makes no session.
func TestSignInOverTheBound(t *testing.T) {
	var up atomic.Bool
	up.Store(true)
	now := time.Now()
	_, h := fakeReviewServer(t, &up, &now)

	resp := postForm(h, "/signin", url.Values{"token": {strings.Repeat("a", 70<<10)}}, nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a sign-in form of 70 KiB: %d; want 413", resp.StatusCode)
	}
	if !strings.Contains(string(body), "over 64 KiB") {
		t.Errorf("a sign-in form of 70 KiB says:\n%s\nwant that it is over 64 KiB", body)
	}
	if c := sessionCookieOf(resp); c != nil {
		t.Errorf("a sign-in form of 70 KiB set a session cookie: %v", c)
	}
}

// TestSignOutOverTheBound: a sign-out form over 64 KiB is answered 413,
// and the session stays, rather than read as a form with no CSRF token
// and sent back to the add-ons without a word.
func TestSignOutOverTheBound(t *testing.T) {
	var up atomic.Bool
	up.Store(true)
	now := time.Now()
	s, h := fakeReviewServer(t, &up, &now)
	cookie := sessionCookieOf(postForm(h, "/signin", url.Values{"token": {"a-token"}}, nil))
	if cookie == nil {
		t.Fatal("the sign-in made no session")
	}
	sess, _ := s.sessions.get(cookie.Value, now)
	resp := postForm(h, "/signout", url.Values{"csrf": {sess.csrf}, "pad": {strings.Repeat("a", 70<<10)}}, cookie)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "over 64 KiB") {
		t.Errorf("a sign-out form of 70 KiB: %d %q; want 413 saying it is over 64 KiB", resp.StatusCode, body)
	}
	if _, ok := s.sessions.get(cookie.Value, now); !ok {
		t.Error("a sign-out form that was not read ended the session")
	}
}
