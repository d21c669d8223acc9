package server

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestSignOutWithoutAReview signs out once the session's token is due for
// a review that the API server cannot make: the session ends all the same,
// the cookie is cleared and the browser goes to the sign-in page, since
// signing out only forgets what the server holds, the token's cached
// review too.
func TestSignOutWithoutAReview(t *testing.T) {
	var up atomic.Bool
	up.Store(true)
	now := time.Now()
	s, h := fakeReviewServer(t, &up, &now)

	resp := postForm(h, "/signin", url.Values{"token": {"a-token"}}, nil)
	cookie := sessionCookieOf(resp)
	if resp.StatusCode != http.StatusSeeOther || cookie == nil || cookie.Value == "" {
		t.Fatalf("signing in: %d, cookie %v; want 303 and a session", resp.StatusCode, cookie)
	}
	sess, ok := s.sessions.get(cookie.Value, now)
	if !ok {
		t.Fatal("the sign-in made no session")
	}

	up.Store(false)
	now = now.Add(tokenTTL + time.Second)
	resp = postForm(h, "/signout", url.Values{"csrf": {"an-old-token"}}, cookie)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/addons" {
		t.Errorf("signing out with a wrong CSRF token: %d to %q; want 303 to /addons", resp.StatusCode, resp.Header.Get("Location"))
	}
	if _, ok := s.sessions.get(cookie.Value, now); !ok {
		t.Fatal("a sign-out with a wrong CSRF token ended the session")
	}

	resp = postForm(h, "/signout", url.Values{"csrf": {sess.csrf}}, cookie)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin" {
		t.Errorf("signing out while the API server cannot review: %d to %q; want 303 to /signin", resp.StatusCode, resp.Header.Get("Location"))
	}
	if c := sessionCookieOf(resp); c == nil || c.Value != "" || c.MaxAge >= 0 {
		t.Errorf("signing out set the cookie %v; want it cleared (Max-Age=0)", resp.Header.Values("Set-Cookie"))
	}
	if _, ok := s.sessions.get(cookie.Value, now); ok {
		t.Error("the session is still held after signing out")
	}
	s.tokens.mu.Lock()
	cached := len(s.tokens.cache)
	s.tokens.mu.Unlock()
	if cached != 0 {
		t.Errorf("the token's review is still cached after signing out (%d entries)", cached)
	}

	req := httptest.NewRequest(http.MethodGet, "/addons", nil)
	req.AddCookie(cookie)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/signin" {
		t.Errorf("the old cookie after signing out: %d to %q; want 303 to /signin", w.Code, w.Header().Get("Location"))
	}

	// A sign-out whose session is gone clears the cookie all the same.
	resp = postForm(h, "/signout", url.Values{"csrf": {sess.csrf}}, cookie)
	if c := sessionCookieOf(resp); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin" || c == nil || c.MaxAge >= 0 {
		t.Errorf("signing out of an ended session: %d to %q, cookie %v; want 303 to /signin and the cookie cleared",
			resp.StatusCode, resp.Header.Get("Location"), resp.Header.Values("Set-Cookie"))
	}
}

// TestSignOutFromAnotherSiteClearsNoCookie sends the sign-out form as
// another site's page does, without the Strict cookie: the answer goes to
// the sign-in page and clears no cookie, so the session stays in reach of
// the browser that holds it, which can still end it.
func TestSignOutFromAnotherSiteClearsNoCookie(t *testing.T) {
	var up atomic.Bool
	up.Store(true)
	now := time.Now()
	s, h := fakeReviewServer(t, &up, &now)
	cookie := sessionCookieOf(postForm(h, "/signin", url.Values{"token": {"a-token"}}, nil))
	if cookie == nil || cookie.Value == "" {
		t.Fatal("the sign-in made no session")
	}

	req := httptest.NewRequest(http.MethodPost, "/signout", strings.NewReader(url.Values{"csrf": {"guessed"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	resp := w.Result()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin" {
		t.Errorf("a sign-out without the cookie: %d to %q; want 303 to /signin", resp.StatusCode, resp.Header.Get("Location"))
	}
	if c := sessionCookieOf(resp); c != nil {
		t.Errorf("a sign-out without the cookie set %v; want no %s cookie", resp.Header.Values("Set-Cookie"), sessionCookie)
	}
	if _, ok := s.sessions.get(cookie.Value, now); !ok {
		t.Error("a sign-out without the cookie ended the session")
	}
}
