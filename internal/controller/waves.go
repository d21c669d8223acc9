package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/plan"
)

// waveLook is one look at the objects a wave waits for.
type waveLook struct {
	// left are the objects that are not Current, and notCurrent why.
	left       []*unstructured.Unstructured
	notCurrent []string
	kinds      []schema.GroupVersionKind
	// failed says why an object failed, when one did and its failure
	// counts now.
	failed string
}

// failedGrace is how long an object this sync applied may look failed
// before the wait takes it for a failure: a status that no
// observedGeneration ties to a generation may still describe the object
// as it was before the apply, which may have fixed it.
const failedGrace = 30 * time.Second

// lookAtWave reads each of objs from the API server and judges it as the
// health step does (kstatus, or spec.healthChecks), as one look with the
// checks' budget whole, and with what earlier looks found Current
// (judge): a deferred wave's next look goes on past those. A failed object counts as failed unless changed
// holds it and grace is true.
func (r *AddonReconciler) lookAtWave(ctx context.Context, s *scope, objs []*unstructured.Unstructured, changed map[*unstructured.Unstructured]bool, grace bool) (waveLook, error) {
	var look waveLook
	s.checks.NewLook()
	for _, obj := range objs {
		live, err := s.applier.Get(ctx, capstanv1.RefOf(obj))
		if err != nil {
			return look, err
		}
		current, failed, why := r.judge(ctx, s, obj, live, s.checks)
		if failed && !(grace && changed[obj]) {
			look.failed = why
			return look, nil
		}
		if !current {
			look.left = append(look.left, obj)
			look.notCurrent = append(look.notCurrent, why)
			look.kinds = append(look.kinds, obj.GroupVersionKind())
		}
	}
	return look, nil
}

// awaitWave holds a sync before it applies wave until every one of objs,
// the objects of the waves before it, is Current, as the health step
// judges them. It reads each object from the API server until it is
// Current, and shows a wait that lasts in status.wave.
//
// When the sync has applied nothing and run no hook yet (nothingApplied),
// one look is all: if the objects are not all Current, the sync ends
// waiting for them (deferWave), holding no worker, and the next one plans
// again, to the same plan. Otherwise the sync waits within itself, as for
// a running hook, since the plan was approved whole and a later sync would
// plan only what is left. Either way a wave waits up to spec.healthTimeout,
// or plan.DefaultWaveTimeout when unset. An object that failed, the
// timeout, or a change to the Addon (a new generation, a pause, its
// deletion) ends the wait with the waves from this one on not applied. The
// next sync waits again for the objects that are still not Current,
// changed or not.
func (r *AddonReconciler) awaitWave(ctx context.Context, s *scope, wave int32, objs []*unstructured.Unstructured,
	changed map[*unstructured.Unstructured]bool, nothingApplied bool) error {
	start := time.Now()
	keep := false
	defer func() {
		if !keep {
			// NOTE: cleared in the status the reconcile writes at its end,
			// or at its next checkpoint; a write of its own would cost a
			// request for a field that is gone a moment later.
			s.addon.Status.Wave = nil
		}
	}()
	failed, err := r.pollCurrent(ctx, s, start, objs, changed, func(look waveLook, list string, waited time.Duration) error {
		if nothingApplied {
			keep = true
			return r.deferWave(s, wave, look)
		}
		if s.addon.Status.Wave == nil && waited >= time.Second {
			// NOTE: only a wait that lasts is written: most waves of an
			// install are Current at once or within a second.
			r.showWave(ctx, s, &capstanv1.WaveProgress{Wave: wave, Waiting: truncate(s.mask().String(list), 1000), Since: metav1.NewTime(start)})
		}
		if waited > waveTimeout(s) {
			// NOTE: status keeps the wave, so that the next sync that finds
			// it waiting still fails at once, not after another timeout.
			if s.addon.Status.Wave == nil {
				s.addon.Status.Wave = &capstanv1.WaveProgress{Wave: wave, Waiting: truncate(s.mask().String(list), 1000), Since: metav1.NewTime(start)}
			}
			keep = true
			return waveTimedOut(wave, waited, list)
		}
		return nil
	})
	if err != nil && !keep && nothingApplied && !deletingWave(s.priorWave) {
		// NOTE: with nothing applied, the first look ends the poll, so an
		// error the step did not give is a read that failed, which says
		// nothing of the wait: the retry goes on from its start.
		s.addon.Status.Wave, keep = s.priorWave, true
	}
	if failed != "" {
		return terminal{fmt.Errorf("wave %d and the waves after it are not applied, since an object of a wave before it failed: %s", wave, failed)}
	}
	return err
}

// awaitCurrent holds a folder's Argo CD PostSync hooks until every object
// the add-on applies is Current, as the health step judges them: Argo CD
// runs them once the sync's resources are Healthy, and a smoke test or a
// notice written for that must not run against a rollout half done. It
// polls as awaitWave does, within the same bound (spec.healthTimeout, or
// plan.DefaultWaveTimeout). An object that failed, or the bound, ends it
// with a terminal error, and the post hooks stay pending
// (status.pendingHook) for the next sync; a change to the Addon ends it as
// it ends a wave's wait.
func (r *AddonReconciler) awaitCurrent(ctx context.Context, s *scope, event string) error {
	applied := make(map[*unstructured.Unstructured]bool, len(s.objects))
	for _, obj := range s.objects {
		applied[obj] = true
	}
	logged := false
	failed, err := r.pollCurrent(ctx, s, time.Now(), s.objects, applied, func(_ waveLook, list string, waited time.Duration) error {
		if waited > waveTimeout(s) {
			return terminal{fmt.Errorf("the %s hooks marked PostSync run once every object is Current, and these are not after %s (spec.healthTimeout, %s when unset): %s",
				event, waited.Round(time.Second), plan.DefaultWaveTimeout, list)}
		}
		if !logged {
			logf.FromContext(ctx).Info("PostSync hooks wait for every object to be Current", "event", event, "waiting", s.mask().String(list))
			logged = true
		}
		return nil
	})
	if failed != "" {
		return terminal{fmt.Errorf("the %s hooks marked PostSync run once every object is Current, and one failed: %s", event, failed)}
	}
	return err
}

// pollCurrent reads objs from the API server until every one is Current,
// as the health step judges them, polling from 100ms up to the controller's
// health poll (at most 2s). A status read within failedGrace of start may
// say Failed for an object changed holds, since it may describe the object
// as it was before the apply. After each look that leaves some not
// Current, step hears what is left (listed for a message) and how long the
// poll has waited, and ends it by returning an error; then a change to the
// Addon (a new generation, a pause, its deletion) ends it. It returns why
// an object failed, or "" when every one is Current or an error ended it.
func (r *AddonReconciler) pollCurrent(ctx context.Context, s *scope, start time.Time, objs []*unstructured.Unstructured,
	changed map[*unstructured.Unstructured]bool, step func(look waveLook, list string, waited time.Duration) error) (string, error) {
	grace := min(failedGrace, waveTimeout(s))
	poll, most := 100*time.Millisecond, min(r.Config.HealthPoll, 2*time.Second)
	left := objs
	for {
		look, err := r.lookAtWave(ctx, s, left, changed, time.Since(start) < grace)
		if err != nil || look.failed != "" {
			return look.failed, err
		}
		if left = look.left; len(left) == 0 {
			return "", nil
		}
		if err := step(look, notCurrentList(look.notCurrent), time.Since(start)); err != nil {
			return "", err
		}
		if err := r.addonUnchanged(ctx, s); err != nil {
			return "", err
		}
		if poll, err = nextPoll(ctx, poll, most); err != nil {
			return "", err
		}
	}
}

// nextPoll waits poll, or until ctx ends, and returns the poll after it:
// twice as long, up to most.
func nextPoll(ctx context.Context, poll, most time.Duration) (time.Duration, error) {
	select {
	case <-ctx.Done():
		return poll, ctx.Err()
	case <-time.After(poll):
	}
	return min(poll*2, most), nil
}

// waveTimeout is how long a wave may wait: spec.healthTimeout, or
// plan.DefaultWaveTimeout when unset.
func waveTimeout(s *scope) time.Duration {
	if t := s.addon.Spec.HealthTimeout; t != nil && t.Duration > 0 {
		return t.Duration
	}
	return plan.DefaultWaveTimeout
}

func waveTimedOut(wave int32, waited time.Duration, list string) error {
	return terminal{fmt.Errorf("wave %d and the waves after it are not applied: the waves before it are not Current after %s (spec.healthTimeout, %s when unset, for each wave): %s",
		wave, waited.Round(time.Second), plan.DefaultWaveTimeout, list)}
}

// waitsSince shows in status that wave waits for what list names, and
// returns since when: since the wait a reconcile before found, when it
// was the same wave's, else now. Reconciles that each look once, and
// requeue, so share one timeout, and a wave that timed out, whose status
// keeps it, fails at once until it is Current or the sync applies
// something before it. A wait a controller was killed in keeps its start
// too: the time it was down counts.
func waitsSince(s *scope, wave int32, list string) time.Time {
	since := metav1.Now()
	if p := s.priorWave; p != nil && !p.Deleting && p.Wave == wave {
		since = p.Since
	}
	s.addon.Status.Wave = &capstanv1.WaveProgress{Wave: wave, Waiting: truncate(s.mask().String(list), 1000), Since: since}
	return since.Time
}

// waveDeferred ends a sync that applied nothing, to wait for the waves
// before wave, as the health step waits: by requeueing.
type waveDeferred struct {
	what  string
	kinds []schema.GroupVersionKind
}

func (d *waveDeferred) Error() string { return d.what }

// deferWave ends a sync whose first wave to apply waits, unless the wave
// has waited past its timeout, over the reconciles that looked at it.
func (r *AddonReconciler) deferWave(s *scope, wave int32, look waveLook) error {
	list := notCurrentList(look.notCurrent)
	if waited := time.Since(waitsSince(s, wave, list)); waited > waveTimeout(s) {
		return waveTimedOut(wave, waited, list)
	}
	return &waveDeferred{kinds: look.kinds,
		what: fmt.Sprintf("wave %d waits for the waves before it, with nothing of this sync applied yet: waiting for %s", wave, list)}
}

// errAddonChanged ends a wait whose sync the Addon has outgrown: the next
// reconcile, which the change queued, plans again or removes it.
var errAddonChanged = errors.New("the Addon changed, was paused or is being deleted while the sync waited for a wave; the next look plans again")

// addonUnchanged reads the Addon from the controller's cache, at no cost
// to the API server, and fails when its spec is newer than this sync's,
// it is paused, or it is being deleted.
func (r *AddonReconciler) addonUnchanged(ctx context.Context, s *scope) error {
	now, err := r.addonNow(ctx, s)
	if err != nil || now == nil {
		return cmp.Or(err, errAddonChanged)
	}
	// NOTE: newer, not other: a cache that lags behind the read this sync
	// started from holds an older generation.
	if now.UID != s.addon.UID || now.Generation > s.addon.Generation || !now.DeletionTimestamp.IsZero() ||
		now.Annotations[capstanv1.PausedAnnotation] == "true" {
		return errAddonChanged
	}
	return nil
}

// showWave writes the wave that waits into status at once, so that a long
// wait is visible while it lasts.
func (r *AddonReconciler) showWave(ctx context.Context, s *scope, p *capstanv1.WaveProgress) {
	s.addon.Status.Wave = p
	_ = r.checkpointStatus(ctx, s)
}

// endedByWave turns the ends of a sync that waits for a wave into what the
// reconcile reports, both Progressing: a deferred wave waits as workloads
// do, woken by its objects' changes, and a sync the Addon outgrew says so
// until the reconcile the change queued. It reports false for any other
// error.
func (r *AddonReconciler) endedByWave(ctx context.Context, s *scope, err error) bool {
	var d *waveDeferred
	switch {
	case errors.As(err, &d):
		r.awaitWith(ctx, s, d.what, d.kinds)
		return true
	case errors.Is(err, errAddonChanged):
		s.found.waitingFor = errAddonChanged.Error()
		s.requeueSoon(time.Second)
		return true
	}
	return false
}

// awaitWith ends a reconcile waiting for objects of kinds, as checkHealth
// does: a status change of one of them queues the next look, and the
// health poll bounds it.
func (r *AddonReconciler) awaitWith(ctx context.Context, s *scope, what string, kinds []schema.GroupVersionKind) {
	s.found.waitingFor = what
	s.requeueSoon(r.Config.HealthPoll)
	r.watchKinds(ctx, s, kinds)
	r.awaiting.Store(client.ObjectKeyFromObject(s.addon), true)
}

// dryRunWaitsForWave reports whether a plan that failed its dry run waits
// instead for the waves before it: an operator whose validating webhook
// is registered in wave 0 and is not running yet, and whose custom
// resource in wave 1 the webhook must check (see webhookWait). It waits
// only while the plan would apply but for those refusals (wouldApply),
// the earlier waves are not all Current and none failed, and not past
// their timeout. A read that fails is returned, to be retried.
func (r *AddonReconciler) dryRunWaitsForWave(ctx context.Context, s *scope, wouldApply func(*capstanv1.Plan) bool) (bool, error) {
	wave, before, refused, ok := webhookWait(s.objects, s.previews)
	if !ok || !wouldApply(withoutErrors(s.plan, refused)) {
		return false, nil
	}
	look, err := r.lookAtWave(ctx, s, before, nil, false)
	if err != nil {
		// NOTE: retried with backoff, from the wait's start.
		if !deletingWave(s.priorWave) {
			s.addon.Status.Wave = s.priorWave
		}
		return true, err
	}
	if look.failed != "" || len(look.left) == 0 {
		return false, nil
	}
	list := notCurrentList(look.notCurrent)
	if time.Since(waitsSince(s, wave, list)) > waveTimeout(s) {
		// NOTE: status keeps the wave, as for a deferred one.
		return false, nil
	}
	r.awaitWith(ctx, s, fmt.Sprintf("the dry run of wave %d calls a webhook of a wave before it that does not answer yet, so it waits for those waves: waiting for %s", wave, list), look.kinds)
	return true, nil
}

// webhookWait decides whether a plan's refusals may wait for earlier
// waves: every refusal is the API server failing to call an admission
// webhook that a ValidatingWebhookConfiguration or
// MutatingWebhookConfiguration of an earlier wave registers, and the plan
// changes nothing of those earlier waves, which would otherwise never
// turn Current while the plan is refused. It returns the lowest refused
// wave, the objects of the waves before it, and the refused objects.
func webhookWait(objs []*unstructured.Unstructured, previews []plan.ObjectResult) (int32, []*unstructured.Unstructured, []capstanv1.ObjectRef, bool) {
	var first int32
	var refused []capstanv1.ObjectRef
	var called []string
	for i, obj := range objs {
		msg := previews[i].Error
		if msg == "" {
			continue
		}
		name := apply.WebhookCalled(msg)
		if name == "" {
			return 0, nil, nil, false
		}
		if w := apply.Wave(obj); len(refused) == 0 || w < first {
			first = w
		}
		refused = append(refused, previews[i].Ref)
		called = append(called, name)
	}
	if len(refused) == 0 {
		return 0, nil, nil, false
	}
	registered := map[string]bool{}
	var before []*unstructured.Unstructured
	for i, obj := range objs {
		if apply.Wave(obj) >= first {
			continue
		}
		if previews[i].Action != capstanv1.ActionUnchanged {
			return 0, nil, nil, false
		}
		before = append(before, obj)
		if gk := obj.GroupVersionKind().GroupKind(); gk.Group == "admissionregistration.k8s.io" &&
			(gk.Kind == "ValidatingWebhookConfiguration" || gk.Kind == "MutatingWebhookConfiguration") {
			hooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
			for _, h := range hooks {
				if m, ok := h.(map[string]any); ok {
					name, _ := m["name"].(string)
					registered[name] = true
				}
			}
		}
	}
	for _, name := range called {
		if !registered[name] {
			return 0, nil, nil, false
		}
	}
	return first, before, refused, true
}

// withoutErrors returns a copy of p whose objects in refs carry no dry-run
// error, to ask the other gates what they would decide.
func withoutErrors(p *capstanv1.Plan, refs []capstanv1.ObjectRef) *capstanv1.Plan {
	skip := map[string]bool{}
	for _, ref := range refs {
		skip[ref.Key()] = true
	}
	out := *p
	out.Objects = make([]capstanv1.PlannedObject, len(p.Objects))
	for i, o := range p.Objects {
		if skip[o.Key()] {
			o.Error = ""
		}
		out.Objects[i] = o
	}
	return &out
}

// awaitGone makes a prune or an uninstall go in reverse sync waves (see
// apply.Deleting): it holds the deletes of the wave next until every
// object the waves after it deleted is gone, read from the API server,
// polled as awaitWave polls. An object found again without a deletion
// timestamp, or with another UID, was created anew by someone else since,
// and is not waited for. A wait that lasts shows in status.wave, with
// Deleting set. A prune waits within its sync, as an apply's wave does,
// since the plan it belongs to was approved whole. An uninstall polls
// within its reconcile for uninstallWaitWithin, then ends it waiting
// (waveDeferred) and holds no worker: the awaited objects' changes, or the
// health poll, queue the next look, which deletes again from the top and
// finds them being deleted. Either is bounded as a wave of the apply is
// (waveTimeout), from the start that status.wave keeps over the retries,
// so that a finalizer that never finishes fails the retry after one look,
// until it is gone; a stalled wait is looked at again every
// stalledDeletionRetry, since nothing else wakes it. A prune ends its wait
// when the Addon changes (addonUnchanged), an uninstall when the Addon is
// paused or its deletion policy is no longer Delete (stillUninstalling).
func (r *AddonReconciler) awaitGone(s *scope, uninstalling bool) func(ctx context.Context, next int32, deleted []capstanv1.ObjectRef) error {
	return func(ctx context.Context, next int32, deleted []capstanv1.ObjectRef) (err error) {
		called := time.Now()
		start, within := called, uninstallWaitWithin
		if d := s.addon.DeletionTimestamp; uninstalling && d != nil && start.Before(d.Time) {
			// NOTE: an uninstall's wait starts after the deletion; a
			// controller whose clock is behind the API server's would
			// otherwise store a start that sameDeletion takes for a
			// prune's, and the wait would start anew at every look.
			start = d.Time
		}
		if p := s.priorWave; deletingWave(p) && p.Wave == next && sameDeletion(s, p, uninstalling) {
			// NOTE: a look that goes on from a wait looks once, then
			// waits by requeueing again.
			start, within = p.Since.Time, 0
		}
		progress := &capstanv1.WaveProgress{Wave: next, Deleting: true, Since: metav1.NewTime(start)}
		defer func() {
			switch {
			case err == nil:
				s.addon.Status.Wave = nil
			case uninstalling || s.addon.Status.Wave != nil:
				s.addon.Status.Wave = progress
			}
		}()
		poll, most := 100*time.Millisecond, min(r.Config.HealthPoll, 2*time.Second)
		left := deleted
		uids := map[string]types.UID{}
		for {
			var still []capstanv1.ObjectRef
			var why []string
			for _, ref := range left {
				m, err := s.applier.ReadMetadata(ctx, ref)
				switch {
				case err != nil:
					return err
				case m == nil || m.DeletionTimestamp.IsZero():
					continue
				}
				if uid, seen := uids[ref.Key()]; seen && uid != m.GetUID() {
					continue
				}
				uids[ref.Key()] = m.GetUID()
				still = append(still, ref)
				w := ref.Describe() + " is being deleted"
				// NOTE: foregroundDeletion is Capstan's own delete of an
				// awaited wave, not a finalizer anyone must finish: alone,
				// it says the object waits for what it owns.
				f := slices.DeleteFunc(slices.Clone(m.GetFinalizers()), func(f string) bool { return f == metav1.FinalizerDeleteDependents })
				switch {
				case len(f) > 0:
					w += " (finalizers: " + strings.Join(f, ", ") + ")"
				case slices.Contains(m.GetFinalizers(), metav1.FinalizerDeleteDependents):
					w += " (the objects it owns go first)"
				}
				why = append(why, w)
			}
			if len(still) == 0 {
				return nil
			}
			left = still
			list := notCurrentList(why)
			progress.Waiting = truncate(s.mask().String(list), 1000)
			if waited := time.Since(start); waited > waveTimeout(s) {
				// NOTE: status keeps the wave (the deferred func), so that
				// a retry that finds the objects still there fails at once.
				s.addon.Status.Wave = progress
				s.retryStalled = stalledDeletionRetry
				return terminal{fmt.Errorf("wave %d and the waves before it are not deleted and still run: what the waves after it deleted is not gone after %s (spec.healthTimeout, %s when unset, for each wave); finish or remove what holds it, and the %s goes on within %s of its end: %s",
					next, waited.Round(time.Second), plan.DefaultWaveTimeout, deletionName(uninstalling), stalledDeletionRetry, list)}
			}
			if uninstalling && time.Since(called) >= within {
				// NOTE: an uninstall plans nothing that a later look would
				// plan anew, so it waits as the health step does, by
				// requeueing: a finalizer that takes minutes holds no
				// worker. The retry deletes what is left from the wave that
				// waits, and finds these objects being deleted already.
				kinds := make([]schema.GroupVersionKind, 0, len(still))
				for _, ref := range still {
					kinds = append(kinds, schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind))
				}
				return &waveDeferred{kinds: kinds, what: fmt.Sprintf("wave %d and the waves before it wait until what the waves after it deleted is gone: %s", next, list)}
			}
			if s.addon.Status.Wave == nil && time.Since(start) >= time.Second {
				r.showWave(ctx, s, progress)
			}
			check := r.addonUnchanged
			if uninstalling {
				check = r.stillUninstalling
			}
			if err := check(ctx, s); err != nil {
				return err
			}
			var waitErr error
			if poll, waitErr = nextPoll(ctx, poll, most); waitErr != nil {
				return waitErr
			}
		}
	}
}

// deletingWave reports whether p is a prune's or an uninstall's wait.
func deletingWave(p *capstanv1.WaveProgress) bool { return p != nil && p.Deleting }

// sameDeletion reports whether a stored deleting wave p was a wait of the
// same kind as this one: an uninstall's began once the Addon was being
// deleted, a prune's before. The uninstall of an Addon whose prune stalled
// does not inherit the prune's start.
func sameDeletion(s *scope, p *capstanv1.WaveProgress, uninstalling bool) bool {
	d := s.addon.DeletionTimestamp
	return uninstalling == (d != nil && !p.Since.Before(d))
}

// uninstallWaitWithin is how long an uninstall polls, within its
// reconcile, for what a wave deleted to be gone, before it ends the
// reconcile and waits by requeueing: objects without finalizers are gone
// at once, and those whose finalizers finish within it need no second
// reconcile.
const uninstallWaitWithin = 2 * time.Second

// stalledDeletionRetry is how soon a prune or an uninstall whose wave
// timed out waiting for what the waves after it deleted looks again: the
// finalizer that held it may finish at any time, and its end queues
// nothing for a stalled or deleted Addon.
const stalledDeletionRetry = 30 * time.Second

func deletionName(uninstalling bool) string {
	if uninstalling {
		return "uninstall"
	}
	return "prune"
}

// errUninstallChanged ends an uninstall's wait for a wave when the Addon
// was paused, or its deletion policy is no longer Delete: the retry
// freezes, or leaves the rest running.
var errUninstallChanged = errors.New("the Addon was paused, or its deletion policy changed, while the uninstall waited for a wave; the next look goes on from there")

// stillUninstalling reads the Addon from the controller's cache and fails
// when it is paused, or its deletion policy is no longer Delete. A cache
// that lags behind a policy set just before the deletion ends the wait
// early: harmless, since the retry reads it again.
func (r *AddonReconciler) stillUninstalling(ctx context.Context, s *scope) error {
	now, err := r.addonNow(ctx, s)
	if err != nil || now == nil {
		return cmp.Or(err, errUninstallChanged)
	}
	if now.UID != s.addon.UID || now.Annotations[capstanv1.PausedAnnotation] == "true" || now.DeletionPolicyFor(s.profile) != capstanv1.DeletionDelete {
		return errUninstallChanged
	}
	return nil
}

// addonNow reads the Addon from the controller's cache, at no cost to the
// API server: nil when it is gone.
func (r *AddonReconciler) addonNow(ctx context.Context, s *scope) (*capstanv1.Addon, error) {
	now := &capstanv1.Addon{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(s.addon), now); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return now, nil
}
