package controller

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// tenantShare bounds how many reconciles of one namespace run at once. The
// Addon controller has one queue and a fixed pool of workers; a tenant's
// chart can make each of its reconciles slow (a render near the sandbox's
// time bound, dry runs of a large chart, a sync wave waited for up to
// spec.healthTimeout), and a tenant with many such add-ons would otherwise
// hold every worker while every other namespace's add-ons, the cluster
// admin's included, wait behind it. The controller counts only the
// restricted profile's namespaces here (enterShare); the cluster profile
// is the platform's own and is never held back.
//
// It is safe for concurrent use. A zero limit turns it off: every acquire
// succeeds and nothing is counted.
type tenantShare struct {
	limit int

	mu      sync.Mutex
	running map[string]int
}

// newTenantShare returns a share of limit reconciles per namespace; 0
// turns it off.
func newTenantShare(limit int) *tenantShare {
	return &tenantShare{limit: max(0, limit), running: map[string]int{}}
}

// acquire takes one of namespace's places and reports whether there was
// one. Each acquire that returns true is paired with one release.
func (t *tenantShare) acquire(namespace string) bool {
	if t.limit == 0 {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.running[namespace] >= t.limit {
		return false
	}
	t.running[namespace]++
	return true
}

// release gives back a place acquire took. A namespace with nothing
// running is forgotten, so the map holds only the namespaces reconciled
// now, however many tenants come and go.
func (t *tenantShare) release(namespace string) {
	if t.limit == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch n := t.running[namespace]; {
	case n > 1:
		t.running[namespace] = n - 1
	default:
		delete(t.running, namespace)
	}
}

// count is how many reconciles of namespace hold a place now.
func (t *tenantShare) count(namespace string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.running[namespace]
}

// tenantShareLimit is the share of --max-concurrent-per-tenant with
// workers reconciles at once: the flag's own number when it gives one
// (0: off), and by default (a negative number) a quarter of the workers,
// at least 1.
//
// NOTE: a quarter, so that one tenant whose every reconcile is slow holds
// at most a quarter of the workers, and it takes four such tenants at once
// to hold them all; a share of 2 with the default 8 workers still lets one
// tenant's add-ons progress two at a time when the controller is otherwise
// idle. At least 1, or a controller with fewer than four workers would
// never reconcile a tenant's add-on at all.
func tenantShareLimit(flag, workers int) int {
	if flag >= 0 {
		return flag
	}
	return max(1, workers/4)
}

// shareRetryDelay is how soon a reconcile deferred by the tenant share is
// tried again, before jitter (wait.Jitter up to twice as long).
//
// NOTE: short against the reconciles the share exists for (seconds to
// minutes), so a freed place is taken again soon, and long enough that a
// tenant with a hundred add-ons waiting costs under a hundred empty
// dequeues a second, each a map lookup. The jitter spreads a wave
// of add-ons deferred at the same moment, which would otherwise come back
// together and all but the share's number be deferred again, in step.
const shareRetryDelay = time.Second

// retryLimiter is the Addon controller's retry rate limiter: the failure
// backoff of each add-on, and one bucket for the whole queue. It also
// keeps an add-on's failure backoff through a deferral by the tenant
// share (keepBackoff).
type retryLimiter struct {
	workqueue.TypedRateLimiter[reconcile.Request]
	// kept holds the requests whose next Forget is a deferral's.
	kept sync.Map
}

// keepBackoff has the next Forget of req leave its failure count as it is.
//
// NOTE: controller-runtime forgets an item's failures after every
// reconcile that returns without an error, a RequeueAfter too; a deferral
// did nothing and learned nothing, so an add-on that was failing would
// start its backoff again from 5 ms each time the share deferred it, and a
// crowded tenant's failing add-ons would be retried far more often than a
// quiet one's. The queue never hands one request to two workers, so the
// Forget that follows the deferral is the one that finds the mark.
func (l *retryLimiter) keepBackoff(req reconcile.Request) {
	l.kept.Store(req, struct{}{})
}

// Forget forgets req's failures, unless a deferral asked to keep them.
func (l *retryLimiter) Forget(req reconcile.Request) {
	if _, kept := l.kept.LoadAndDelete(req); kept {
		return
	}
	l.TypedRateLimiter.Forget(req)
}

// enterShare takes a place in the tenant share for a reconcile of req, and
// returns what gives it back; ok is false when req's namespace has its
// share running already. A cluster-profile add-on, and any add-on while
// the share is off, enters at once and takes no place.
func (r *AddonReconciler) enterShare(req reconcile.Request) (leave func(), ok bool) {
	ns := req.Namespace
	if r.share == nil || r.share.limit == 0 || r.Config.profileOf(ns) == capstanv1.ProfileCluster {
		return func() {}, true
	}
	if !r.share.acquire(ns) {
		return nil, false
	}
	return func() { r.share.release(ns) }, true
}

// deferForShare is the result of a reconcile that found its namespace's
// share full: nothing read, nothing written, the request queued again
// after shareRetryDelay with jitter, and its failure backoff kept.
//
// NOTE: requeued, not waited for in the worker. A worker that blocked until
// its namespace had a place would be held by the very tenant the share
// is there to bound: with many of one tenant's add-ons queued, every
// worker would end up waiting on that tenant's places, and the other
// namespaces would wait behind them as before. Requeued, the worker takes
// the next request at once. The request is not lost: the queue holds it
// until its delay ends, and an event meanwhile (a spec change) only
// brings it forward, as the queue keeps one entry per add-on.
func (r *AddonReconciler) deferForShare(ctx context.Context, req reconcile.Request) reconcile.Result {
	if r.retries != nil {
		r.retries.keepBackoff(req)
	}
	reconcilesDeferred.Inc()
	logf.FromContext(ctx).V(1).Info("Deferring: this namespace has its share of the workers reconciling already", "share", r.share.limit)
	return reconcile.Result{RequeueAfter: wait.Jitter(shareRetryDelay, 1)}
}
