package gitserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Hold serves a Server's repositories at a URL of its own, where it holds
// one request, as a slow or stalled remote would.
type Hold struct {
	// URL is where the Server's repositories are served; a repository's
	// URL is this one with "/name.git" appended.
	URL string
	// Reached is closed when the held request arrives.
	Reached <-chan struct{}

	answer chan bool
	once   sync.Once
}

// Pass lets the held request through: the Server answers it. With
// sendFirst, the Server has already been sent it, and its answer is given.
func (h *Hold) Pass() { h.once.Do(func() { h.answer <- true }) }

// Fail answers the held request with 500 Internal Server Error. With
// sendFirst, the Server has already been sent it: only its answer is lost.
func (h *Hold) Fail() { h.once.Do(func() { h.answer <- false }) }

// HoldAt serves s at another loopback URL, where the nth request (from 1)
// whose path ends with suffix (such as "/git-upload-pack" for a clone's
// fetch, or "/git-receive-pack" for a push) is held until Pass or Fail, or
// until its client goes away. With sendFirst, it is sent to s before it is
// held, so that a push is made and only its answer waits. Every other
// request goes to s at once.
func (s *Server) HoldAt(t testing.TB, suffix string, nth int, sendFirst bool) *Hold {
	t.Helper()
	target, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	reached := make(chan struct{})
	h := &Hold{Reached: reached, answer: make(chan bool, 1)}
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, suffix) || seen.Add(1) != int64(nth) {
			proxy.ServeHTTP(w, r)
			return
		}
		var sent *httptest.ResponseRecorder
		if sendFirst {
			sent = httptest.NewRecorder()
			proxy.ServeHTTP(sent, r.WithContext(context.WithoutCancel(r.Context())))
		}
		close(reached)
		select {
		case pass := <-h.answer:
			switch {
			case !pass:
				http.Error(w, "held and failed by the test", http.StatusInternalServerError)
			case sent != nil:
				for k, v := range sent.Header() {
					w.Header()[k] = v
				}
				w.WriteHeader(sent.Code)
				_, _ = w.Write(sent.Body.Bytes())
			default:
				proxy.ServeHTTP(w, r)
			}
		case <-r.Context().Done():
		}
	})) // httptest listens on 127.0.0.1 only.
	t.Cleanup(srv.Close)
	t.Cleanup(h.Fail)
	h.URL = srv.URL
	return h
}
