package source

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestSharedFetchOutlivesItsFirstCaller: two callers share one fetch of a
// chart; the first gives up while it runs, and the second still gets the
// chart from that same fetch.
func TestSharedFetchOutlivesItsFirstCaller(t *testing.T) {
	archive := chartArchive(t, "demo", "1.0.0")
	started, release := make(chan struct{}, 1), make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-release
		_, _ = w.Write(archive)
	}))
	t.Cleanup(srv.Close)
	f := newTestFetcher(t, Options{}, srv)
	spec := capstanv1.ChartSource{URL: srv.URL + "/demo-1.0.0.tgz"}

	first, cancel := context.WithCancel(context.Background())
	firstErr := make(chan error, 1)
	go func() {
		_, err := f.Chart(first, spec, nil)
		firstErr <- err
	}()
	<-started
	type result struct {
		ch  *Chart
		err error
	}
	second := make(chan result, 1)
	go func() {
		ch, err := f.Chart(context.Background(), spec, nil)
		second <- result{ch, err}
	}()
	// NOTE: the second caller has no signal of its own that it joined the
	// fetch; it has long done so after this wait. Had it not, it would make
	// a request of its own, which the count below catches.
	time.Sleep(200 * time.Millisecond)
	cancel()
	select {
	case err := <-firstErr:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the first caller: want context.Canceled, got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first caller still waits after its context ended")
	}
	close(release)
	r := <-second
	if r.err != nil {
		t.Fatalf("the second caller lost the fetch with the first: %v", r.err)
	}
	if r.ch.Name != "demo" {
		t.Fatalf("the second caller got chart %q", r.ch.Name)
	}
	if n := f.Stats().ArchiveFetches.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1 shared", n)
	}
}
