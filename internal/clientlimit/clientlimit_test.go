package clientlimit

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

// TestLimiter: each client may cost a burst of reviews, then so many
// a second; a client that is refused is told how long to wait and costs
// nothing more by asking; one client's load takes nothing from another's;
// and the clients kept stay bounded.
func TestLimiter(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := New(2, 3, 4)
	for i := range 3 {
		if ok, _ := l.Allow("a", start); !ok {
			t.Fatalf("review %d of a burst of 3 was refused", i+1)
		}
	}
	ok, wait := l.Allow("a", start)
	if ok || wait != 500*time.Millisecond {
		t.Errorf("the fourth review at once: %v, wait %v; want refused, 500ms", ok, wait)
	}
	// A refused client that asks again does not push its turn further off.
	if ok, again := l.Allow("a", start); ok || again != wait {
		t.Errorf("asking again at once: %v, wait %v; want refused, %v", ok, again, wait)
	}
	if ok, _ := l.Allow("b", start); !ok {
		t.Errorf("another client was refused while the first was throttled")
	}
	if ok, _ := l.Allow("a", start.Add(500*time.Millisecond)); !ok {
		t.Errorf("after its wait, the client was refused")
	}
	if ok, _ := l.Allow("a", start.Add(500*time.Millisecond)); ok {
		t.Errorf("one token refilled in 500ms paid for two reviews")
	}

	for i := range 10 {
		l.Allow(fmt.Sprintf("c%d", i), start.Add(time.Second))
	}
	if len(l.clients) > 4 {
		t.Errorf("%d clients are kept; want at most 4", len(l.clients))
	}
	// A bucket that has had time to fill again goes before a live one.
	l = New(2, 3, 2)
	l.Allow("idle", start)
	l.Allow("busy", start.Add(time.Second))
	l.Allow("busy", start.Add(time.Second))
	l.Allow("new", start.Add(2*time.Second))
	if _, ok := l.clients["busy"]; !ok {
		t.Errorf("a client still draining its bucket was dropped before an idle one: %v", slices.Sorted(maps.Keys(l.clients)))
	}
	if _, ok := l.clients["idle"]; ok {
		t.Errorf("a client idle long enough for its bucket to fill was kept over a live one")
	}
}

// TestOf: a client is its connection's address, never a header it
// sends, and an IPv6 client by its /64.
func TestOf(t *testing.T) {
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
		if got := Of(r); got != tc.want {
			t.Errorf("Of(%q) = %q; want %q", tc.remote, got, tc.want)
		}
	}
}
