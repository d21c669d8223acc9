package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
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
