package server

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

func TestMakeRoom(t *testing.T) {
	m := map[int]bool{1: true, 2: false, 3: true, 4: false}
	makeRoom(m, 5, func(expired bool) bool { return expired })
	if len(m) != 4 {
		t.Fatalf("a map under its bound lost entries: %v", m)
	}
	makeRoom(m, 4, func(expired bool) bool { return expired })
	if len(m) != 2 || m[1] || m[3] {
		t.Fatalf("the expired entries should go first: %v", m)
	}
	live := map[int]bool{1: false, 2: false, 3: false}
	makeRoom(live, 3, func(expired bool) bool { return expired })
	if len(live) != 2 {
		t.Fatalf("a full map of live entries must still make room: %v", live)
	}
}

// TestClientLimiter: each client may cost a burst of reviews, then so many
// a second; a client that is refused is told how long to wait and costs
// nothing more by asking; one client's load takes nothing from another's;
// and the clients kept stay bounded.
func TestClientLimiter(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newClientLimiter(2, 3, 4)
	for i := range 3 {
		if ok, _ := l.allow("a", start); !ok {
			t.Fatalf("review %d of a burst of 3 was refused", i+1)
		}
	}
	ok, wait := l.allow("a", start)
	if ok || wait != 500*time.Millisecond {
		t.Errorf("the fourth review at once: %v, wait %v; want refused, 500ms", ok, wait)
	}
	// A refused client that asks again does not push its turn further off.
	if ok, again := l.allow("a", start); ok || again != wait {
		t.Errorf("asking again at once: %v, wait %v; want refused, %v", ok, again, wait)
	}
	if ok, _ := l.allow("b", start); !ok {
		t.Errorf("another client was refused while the first was throttled")
	}
	if ok, _ := l.allow("a", start.Add(500*time.Millisecond)); !ok {
		t.Errorf("after its wait, the client was refused")
	}
	if ok, _ := l.allow("a", start.Add(500*time.Millisecond)); ok {
		t.Errorf("one token refilled in 500ms paid for two reviews")
	}

	for i := range 10 {
		l.allow(fmt.Sprintf("c%d", i), start.Add(time.Second))
	}
	if len(l.clients) > 4 {
		t.Errorf("%d clients are kept; want at most 4", len(l.clients))
	}
	// A bucket that has had time to fill again goes before a live one.
	l = newClientLimiter(2, 3, 2)
	l.allow("idle", start)
	l.allow("busy", start.Add(time.Second))
	l.allow("busy", start.Add(time.Second))
	l.allow("new", start.Add(2*time.Second))
	if _, ok := l.clients["busy"]; !ok {
		t.Errorf("a client still draining its bucket was dropped before an idle one: %v", slices.Sorted(maps.Keys(l.clients)))
	}
	if _, ok := l.clients["idle"]; ok {
		t.Errorf("a client idle long enough for its bucket to fill was kept over a live one")
	}
}

// TestClientOf: a client is its connection's address, never a header it
// sends, and an IPv6 client by its /64.
func TestClientOf(t *testing.T) {
	for _, tc := range []struct{ remote, want string }{
		{"192.0.2.7:51234", "192.0.2.7"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::"},
		{"[2001:db8:1:2:ffff::1]:443", "2001:db8:1:2::"},
		{"[::ffff:192.0.2.7]:80", "192.0.2.7"},
		{"@", "@"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/addons", nil)
		r.RemoteAddr = tc.remote
		r.Header.Set("X-Forwarded-For", "198.51.100.1")
		r.Header.Set("X-Real-IP", "198.51.100.1")
		if got := clientOf(r); got != tc.want {
			t.Errorf("clientOf(%q) = %q; want %q", tc.remote, got, tc.want)
		}
	}
}

// TestReviewRefusal: a throttled review is 429 with a Retry-After in
// whole seconds, at least one; a refused token 401; any other error 503.
func TestReviewRefusal(t *testing.T) {
	for _, tc := range []struct {
		err        error
		code, wait int
	}{
		{&throttledError{retryAfter: 200 * time.Millisecond, why: "busy"}, http.StatusTooManyRequests, 1},
		{fmt.Errorf("reviewing: %w", &throttledError{retryAfter: 2500 * time.Millisecond, why: "busy"}), http.StatusTooManyRequests, 3},
		{errUnauthenticated, http.StatusUnauthorized, 0},
		{errors.New("connection refused"), http.StatusServiceUnavailable, 0},
	} {
		got := reviewRefusal(tc.err)
		if got.Code != tc.code || got.retryAfter != tc.wait {
			t.Errorf("reviewRefusal(%v) = %d, Retry-After %d; want %d, %d", tc.err, got.Code, got.retryAfter, tc.code, tc.wait)
		}
		w := httptest.NewRecorder()
		writeError(w, got)
		if h := w.Header().Get("Retry-After"); (tc.wait > 0) != (h != "") {
			t.Errorf("the answer to %v has Retry-After %q", tc.err, h)
		}
	}
}

// TestReviewerConfig: the Reviewer has a finite rate limit of its own,
// whatever the controller's own config says, and leaves that config as it
// was.
func TestReviewerConfig(t *testing.T) {
	base := &rest.Config{Host: "https://127.0.0.1:6443", QPS: -1}
	got := ReviewerConfig(base)
	if got.QPS <= 0 || got.Burst <= 0 || got.RateLimiter != nil {
		t.Errorf("the Reviewer's config: QPS %v, burst %d, limiter %v; want finite and its own", got.QPS, got.Burst, got.RateLimiter)
	}
	if base.QPS != -1 {
		t.Errorf("the controller's config was changed: QPS %v", base.QPS)
	}
}
