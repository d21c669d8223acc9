package source

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"
)

// flights runs one fetch per key at a time, shared by every caller that
// asks for the key while it runs.
type flights struct {
	mu sync.Mutex
	m  map[string]*flight
}

// flight is one running fetch and the callers that wait for it.
type flight struct {
	done   chan struct{}
	val    any
	err    error
	cancel context.CancelFunc
	// waiters counts the callers waiting for the fetch now.
	waiters int
	// keep is set once a caller that wants the result even after it
	// stops waiting (anyone but an Interactive one) joined the fetch.
	keep bool
}

// interactiveKey is the context key of Interactive.
type interactiveKey struct{}

// Interactive marks ctx as a caller that wants a fetch only while it
// waits, and for at most timeout: a page's form or a plan on demand. A
// fetch that only such callers asked for is stopped when the last of them
// stops waiting, and each Fetch under ctx gives up after timeout (zero or
// less: ctx's own deadline alone).
//
// NOTE: anyone who may create or change one Addon may ask for such a
// fetch, and may hang up at once. Were the fetch to go on for the cache,
// the server's bound on the fetches of its pages and plans would count
// only those still waited for, and a caller hanging up again and again
// could start downloads without end.
func Interactive(ctx context.Context, timeout time.Duration) context.Context {
	return context.WithValue(ctx, interactiveKey{}, timeout)
}

// interactive tells whether ctx is Interactive's, and its timeout.
func interactive(ctx context.Context) (time.Duration, bool) {
	d, ok := ctx.Value(interactiveKey{}).(time.Duration)
	return d, ok
}

// ErrInteractiveTimeout is the cause of an Interactive fetch that took
// longer than its timeout.
var ErrInteractiveTimeout = errors.New("the fetch took longer than a page or a plan on demand waits")

// withInteractiveTimeout bounds ctx by its Interactive timeout, if any.
func withInteractiveTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	d, ok := interactive(ctx)
	if !ok || d <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, d, fmt.Errorf("%w (%s), so it was stopped; a faster source gets past this, and so does an add-on's own reconcile, which waits longer and fills the chart cache", ErrInteractiveTimeout, d))
}

// shared runs fn once for all the callers that ask for key at the same
// time, and answers each of them with its result.
//
// NOTE: the callers share one fetch, so no one caller's context may end it:
// a page visitor who navigates away must not fail the reconcile that joined
// the visitor's fetch. fn runs under a context that keeps the first caller's
// values but none of its cancellation, bounded by the guard's timeout
// instead; each caller stops waiting when its own context ends, and the
// fetch goes on for the others (and fills the cache). A fetch that only
// Interactive callers joined is stopped, though, when the last of them
// stops waiting, and that caller returns only once it has stopped: so a
// fetch runs only while someone who asked for it waits, or for a caller
// (a reconcile) that the controller bounds itself.
func (f *Fetcher) shared(ctx context.Context, key string, fn func(ctx context.Context) (any, error)) (any, error) {
	_, wantsOnlyWhileWaiting := interactive(ctx)
	f.flights.mu.Lock()
	if f.flights.m == nil {
		f.flights.m = map[string]*flight{}
	}
	c, ok := f.flights.m[key]
	if !ok {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.guard.Config().Timeout)
		c = &flight{done: make(chan struct{}), cancel: cancel}
		f.flights.m[key] = c
		go func() {
			defer cancel()
			c.val, c.err = runShared(fctx, fn)
			f.flights.mu.Lock()
			if f.flights.m[key] == c {
				delete(f.flights.m, key)
			}
			f.flights.mu.Unlock()
			close(c.done)
		}()
	}
	c.waiters++
	c.keep = c.keep || !wantsOnlyWhileWaiting
	f.flights.mu.Unlock()

	select {
	case <-c.done:
		f.flights.mu.Lock()
		c.waiters--
		f.flights.mu.Unlock()
		return c.val, c.err
	case <-ctx.Done():
	}
	f.flights.mu.Lock()
	c.waiters--
	abandoned := c.waiters == 0 && !c.keep
	if abandoned && f.flights.m[key] == c {
		// NOTE: a caller that comes now starts a fetch of its own rather
		// than join one that is being stopped.
		delete(f.flights.m, key)
	}
	f.flights.mu.Unlock()
	if !abandoned {
		return nil, fmt.Errorf("stopped waiting for the fetch, which goes on for the cache: %w", stopped(ctx))
	}
	c.cancel()
	<-c.done
	return nil, fmt.Errorf("stopped the fetch, which no one else waits for: %w", stopped(ctx))
}

// runShared runs a shared fetch's fn, and turns a panic in it into the
// fetch's error.
//
// NOTE: fn runs in a goroutine of its own, where a panic would end the
// whole process: the controller, every add-on's reconcile and the web
// server with it. A fetch that fails this way fails alone, for every caller
// that waits for it, and says so.
func runShared(ctx context.Context, fn func(ctx context.Context) (any, error)) (val any, err error) {
	defer func() {
		if r := recover(); r != nil {
			log.FromContext(ctx).Error(fmt.Errorf("%v", r), "A fetch panicked", "stack", string(debug.Stack()))
			val, err = nil, fmt.Errorf("the fetch failed on a fault in Capstan (%v); it is tried again, and a report of it is welcome", r)
		}
	}()
	return fn(ctx)
}

// stopped is why ctx ended: its error, and its cause when it has one.
func stopped(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return fmt.Errorf("%w (%w)", cause, ctx.Err())
	}
	return ctx.Err()
}
