package source

import (
	"context"
	"fmt"
)

// shared runs fn once for all the callers that ask for key at the same
// time, and answers each of them with its result.
//
// NOTE: the callers share one fetch, so no one caller's context may end it:
// a page visitor who navigates away must not fail the reconcile that joined
// the visitor's fetch. fn runs under a context that keeps the first caller's
// values but none of its cancellation, bounded by the guard's timeout
// instead; each caller stops waiting when its own context ends, and the
// fetch goes on for the others (and fills the cache).
func (f *Fetcher) shared(ctx context.Context, key string, fn func(ctx context.Context) (any, error)) (any, error) {
	ch := f.flight.DoChan(key, func() (any, error) {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.guard.Config().Timeout)
		defer cancel()
		return fn(fctx)
	})
	select {
	case r := <-ch:
		return r.Val, r.Err
	case <-ctx.Done():
		return nil, fmt.Errorf("stopped waiting for the fetch, which goes on for the cache: %w", ctx.Err())
	}
}
