package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/render"
)

// The pause before a render that stopped at a sandbox bound is tried again
// with the same inputs: the first, doubled after each such stop in a row,
// up to the last.
const (
	firstBoundRetry = 10 * time.Minute
	maxBoundRetry   = 4 * time.Hour
)

// boundRenders remembers, per Addon, the render that the render sandbox
// last stopped at its time or memory bound. Such a render held one of the
// few render workers for the whole bound, and the same inputs stop at the
// same bound again; without this every resync, restart of a watch or
// status-only event would spend a worker on it once more, and a tenant
// with many such add-ons would keep every worker busy and delay every
// other add-on's render. So until a pause has passed, a render of the same
// inputs fails at once with the same message, saying when it is tried
// again and what to change. A template error (required, fail) needs no
// memory: it is found again in milliseconds.
//
// It lives in memory only: a restarted controller renders each such
// add-on once more, then remembers it again. It holds at most one entry
// per Addon: the entry is replaced when the render's inputs change,
// dropped when a render of the Addon ends any other way, and dropped with
// everything else the reconciler remembers when the Addon is gone
// (AddonReconciler.forget).
type boundRenders struct {
	// First and Max bound the pause; zero means firstBoundRetry and
	// maxBoundRetry.
	First, Max time.Duration

	mu sync.Mutex
	m  map[types.NamespacedName]boundRender
}

// boundKey is what makes two renders of an Addon the same: the Addon (its
// UID, since an Addon made anew under the same name is another), its
// generation (any change of the spec, spec.syncRequest included, is a new
// try), and the render hash, which covers the chart by digest (or its
// name and version), the values, the release name and namespace, and the
// patches; and whether the chart renders for an upgrade, which the hash
// leaves out. The cluster's capabilities are left out: a render that loops
// for one Kubernetes version loops for the next, and the pause ends
// anyway.
type boundKey struct {
	uid        types.UID
	generation int64
	hash       string
	upgrade    bool
}

// boundRender is one remembered stop.
type boundRender struct {
	key boundKey
	// err is the sandbox's error, which says which bound and what to
	// check.
	err *render.LimitError
	// times counts the stops of these inputs in a row.
	times int
	// until is when these inputs are rendered again.
	until time.Time
}

func (b *boundRenders) pause(times int) time.Duration {
	first, most := b.First, b.Max
	if first <= 0 {
		first = firstBoundRetry
	}
	if most <= 0 {
		most = maxBoundRetry
	}
	return doubling(first, times-1, most)
}

// admit returns the error a render of key fails with at once, when the
// sandbox stopped the same inputs at a bound and the pause since has not
// passed; nil when the render may run. A refresh request (capstan.dev/
// refresh) always renders: a person asked.
func (b *boundRenders) admit(addon types.NamespacedName, key boundKey, refresh bool, now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	got, ok := b.m[addon]
	switch {
	case !ok:
		return nil
	case got.key != key:
		// NOTE: new inputs: what stopped the old ones says nothing of
		// these, and the entry goes, so a fix renders at once.
		delete(b.m, addon)
		return nil
	case refresh || !now.Before(got.until):
		return nil
	}
	return &boundStop{LimitError: got.err, times: got.times, until: got.until}
}

// record notes how a render of key ended: a stop at a sandbox bound is
// remembered and returned as the error to report, saying when the same
// inputs render again; any other end forgets the Addon's entry and
// returns err as it is.
func (b *boundRenders) record(addon types.NamespacedName, key boundKey, err error, now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var le *render.LimitError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// NOTE: a render cut short by the controller's stop says nothing
		// of the inputs.
		return err
	case !errors.As(err, &le):
		delete(b.m, addon)
		return err
	}
	if b.m == nil {
		b.m = map[types.NamespacedName]boundRender{}
	}
	got, ok := b.m[addon]
	if !ok || got.key != key {
		got = boundRender{key: key}
	}
	got.err = le
	got.times++
	got.until = now.Add(b.pause(got.times))
	b.m[addon] = got
	return &boundStop{LimitError: le, times: got.times, until: got.until}
}

// forget drops what is remembered of an Addon that is gone.
func (b *boundRenders) forget(addon types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.m, addon)
}

// boundStop is a render that the sandbox stopped at a bound, or one
// refused since it did: the sandbox's message, then when the same inputs
// render again and how to have them sooner. It unwraps to the
// *render.LimitError, so callers tell it as they tell the sandbox's own.
type boundStop struct {
	*render.LimitError
	times int
	until time.Time
}

// Error says when the render is tried again in absolute time: the message
// of every repeat within the pause is the same, so the Addon's condition
// does not change, and no event is sent, at each of them.
func (e *boundStop) Error() string {
	stopped := "a render of these inputs stopped there"
	if e.times > 1 {
		stopped = fmt.Sprintf("renders of these inputs stopped there %d times in a row", e.times)
	}
	return fmt.Sprintf("%s. Since %s, Capstan renders them again no sooner than %s, and spends no render worker on them until then; "+
		"any change of the spec or the values renders at once, and so does a new value of the %s annotation (capstan addon refresh)",
		e.LimitError.Error(), stopped, e.until.UTC().Format(time.RFC3339), capstanv1.RefreshAnnotation)
}

func (e *boundStop) Unwrap() error { return e.LimitError }

// boundKeyOf is the key of a render of the scope's Addon with the given
// render hash.
func boundKeyOf(addon *capstanv1.Addon, hash string, upgrade bool) boundKey {
	return boundKey{uid: addon.UID, generation: addon.Generation, hash: hash, upgrade: upgrade}
}
