package plan

import (
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// How long a dry run the API server could not take (apply.Transient) is
// retried before it counts as the object's refusal.
const (
	// GraceTries is the least number of looks in a row whose dry run of
	// the object failed so.
	GraceTries = 3
	// GraceFor is the least time from the first of them.
	GraceFor = 2 * time.Minute
	// graceMax bounds how many failures DryRunGrace remembers.
	graceMax = 4096
	// graceStale is how long a failure not seen again is remembered, at
	// least: longer than the default resync (5 minutes) and the longest
	// backoff (1 minute) together, so a Stalled add-on looked at only at
	// its resync keeps its count, and two failures hours apart are not
	// "in a row". A longer resync lengthens it (DryRunGrace.Resync).
	graceStale = 10 * time.Minute
)

// DryRunGrace remembers, per add-on and object (or webhook, GraceKey),
// the dry runs, the preview's reads and the applies (ApplyGraceKey) the
// API server could not take for a moment, so that one that goes on failing
// is taken for the refusal it is. The API server answers some refusals of
// a server-side apply with a bare 500 (a list with two entries of one
// key, a field its schema does not declare, a conversion webhook that is
// gone), which apply.Transient cannot tell from an etcd leader change;
// retried for ever, such an add-on would never show as Stalled.
//
// NOTE: both a count and a time: the controller's backoff begins at
// milliseconds, so three looks alone pass within a second, and a time
// alone would take two failures a long pause apart (the resync's) for
// one that lasted.
// The zero value is ready to use; a nil one never lets a dry run count
// as refused.
type DryRunGrace struct {
	// Resync is the controller's resync interval: a failure is
	// remembered for twice it, when that is longer than graceStale, so
	// that a Stalled add-on looked at only at its resync keeps its count
	// rather than retrying anew at each. Set it before use.
	Resync time.Duration

	mu sync.Mutex
	// lasts is the least time from the first failure before one is a
	// refusal; zero is GraceFor (SetFor).
	lasts  time.Duration
	failed map[graceKey]graceEntry
}

// stale is how long a failure not seen again is remembered.
func (g *DryRunGrace) stale() time.Duration {
	return max(graceStale, 2*g.Resync)
}

type graceKey struct {
	addon  types.NamespacedName
	object string
}

type graceEntry struct {
	uid         types.UID
	first, last time.Time
	tries       int
}

// GraceKey is what the failed dry run of the object with ObjectRef.Key
// key is counted under: an admission webhook the API server failed to
// call (webhook, as apply.FailedWebhook names it) under its name, so that
// every object of the add-on that calls a webhook down for good shares
// one grace, rather than each having its own in turn (the preview stops
// at the first that fails); any other failure (webhook "") under the
// object's key.
func GraceKey(key, webhook string) string {
	if webhook != "" {
		// NOTE: a space never appears in an ObjectRef.Key.
		return "webhook " + webhook
	}
	return key
}

// applyPrefix begins the keys of ApplyGraceKey.
const applyPrefix = "apply "

// ApplyGraceKey is what an apply the API server could not take for a
// moment is counted under: the admission webhook it failed to call
// (webhook, as apply.FailedWebhook names it), or the add-on's apply as a
// whole (webhook ""). Apart from the dry runs' keys: a preview that
// reached every object (Keep) does not end an apply's count, since the
// preview before every apply passes; an apply that does (Applied) does.
func ApplyGraceKey(webhook string) string {
	return applyPrefix + GraceKey("", webhook)
}

// Lasted records that the dry run counted under key (GraceKey) failed so
// at now, and reports whether it has failed on GraceTries looks in a row
// and for GraceFor since the first: then it is the object's refusal, and
// first is when the failures began. A failure not seen for graceStale
// starts afresh, as does an add-on created anew under the same name. When
// the memory is full, a new failure has no grace: it is a refusal at once,
// as it was before any grace, and first is zero.
func (g *DryRunGrace) Lasted(addon *capstanv1.Addon, key string, now time.Time) (first time.Time, refused bool) {
	if g == nil {
		return time.Time{}, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	k := graceKey{addon: types.NamespacedName{Namespace: addon.Namespace, Name: addon.Name}, object: key}
	e, ok := g.failed[k]
	if !ok || e.uid != addon.UID || now.Sub(e.last) > g.stale() {
		if g.failed == nil {
			g.failed = map[graceKey]graceEntry{}
		}
		delete(g.failed, k)
		if len(g.failed) >= graceMax {
			g.sweep(now)
		}
		if len(g.failed) >= graceMax {
			return time.Time{}, true
		}
		e = graceEntry{uid: addon.UID, first: now}
	}
	e.tries++
	e.last = now
	g.failed[k] = e
	return e.first, e.tries >= GraceTries && now.Sub(e.first) >= g.graceFor()
}

// graceFor is the least time from the first failure (SetFor's, or
// GraceFor). The caller holds mu.
func (g *DryRunGrace) graceFor() time.Duration {
	if g.lasts > 0 {
		return g.lasts
	}
	return GraceFor
}

// For is the least time from the first failure before one is a refusal,
// as it is in force now; zero for a nil DryRunGrace, which never lets a
// dry run count as refused.
func (g *DryRunGrace) For() time.Duration {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.graceFor()
}

// SetFor sets the least time from the first failure before one is a
// refusal, for the integration tests that cannot wait GraceFor; zero is
// GraceFor again.
func (g *DryRunGrace) SetFor(d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lasts = d
}

// sweep drops the failures not seen for graceStale. The caller holds mu.
func (g *DryRunGrace) sweep(now time.Time) {
	for k, e := range g.failed {
		if now.Sub(e.last) > g.stale() {
			delete(g.failed, k)
		}
	}
}

// Keep forgets the add-on's failures other than those under keys: a
// preview that reached every object calls it with the ones that failed on
// it, so a failure that did not recur on a whole look is not "in a row"
// with the next, and an object gone from the render is not remembered.
// The apply's failures (ApplyGraceKey) stay: Applied forgets them.
func (g *DryRunGrace) Keep(addon *capstanv1.Addon, keys map[string]bool) {
	if g == nil {
		return
	}
	g.forget(addon, func(object string) bool { return !keys[object] && !strings.HasPrefix(object, applyPrefix) })
}

// Applied forgets the failures of the add-on's apply (ApplyGraceKey): it
// went through.
func (g *DryRunGrace) Applied(addon *capstanv1.Addon) {
	if g == nil {
		return
	}
	g.forget(addon, func(object string) bool { return strings.HasPrefix(object, applyPrefix) })
}

// forget forgets the add-on's failures whose key's object drop says to.
func (g *DryRunGrace) forget(addon *capstanv1.Addon, drop func(object string) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	name := types.NamespacedName{Namespace: addon.Namespace, Name: addon.Name}
	for k := range g.failed {
		if k.addon == name && drop(k.object) {
			delete(g.failed, k)
		}
	}
}

// Passed forgets the failures of the object's dry run: the API server
// answered it.
func (g *DryRunGrace) Passed(addon *capstanv1.Addon, key string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.failed, graceKey{addon: types.NamespacedName{Namespace: addon.Namespace, Name: addon.Name}, object: key})
}

// Forget drops what is remembered of an add-on that is gone.
func (g *DryRunGrace) Forget(addon types.NamespacedName) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for k := range g.failed {
		if k.addon == addon {
			delete(g.failed, k)
		}
	}
}
