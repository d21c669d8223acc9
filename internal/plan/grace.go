package plan

import (
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
	// graceMax bounds how many objects DryRunGrace remembers.
	graceMax = 4096
)

// DryRunGrace remembers, per add-on and object, the dry runs the API
// server could not take for a moment, so that one that goes on failing
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
	mu     sync.Mutex
	failed map[graceKey]graceEntry
}

type graceKey struct {
	addon  types.NamespacedName
	object string
}

type graceEntry struct {
	uid   types.UID
	first time.Time
	tries int
}

// Lasted records that the dry run of the object with ObjectRef.Key key
// failed so at now, and reports whether it has failed on GraceTries looks
// in a row and for GraceFor since the first: then it is the object's
// refusal. An add-on created anew under the same name starts afresh. When
// the memory is full, a new failure has no grace: it is a refusal at
// once, as it was before any grace.
func (g *DryRunGrace) Lasted(addon *capstanv1.Addon, key string, now time.Time) bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	k := graceKey{addon: types.NamespacedName{Namespace: addon.Namespace, Name: addon.Name}, object: key}
	e, ok := g.failed[k]
	if !ok || e.uid != addon.UID {
		if g.failed == nil {
			g.failed = map[graceKey]graceEntry{}
		}
		if len(g.failed) >= graceMax {
			return true
		}
		e = graceEntry{uid: addon.UID, first: now}
	}
	e.tries++
	g.failed[k] = e
	return e.tries >= GraceTries && now.Sub(e.first) >= GraceFor
}

// Since returns when the dry run of the object began to fail so, and on
// how many looks; zero when it does not.
func (g *DryRunGrace) Since(addon *capstanv1.Addon, key string) (time.Time, int) {
	if g == nil {
		return time.Time{}, 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.failed[graceKey{addon: types.NamespacedName{Namespace: addon.Namespace, Name: addon.Name}, object: key}]
	return e.first, e.tries
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
