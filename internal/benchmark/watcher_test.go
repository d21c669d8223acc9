package benchmark_test

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// lookEvery is how often the benchmark looks at what it waits for. It looks
// in a watch cache of its own, so a look costs the control plane nothing.
const lookEvery = 100 * time.Millisecond

// watchFor is the benchmark's eye on the objects it waits for: an
// informer's cache of obj's kind, only those with the labels, in namespace
// ns (every namespace if empty), filled before it returns. Every tool's
// turn is watched alike, so that waiting costs the API server one watch
// event per change of what is waited for, not a List of every object each
// time: a List of 200 Addons once a second cost the API server 1.7% of its
// CPU in Capstan's window, and read Ready to the second only. stop ends
// the watch.
func watchFor(ctx context.Context, cfg *rest.Config, obj client.Object, ns string, match map[string]string) (reader client.Reader, stop func(), err error) {
	by := cache.ByObject{Label: labels.SelectorFromSet(match)}
	if ns != "" {
		by.Namespaces = map[string]cache.Config{ns: {}}
	}
	c, err := cache.New(cfg, cache.Options{Scheme: scheme(), ByObject: map[client.Object]cache.ByObject{obj: by}})
	if err != nil {
		return nil, nil, fmt.Errorf("watching %T: %w", obj, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() { _ = c.Start(ctx) }()
	syncCtx, done := context.WithTimeout(ctx, 2*time.Minute)
	defer done()
	if _, err := c.GetInformer(syncCtx, obj); err != nil {
		cancel()
		return nil, nil, fmt.Errorf("watching %T: %w", obj, err)
	}
	// NOTE: GetInformer waits for the sync only once the cache has
	// started, which the goroutine above may not have done yet.
	if !c.WaitForCacheSync(syncCtx) {
		cancel()
		return nil, nil, fmt.Errorf("watching %T: the cache did not fill within 2 minutes", obj)
	}
	return noCopy{c}, cancel, nil
}

// noCopy lists from a cache without copying what it holds: the benchmark
// only counts, and a copy of every object ten times a second cost its
// process more CPU than the Lists it replaced cost the API server.
type noCopy struct{ client.Reader }

func (r noCopy) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.Reader.List(ctx, list, append(opts, client.UnsafeDisableDeepCopy)...)
}
