package source

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
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

// slowChartServer serves archive only once release is closed, and counts
// the requests it is answering now; a request whose client hangs up ends
// at once.
func slowChartServer(t *testing.T, archive []byte) (srv *httptest.Server, started <-chan struct{}, inFlight *atomic.Int64, release func()) {
	t.Helper()
	asked := make(chan struct{}, 16)
	released := make(chan struct{})
	release = sync.OnceFunc(func() { close(released) })
	inFlight = &atomic.Int64{}
	srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.Add(1)
		defer inFlight.Add(-1)
		select {
		case asked <- struct{}{}:
		default:
		}
		select {
		case <-released:
			_, _ = w.Write(archive)
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(release)
	return srv, asked, inFlight, release
}

// eventually waits up to 10 s for cond.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// TestInteractiveFetchStopsWithItsLastWaiter: a fetch that only an
// Interactive caller asked for stops when that caller stops waiting, and
// the caller returns only once it has; one a reconcile joined goes on.
func TestInteractiveFetchStopsWithItsLastWaiter(t *testing.T) {
	srv, started, inFlight, release := slowChartServer(t, chartArchive(t, "demo", "1.0.0"))
	f := newTestFetcher(t, Options{}, srv)

	ctx, cancel := context.WithCancel(Interactive(context.Background(), 0))
	errc := make(chan error, 1)
	go func() {
		_, err := f.Chart(ctx, capstanv1.ChartSource{URL: srv.URL + "/demo-1.0.0.tgz?alone"}, nil)
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("the page's fetch: want context.Canceled, got %v", err)
	}
	if !eventually(func() bool { return inFlight.Load() == 0 }) {
		t.Fatal("the download goes on after the only caller that wanted it left")
	}

	// A reconcile joins the page's fetch: it goes on when the page leaves.
	spec := capstanv1.ChartSource{URL: srv.URL + "/demo-1.0.0.tgz?joined"}
	ctx, cancel = context.WithCancel(Interactive(context.Background(), 0))
	go func() {
		_, err := f.Chart(ctx, spec, nil)
		errc <- err
	}()
	<-started
	type result struct {
		ch  *Chart
		err error
	}
	reconcile := make(chan result, 1)
	go func() {
		ch, err := f.Chart(context.Background(), spec, nil)
		reconcile <- result{ch, err}
	}()
	// NOTE: as in TestSharedFetchOutlivesItsFirstCaller, the reconcile
	// has long joined after this wait; had it not, the count below
	// catches its own request.
	time.Sleep(200 * time.Millisecond)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("the page's fetch: want context.Canceled, got %v", err)
	}
	release()
	r := <-reconcile
	if r.err != nil || r.ch.Name != "demo" {
		t.Fatalf("the reconcile lost the fetch with the page: %v", r.err)
	}
	// One for each link: the first, stopped, and the one both shared.
	if n := f.Stats().ArchiveFetches.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2", n)
	}
}

// TestInteractiveFetchHasItsOwnTimeout: an Interactive fetch gives up
// after its own timeout, says so, and stops the download.
func TestInteractiveFetchHasItsOwnTimeout(t *testing.T) {
	srv, _, inFlight, _ := slowChartServer(t, chartArchive(t, "demo", "1.0.0"))
	f := newTestFetcher(t, Options{}, srv)
	start := time.Now()
	_, err := f.Fetch(Interactive(context.Background(), 300*time.Millisecond),
		capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: srv.URL + "/demo-1.0.0.tgz"}}, nil)
	if !errors.Is(err, ErrInteractiveTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want the interactive timeout, got %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the fetch took %s, past its 300ms", took)
	}
	if !eventually(func() bool { return inFlight.Load() == 0 }) {
		t.Fatal("the download goes on after the fetch gave up")
	}
}

// TestSharedFetchThatPanicsFailsAlone: a fault in a shared fetch is that
// fetch's error, for every caller waiting for it, and the process goes on.
func TestSharedFetchThatPanicsFailsAlone(t *testing.T) {
	f := newTestFetcher(t, Options{})
	_, err := f.shared(context.Background(), "k", func(context.Context) (any, error) {
		var idx *cachedIndex
		return idx.size, nil
	})
	if err == nil || !strings.Contains(err.Error(), "a fault in Capstan") {
		t.Fatalf("got %v, want the fault as the fetch's error", err)
	}
	v, err := f.shared(context.Background(), "k", func(context.Context) (any, error) { return 1, nil })
	if err != nil || v != 1 {
		t.Fatalf("a fetch of the same key after the fault: %v %v", v, err)
	}
}
