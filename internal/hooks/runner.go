// Package hooks runs a chart's Helm hooks with Helm's own semantics: the
// hooks of one event in order (weight, then kind, then name), each
// created after its delete policy allows, Jobs and Pods waited for until
// they finish within the hook timeout, and delete policies honoured.
package hooks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/render"
)

// DefaultTimeout bounds one hook when the request names no timeout.
const DefaultTimeout = 10 * time.Minute

// MinJobTTLSeconds is the least ttlSecondsAfterFinished a Job hook keeps;
// internal/prepare raises a lower one to it. The runner reads how a Job
// hook ended about once a second, or at a later look once it has left the
// hook running (Request.Yield): a Job the TTL controller deletes as it
// finishes (a chart's ttlSecondsAfterFinished: 0) would be gone before
// that, and its result with it. Five minutes is far longer than a look
// takes, and still cleans up.
const MinJobTTLSeconds int64 = 300

// Runner runs the hooks of one event the way Helm v4 does. It implements
// the controller's HookRunner seam. The zero value is ready to use.
type Runner struct {
	// Poll is how often a running hook, or a hook being deleted, is read.
	// Default one second.
	Poll time.Duration
	// DeleteWait bounds the wait for a hook's deleted object to be gone,
	// within the hook timeout. Default DefaultDeleteWait.
	DeleteWait time.Duration
}

// DefaultDeleteWait bounds the wait for a hook's deleted object to be
// gone. A Job goes at once (its pods in the background), and most objects
// in a moment; one that is still there after that long is held by a
// finalizer no controller removes soon, and waiting for it would hold the
// controller's worker for the whole hook timeout.
const DefaultDeleteWait = 30 * time.Second

// Run runs the runnable hooks of req.Event in Helm's order, one at a time:
//
//  1. it reports the hook through req.Progress, and stops with a
//     *ProgressError, having made and deleted nothing of it, when that
//     fails;
//  2. it makes sure the hook's namespace exists, creating the target
//     namespace when the Addon asks for it (the controller applies it
//     before pre-install hooks, but not before pre-upgrade ones, and
//     someone may have deleted it since), but never for a delete hook,
//     whose namespace missing or being deleted is a ReasonNamespaceGone;
//  3. with before-hook-creation (the default), it deletes the hook's object
//     from an earlier run and waits until it is gone;
//  4. it applies the hook by server-side apply, and waits until a Job is
//     Complete or Failed and a Pod Succeeded or Failed, within req.Timeout;
//     other kinds only need to exist.
//
// Hooks that wait for the applied objects (a folder's Argo CD PostSync
// hooks) run once req.AwaitHealthy returns, when it is set.
//
// When a hook fails or times out, Run deletes it if it has hook-failed,
// deletes the hooks that succeeded before it if they have hook-succeeded
// (with req.KeepForRetry it leaves them for the retry, and names them in
// Error.Left), and returns an *Error that names it. A hook the API server
// could not take for a moment (Transient) failed nothing: the hooks before
// it are left for the run that goes on from this one. When a hook could not
// be read while Run waited for it, Run returns a *ReadError and leaves the
// hook as it is, whatever its policies, since it did not fail; the hooks
// before it are deleted, or left and named in ReadError.Left, as for a
// failure, but for the one status.hook names, which the look that goes on
// from the run reads. When every hook succeeds, Run calls req.Done, then deletes
// those with hook-succeeded, in reverse order.
// Hooks of unknown events are never run.
//
// Every hook object carries req.Run. With req.Resume, a hook whose object
// carries it and succeeded is not run again, and the hook the stopped run
// was waiting for, req.Waiting, is waited for again while it still runs,
// or read for how it ended, within the timeout from its start.
//
// With req.Yield, a Job or Pod hook that still runs after that long is
// left running, and Run returns a *Running error: the caller looks again
// later with req.Resume, and the hooks after it run then.
func (r *Runner) Run(ctx context.Context, req Request) error {
	if req.Applier == nil || req.Addon == nil {
		return errors.New("hooks: a hook request needs an Applier and an Addon")
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	selected := Select(req.Hooks, req.Event)
	checked := map[string]bool{}
	// shown is the hook status.hook names: the one the stopped run waited
	// for, then each this run shows. A look that goes on from this run
	// goes on from it.
	shown := req.Waiting
	if report := req.Progress; report != nil {
		req.Progress = func(p capstanv1.HookProgress) error {
			err := report(p)
			if err == nil {
				shown = &p.ObjectRef
			}
			return err
		}
	}
	awaited := req.AwaitHealthy == nil
	done, ours, err := r.doneBefore(ctx, req, selected, timeout)
	if err != nil {
		// NOTE: nothing was run or deleted yet, and status.hook still
		// names the hook the stopped run waited for: a look that reads it
		// again goes on from there.
		return err
	}
	if f := failedAt(req, selected); f > done {
		// NOTE: the wait for the applied objects is not taken for passed:
		// the hook that failed may be the one after it, and a retry
		// waits again, as a new sync would.
		done, ours = f, false
	}
	if ours {
		for _, h := range selected[:done+1] {
			// NOTE: the wait for the applied objects came before the hook
			// the stopped run waited for, whose object exists.
			awaited = awaited || h.AwaitsHealthy(req.Event)
		}
	}
	for i, h := range selected {
		if i < done {
			logf.FromContext(ctx).Info("Hook succeeded earlier in this run; not run again", "event", req.Event, "kind", h.Object.GetKind(), "name", h.Object.GetName())
			continue
		}
		if h.AwaitsHealthy(req.Event) && !awaited {
			// NOTE: status shows the hook that waits from the start of
			// the wait. The hooks before it stay as they are: each
			// succeeded, and the next sync runs the event again.
			if err := req.progress(capstanv1.HookProgress{ObjectRef: capstanv1.RefOf(h.Object), Event: req.Event, Since: metav1.Now(), Run: req.Run}); err != nil {
				return err
			}
			if err := req.AwaitHealthy(ctx); err != nil {
				return err
			}
			awaited = true
		}
		if err := r.runOne(ctx, req, h, timeout, checked); err != nil {
			if ctx.Err() == nil && !IsRunning(err) && !IsProgressError(err) {
				// A cancelled context is a controller that stops: it
				// must not wait for deletions. A hook that was not
				// started failed nothing, and the objects of the hooks
				// before it show a later look that they succeeded.
				var he *Error
				var re *ReadError
				hookErr := errors.As(err, &he)
				if hookErr && he.ended() && hasPolicy(h, HookFailed) && r.forget(req, capstanv1.RefOf(h.Object)) == nil {
					// NOTE: only a hook that ended badly. One that could
					// not be made or read did not fail: a migration Job
					// whose read the API server refused may still run.
					r.cleanUp(ctx, req, []render.Hook{h}, HookFailed, timeout)
				}
				keep := req.KeepForRetry && req.Run != ""
				switch {
				case keep && hookErr:
					// NOTE: the retry goes on from this run, and a hook
					// whose object carries it and succeeded is not run
					// again; one deleted here would be, and a seed or
					// "create admin user" Job would run once per retry
					// while a later hook keeps failing. They are deleted
					// once the event has succeeded (Done).
					he.Left = succeededRefs(selected[:i])
				case keep && errors.As(err, &re):
					// NOTE: a read the API server refused ends the run as
					// well, and the retry goes on from it just the same;
					// the error names them, so that the caller records
					// them for it, as for a hook's failure.
					re.Left = succeededRefs(selected[:i])
				case hookErr && he.transient() && req.Event != render.SyncFailEvent:
					// NOTE: the API server could not take this hook for a
					// moment: no hook failed, and the caller retries with
					// backoff, going on from this run (status.hook names
					// this hook, which it did not make). The objects of the
					// hooks before it show that run that they succeeded;
					// deleted, a migration or "create admin user" Job would
					// run again at each retry, within seconds. The error
					// names them, so that the caller records them: a
					// retry may never come (a new render is another run,
					// which does not name them), and they are deleted then.
					he.Left = succeededRefs(selected[:i])
				case errors.As(err, &re) && req.Event != render.SyncFailEvent && shown != nil:
					// NOTE: the next look goes on from the hook status.hook
					// names, which may be one before the hook whose read
					// failed (a read before the run showed it): deleted
					// now, that look would take it for deleted while left
					// running, and fail the event for good. That one
					// stays; the others go by their policy, as for a
					// failure, since nothing records them. SyncFail hooks
					// run once, and no look goes on from them.
					r.cleanUp(ctx, req, slices.DeleteFunc(slices.Clone(selected[:i]), func(h render.Hook) bool {
						return capstanv1.RefOf(h.Object) == *shown
					}), HookSucceeded, timeout)
				default:
					r.cleanUp(ctx, req, selected[:i], HookSucceeded, timeout)
				}
			}
			return err
		}
	}
	if req.Done == nil {
		return r.deleteSucceeded(ctx, req, selected, timeout)
	}
	refs := succeededRefs(selected)
	slices.Reverse(refs)
	if err := req.Done(ctx, refs); err != nil {
		// NOTE: the hook-succeeded objects stay: they are what shows a
		// run that goes on from this one that its hooks succeeded.
		return err
	}
	objs := make([]capstanv1.HookObject, len(refs))
	for i, ref := range refs {
		objs[i] = capstanv1.HookObject{ObjectRef: ref, Run: req.Run}
	}
	_, err = r.CleanUp(ctx, req, objs)
	return err
}

// failedAt is the index in selected of the hook at which the run a resumed
// one goes on from ended (req.Failed), or 0: every hook before it
// succeeded in that run.
func failedAt(req Request, selected []render.Hook) int {
	if !req.Resume || req.Failed == nil || req.Run == "" {
		return 0
	}
	return max(0, slices.IndexFunc(selected, func(h render.Hook) bool { return capstanv1.RefOf(h.Object) == *req.Failed }))
}

// SucceededRefs lists the objects of the hooks of event in hs, up to and
// including the hook ref, that their hook-succeeded policy deletes, in the
// order they run: what a run of the event has made by the time ref starts
// that its end would delete. A ref that is not a hook of the event lists
// nothing.
func SucceededRefs(hs []render.Hook, event string, ref capstanv1.ObjectRef) []capstanv1.ObjectRef {
	selected := Select(hs, event)
	i := slices.IndexFunc(selected, func(h render.Hook) bool { return capstanv1.RefOf(h.Object) == ref })
	if i < 0 {
		return nil
	}
	return succeededRefs(selected[:i+1])
}

// succeededRefs lists the objects of the hooks of hs that their
// hook-succeeded policy deletes, in order.
func succeededRefs(hs []render.Hook) []capstanv1.ObjectRef {
	var refs []capstanv1.ObjectRef
	for _, h := range hs {
		if hasPolicy(h, HookSucceeded) && !neverDeleted(h) {
			refs = append(refs, capstanv1.RefOf(h.Object))
		}
	}
	return refs
}

// CleanUp deletes objs, in order, each only while it carries its run: the
// hook-succeeded objects of runs whose hooks all succeeded and whose end
// req.Done recorded. It reads no render, so a hook the render no longer
// holds, or holds under another name, is deleted all the same. An object
// that is gone, carries another run or is kept is left as it is, so
// CleanUp may be called again. It returns the objects whose delete
// failed, and a *CleanUpError that names the first of them.
func (r *Runner) CleanUp(ctx context.Context, req Request, objs []capstanv1.HookObject) ([]capstanv1.HookObject, error) {
	if req.Applier == nil || req.Addon == nil {
		return objs, errors.New("hooks: a clean-up request needs an Applier and an Addon")
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	var left []capstanv1.HookObject
	var first error
	for _, o := range objs {
		if o.Run == "" {
			continue // no run to tell its object from another's
		}
		kept, err := r.deleteAndWait(ctx, req, o.ObjectRef, timeout, o.Run)
		if kept != "" {
			logf.FromContext(ctx).Info("Hook's object kept: not deleted by its policy", "policy", HookSucceeded, "kind", o.Kind, "name", o.Name, "keptBy", kept)
		}
		if err != nil {
			left = append(left, o)
			if first == nil {
				first = &CleanUpError{Event: req.Event, Object: o.ObjectRef, Err: err}
			}
		}
	}
	return left, first
}

// deleteSucceeded deletes the hooks of selected that have hook-succeeded,
// in reverse order.
func (r *Runner) deleteSucceeded(ctx context.Context, req Request, selected []render.Hook, timeout time.Duration) error {
	succeeded := slices.Clone(selected)
	slices.Reverse(succeeded)
	for _, h := range succeeded {
		if !hasPolicy(h, HookSucceeded) {
			continue
		}
		if err := r.forget(req, capstanv1.RefOf(h.Object)); err != nil {
			return err
		}
		kept, err := r.deleteAndWait(ctx, req, capstanv1.RefOf(h.Object), timeout, "")
		if kept != "" {
			logf.FromContext(ctx).Info("Hook's object kept: not deleted by its policy", "policy", HookSucceeded, "kind", h.Object.GetKind(), "name", h.Object.GetName(), "keptBy", kept)
		}
		if err != nil {
			// NOTE: a *Error, so the controller stalls on it: a plain
			// error is retried with backoff, and each retry would run
			// every hook of the event again (no Done recorded it), only
			// to fail on the same delete (a finalizer no one removes).
			return &Error{Event: req.Event, Hook: capstanv1.RefOf(h.Object), Weight: h.Weight, Template: h.Template,
				Reason: ReasonDeleteFailed, Message: err.Error(), Err: err}
		}
	}
	return nil
}

// forget shows the hook ref with no UID of its object before its policy
// deletes it, when the progress shows it with the UID this run was told
// (req.WaitingUID): a look after a stop between the delete and the record
// of the run's end would read the object gone as deleted by someone else,
// and fail the hook with the reason Deleted. Without the UID that look
// judges the hook by its object, as one after any other stop does. The
// caller does not delete the object when the progress could not be
// written.
func (r *Runner) forget(req Request, ref capstanv1.ObjectRef) error {
	if req.WaitingUID == "" || req.Waiting == nil || *req.Waiting != ref {
		return nil
	}
	since := metav1.Now()
	if !req.WaitingSince.IsZero() {
		since = metav1.NewTime(req.WaitingSince)
	}
	return req.progress(capstanv1.HookProgress{ObjectRef: ref, Event: req.Event, Since: since, Run: req.Run})
}

// readFailure is a failed read of the object a run left for hook h: a
// *ReadError, since it says nothing of the hook, which may still run. But
// a read of the hook the stopped run waited for that still fails once its
// timeout has passed since it started ends it as a timeout, as the wait
// would: a read refused for good would otherwise have every look read
// once more, for ever, and an uninstall never end.
func readFailure(req Request, h render.Hook, timeout time.Duration, err error) error {
	ref := capstanv1.RefOf(h.Object)
	waited := req.Resume && req.Waiting != nil && *req.Waiting == ref
	if waited && !req.WaitingSince.IsZero() && time.Now().After(req.WaitingSince.Add(timeout)) {
		return &Error{Event: req.Event, Hook: ref, Weight: h.Weight, Template: h.Template, Reason: ReasonTimeout,
			Message: fmt.Sprintf("it could not be read within its timeout of %s: %v", timeout, err), Timeout: timeout, Err: err}
	}
	return &ReadError{Event: req.Event, Hook: ref, Err: err}
}

// doneBefore counts the hooks at the start of selected that a resumed run
// does not run again: those before the one the stopped run waited for
// (req.Waiting), when that one's object carries this run (ours). Hooks run
// one at a time and a failure ends the run, so each of them succeeded in
// it, even if its object is gone since (a Job's ttlSecondsAfterFinished).
// A recorded UID of the waited-for hook's object (req.WaitingUID) shows
// it was this run's even once it is gone. Otherwise a waited-for hook
// whose object is not this run's says nothing of them: each is judged by
// its own object (runOne). A read of that object that fails says nothing
// of how far the run got: it returns a *ReadError, and the run stops
// there, having run nothing.
func (r *Runner) doneBefore(ctx context.Context, req Request, selected []render.Hook, timeout time.Duration) (int, bool, error) {
	if !req.Resume || req.Waiting == nil || req.Run == "" {
		return 0, false, nil
	}
	for i, h := range selected {
		if capstanv1.RefOf(h.Object) != *req.Waiting {
			continue
		}
		if req.WaitingUID != "" {
			// NOTE: the stopped run left this hook's object running, so
			// it made it, whether or not it is still there.
			return i, true, nil
		}
		ours, _, err := r.fromStoppedRun(ctx, req, *req.Waiting)
		if err != nil {
			// NOTE: taken for not ours, the hooks before it would be
			// judged each by its own object, and one whose Job its TTL
			// deleted would run again.
			return 0, false, readFailure(req, h, timeout, err)
		}
		if !ours {
			return 0, false, nil
		}
		return i, true, nil
	}
	return 0, false, nil
}

// runOne runs one hook and waits for it.
func (r *Runner) runOne(ctx context.Context, req Request, h render.Hook, timeout time.Duration, checked map[string]bool) error {
	obj := h.Object.DeepCopy()
	if req.Run != "" {
		annotations := obj.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[RunAnnotation] = req.Run
		obj.SetAnnotations(annotations)
	}
	ref := capstanv1.RefOf(obj)
	fail := func(reason, msg string, err error) *Error {
		return &Error{Event: req.Event, Hook: ref, Weight: h.Weight, Template: h.Template, Reason: reason, Message: msg, Timeout: timeout, Err: err}
	}
	log := logf.FromContext(ctx).WithValues("event", req.Event, "kind", ref.Kind, "namespace", ref.Namespace, "name", ref.Name, "weight", h.Weight)
	resumed := false
	waited := req.Resume && req.Waiting != nil && *req.Waiting == ref
	if waited && req.WaitingUID != "" {
		if gone, err := r.replaced(ctx, req, ref); err != nil {
			// NOTE: a read of the object a run left, not a creation: it
			// says nothing of the hook, which may still run.
			return readFailure(req, h, timeout, err)
		} else if gone != "" {
			// NOTE: deleted while no run waited for it (a person cut a
			// long migration short, a drain evicted a Pod): as when it is
			// deleted while a run waits (errGone), it may have done its
			// work, so it is a failure a person looks at, not a hook run
			// again.
			log.Info("Hook's object was deleted while the run had left it running", "why", gone)
			return fail(ReasonDeleted, gone, errGone)
		}
	}
	if req.Resume {
		ours, st, err := r.fromStoppedRun(ctx, req, ref)
		if err != nil {
			// NOTE: as above: neither a hook's failure, which would have
			// the run start it anew at the next sync, nor a reason to run
			// it again now.
			return readFailure(req, h, timeout, err)
		}
		switch {
		case ours && st == succeeded:
			// NOTE: the run that stopped made this object and it
			// succeeded, though the stopped controller never recorded
			// it: running it again would repeat a step that finished,
			// such as a post-install data load.
			log.Info("Hook succeeded before the run stopped; not run again")
			return nil
		case ours && waited:
			// NOTE: still running, or ended while nobody waited (a run
			// that yielded, or a controller that stopped): waited for,
			// or read, and never started anew.
			resumed = true
		}
	}
	if resumed {
		log.Info("Waiting again for the hook the stopped run waited for")
	} else {
		log.Info("Running hook")
	}
	since := time.Now()
	if resumed && !req.WaitingSince.IsZero() {
		since = req.WaitingSince
	}
	// NOTE: the hook is recorded before its object is made, or an earlier
	// one deleted: a controller that stops after the create and before a
	// later record would find no run to go on from, and
	// before-hook-creation would delete the running Job and start it
	// anew.
	p := capstanv1.HookProgress{ObjectRef: ref, Event: req.Event, Since: metav1.NewTime(since), Run: req.Run}
	if resumed {
		p.UID = req.WaitingUID
	}
	if err := req.progress(p); err != nil {
		return err
	}
	existed, keptBy := false, ""
	if !resumed {
		var err error
		if existed, keptBy, err = r.create(ctx, req, h, obj, timeout, checked, fail); err != nil {
			return err
		}
		if !waitsFor(ref.APIVersion, ref.Kind) {
			log.Info("Hook created")
			return nil
		}
	}
	yield := req.Yield
	if ttl, found := JobTTL(obj); found && ttl < MinJobTTLSeconds {
		// NOTE: the TTL controller may delete the Job before a later look
		// reads how it ended; it is waited for within this one. The
		// controller's hooks keep at least MinJobTTLSeconds (prepare),
		// far longer than a look takes to come, and yield as others do:
		// a Job that never finishes must not hold a worker for the
		// whole hook timeout. A controller that is down for longer than
		// that finds the Job gone, and runs it again.
		yield = 0
	}
	out, err := r.wait(ctx, req.Applier, ref, since.Add(timeout), yield)
	switch {
	case errors.Is(err, errYield):
		log.Info("Hook still runs; looking again later")
		return &Running{Event: req.Event, Hook: ref, Since: since, UID: out.uid}
	case wait.Interrupted(err) && ctx.Err() == nil:
		e := fail(ReasonTimeout, out.message, err)
		e.Kept, e.KeptBy = existed, keptBy
		return e
	case errors.Is(err, errGone):
		// NOTE: a Job the TTL controller deleted as it finished, or one
		// someone deleted: how it ended is lost. Running it again would
		// repeat a migration that may have succeeded, or rerun a failing
		// one in a loop, so it is a failure a person looks at, not an
		// error that is retried with backoff.
		log.Info("Hook's object was deleted before it was read finished")
		return fail(ReasonDeleted, "", err)
	case err != nil:
		// NOTE: a read the API server refused (Forbidden, Unauthorized)
		// says nothing of how the hook ends: it may still run.
		return &ReadError{Event: req.Event, Hook: ref, Err: err}
	case out.state == failed:
		e := fail(out.reason, out.message, nil)
		e.Kept, e.KeptBy = existed, keptBy
		log.Info("Hook failed", "reason", out.reason)
		return e
	}
	log.Info("Hook succeeded")
	return nil
}

// create makes a hook's object: it makes sure the hook's namespace exists,
// deletes the object of an earlier run when the hook has
// before-hook-creation, and applies the hook. It reports whether an object
// of an earlier run was kept and applied in place, and, when the hook has
// before-hook-creation, what kept it: its kind, which Capstan never
// deletes, or a mark in its manifests (Request.Keep).
func (r *Runner) create(ctx context.Context, req Request, h render.Hook, obj *unstructured.Unstructured, timeout time.Duration, checked map[string]bool, fail func(reason, msg string, err error) *Error) (existed bool, keptBy string, err error) {
	ref := capstanv1.RefOf(obj)
	if ns := obj.GetNamespace(); ns != "" && !checked[ns] {
		if err := ensureNamespace(ctx, req.Applier, req.Addon, ns, deleteEvent(req.Event)); err != nil {
			if gone := namespaceGone(""); errors.As(err, &gone) {
				return false, "", fail(ReasonNamespaceGone, gone.Error(), err)
			}
			return false, "", fail(ReasonCreateFailed, err.Error(), err)
		}
		checked[ns] = true
	}
	prev, err := req.Applier.Get(ctx, ref)
	if err != nil && !apimeta.IsNoMatchError(err) {
		return false, "", fail(ReasonCreateFailed, "reading its object: "+err.Error(), err)
	}
	if by, err := heldBy(ctx, req, ref, prev); err != nil {
		return false, "", fail(ReasonCreateFailed, "reading the Addon its object's labels name: "+err.Error(), err)
	} else if by != "" {
		// NOTE: neither deleted by before-hook-creation nor applied over:
		// the other add-on runs it, and its uninstall would delete this
		// hook's object.
		return false, "", fail(ReasonOtherAddon, fmt.Sprintf("%s already exists and Addon %s holds it (its owner labels name that Addon), so the hook neither deletes it nor applies over it; rename the hook in the chart (or set another spec.releaseName), or remove the object from Addon %s first",
			ref.Describe(), by, by), nil)
	}
	if hasPolicy(h, BeforeHookCreation) {
		if keptBy, err = r.deleteAndWait(ctx, req, capstanv1.RefOf(h.Object), timeout, ""); err != nil {
			return false, "", fail(ReasonCreateFailed, fmt.Sprintf("deleting its object from an earlier run (policy %s) failed: %v", BeforeHookCreation, err), err)
		}
		existed = keptBy != ""
	} else {
		existed = prev != nil
		if existed && neverDeleted(h) && slices.Contains(DeletePolicies(h), BeforeHookCreation) {
			keptBy = keptByKind
		}
	}
	if keptBy != "" {
		// NOTE: applied over, as a hook without the policy is: a
		// claim's volume outlives the hook, and a Job's old result is
		// read again.
		logf.FromContext(ctx).Info("Hook's object from an earlier run is kept: applied over, not created anew",
			"kind", ref.Kind, "namespace", ref.Namespace, "name", ref.Name, "policy", BeforeHookCreation, "keptBy", keptBy)
	}
	if err := req.Applier.Apply(ctx, obj); err != nil {
		if deleteEvent(req.Event) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			// NOTE: the namespace's deletion began after it was read.
			return existed, keptBy, fail(ReasonNamespaceGone, "the namespace "+ref.Namespace+" is being deleted", err)
		}
		msg := "the API server refused it: " + err.Error()
		if apimeta.IsNoMatchError(err) {
			msg = fmt.Sprintf("the cluster does not serve %s %s; a hook's kind must exist before the hook runs", ref.APIVersion, ref.Kind)
		}
		if obj.GetKind() == "Secret" {
			msg = "the API server refused the Secret (its message is withheld because it can quote a value)"
		}
		// NOTE: applied over an earlier run's object, on purpose. When
		// the API server refuses to change that object in place (a Pod
		// whose spec cannot change), the error says so and how to run
		// the hook anew, since the next sync applies over it again. Any
		// other refusal (a policy, a quota, a value the chart got wrong)
		// would meet a new object as well: deleting the old one would
		// not help.
		e := fail(ReasonCreateFailed, msg, err)
		if existed && changeRefused(obj, err) {
			e.Kept, e.KeptBy = existed, keptBy
		}
		return existed, keptBy, e
	}
	return existed, keptBy, nil
}

// changeRefused reports whether err is the API server refusing to change
// the live object of obj in place: an immutable field
// (apply.RefusedInPlace), or a Pod's spec, which an update may change only
// in a few fields.
func changeRefused(obj *unstructured.Unstructured, err error) bool {
	if apply.RefusedInPlace(err) {
		return true
	}
	var status apierrors.APIStatus
	if obj.GetKind() != "Pod" || obj.GetAPIVersion() != "v1" || !apierrors.IsInvalid(err) || !errors.As(err, &status) {
		return false
	}
	st := status.Status()
	if st.Details == nil || strings.Contains(st.Message, "admission webhook") || strings.Contains(st.Message, "ValidatingAdmissionPolicy") {
		return false
	}
	for _, c := range st.Details.Causes {
		if c.Type == metav1.CauseTypeForbidden && strings.Contains(c.Message, "pod updates may not change fields") {
			return true
		}
	}
	return false
}

// heldBy names the other Addon that holds live, the object of the hook
// ref, as "namespace/name": its owner labels name another Addon than
// req.Addon, and req.HeldBy, when set, finds that Addon holds it. It is
// "" when live is nil, is this add-on's or names none.
func heldBy(ctx context.Context, req Request, ref capstanv1.ObjectRef, live *unstructured.Unstructured) (string, error) {
	if live == nil {
		return "", nil
	}
	labels := live.GetLabels()
	name, ns := labels[capstanv1.AddonLabel], labels[capstanv1.AddonNamespaceLabel]
	if name == "" || ns == "" || req.Addon.LabelledFor(labels) {
		return "", nil
	}
	if req.HeldBy == nil {
		return ns + "/" + name, nil
	}
	return req.HeldBy(ctx, ref, live)
}

// fromStoppedRun reads a hook's object and reports whether the stopped run
// that this one goes on from made it (it carries req.Run), and if so where
// it stands. A kind that is not waited for has succeeded once it exists.
func (r *Runner) fromStoppedRun(ctx context.Context, req Request, ref capstanv1.ObjectRef) (bool, state, error) {
	live, err := req.Applier.Get(ctx, ref)
	if apimeta.IsNoMatchError(err) {
		return false, running, nil
	}
	if err != nil {
		return false, running, err
	}
	if live == nil || live.GetDeletionTimestamp() != nil || req.Run == "" || live.GetAnnotations()[RunAnnotation] != req.Run {
		return false, running, nil
	}
	if !waitsFor(ref.APIVersion, ref.Kind) {
		return true, succeeded, nil
	}
	out, err := r.read(ctx, req.Applier, live)
	return true, out.state, err
}

// replaced says why the object of the hook the stopped run left running
// is no longer the one it made (req.WaitingUID): gone, being deleted, or
// another object in its place. It is empty while that object is there.
func (r *Runner) replaced(ctx context.Context, req Request, ref capstanv1.ObjectRef) (string, error) {
	live, err := req.Applier.Get(ctx, ref)
	switch {
	case apimeta.IsNoMatchError(err) || err == nil && live == nil:
		return "it was gone when the controller looked again", nil
	case err != nil:
		return "", err
	case live.GetUID() != req.WaitingUID:
		return "another object of the same name took its place", nil
	case live.GetDeletionTimestamp() != nil:
		return "it was being deleted when the controller looked again", nil
	}
	return "", nil
}

// JobTTL returns a batch Job's ttlSecondsAfterFinished, and whether it
// has a number there. o may come from a chart's YAML or JSON, in which a
// number may be an int64 or a float64.
func JobTTL(o *unstructured.Unstructured) (int64, bool) {
	if o.GetKind() != "Job" || !strings.HasPrefix(o.GetAPIVersion(), "batch/") {
		return 0, false
	}
	v, found, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "ttlSecondsAfterFinished")
	if !found {
		return 0, false
	}
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case float64:
		return int64(n), true
	}
	return 0, false
}

// errYield ends a wait that yield bounded while the hook still runs.
var errYield = errors.New("hooks: the hook still runs")

// errGone ends a wait for a hook whose object was deleted before it was
// read finished.
var errGone = errors.New("hooks: the hook's object was deleted while it was waited for")

// wait polls a Job or Pod hook until it finishes, or until deadline. On a
// timeout, the outcome's message says what the hook was doing. With yield,
// it polls at most that long, and returns errYield if the hook still runs
// then and its deadline has not come. A deadline already past reads the
// hook once: a run that goes on from a yield may find it ended.
func (r *Runner) wait(ctx context.Context, a *apply.Applier, ref capstanv1.ObjectRef, deadline time.Time, yield time.Duration) (outcome, error) {
	var out outcome
	var lastErr error
	look := func(ctx context.Context) (bool, error) {
		live, err := a.Get(ctx, ref)
		switch {
		case err != nil && ctx.Err() != nil:
			return false, ctx.Err()
		case err != nil && (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)):
			return false, err
		case err != nil && nearDeadline(ctx, r.poll()):
			// The client refuses a read that cannot finish in time; that
			// says nothing about the hook.
			return false, nil
		case err != nil:
			// NOTE: a read that fails for a moment must not fail a hook
			// that may run for minutes; the timeout bounds the retries.
			lastErr = err
			return false, nil
		}
		if live == nil {
			return false, errGone
		}
		out, err = r.read(ctx, a, live)
		out.uid = live.GetUID()
		if err != nil {
			return false, err
		}
		return out.state != running, nil
	}
	budget := time.Until(deadline)
	yielding := yield > 0 && yield < budget
	if yielding {
		budget = yield
	}
	var err error
	if budget > 0 {
		err = wait.PollUntilContextTimeout(ctx, r.poll(), budget, true, look)
	} else {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var done bool
		done, err = look(lctx)
		cancel()
		switch {
		case err == nil && !done && lastErr != nil && yield > 0:
			// NOTE: a read that failed says nothing of the hook; the
			// next look reads it again, holding the run as it is.
			logf.FromContext(ctx).Error(lastErr, "Reading the hook past its timeout failed", "hook", ref.Describe())
			return out, errYield
		case err == nil && !done:
			err = wait.ErrorInterrupted(errors.New("the hook's timeout has passed"))
		}
	}
	if yielding && wait.Interrupted(err) && ctx.Err() == nil && time.Now().Before(deadline) {
		return out, errYield
	}
	if wait.Interrupted(err) {
		out.message = r.progressOf(ctx, a, ref)
		if lastErr != nil {
			out.message = joinMessage(out.message, "the last read failed: "+lastErr.Error())
		}
	}
	return out, err
}

// read decides a live Job's or Pod's outcome. For a failed Job, it adds how
// the Job's pods ended.
func (r *Runner) read(ctx context.Context, a *apply.Applier, live *unstructured.Unstructured) (outcome, error) {
	out, job, err := liveOutcome(live)
	if err == nil && job != nil && out.state == failed {
		if pods := jobPodFailures(ctx, a, job); pods != "" {
			out.message = joinMessage(out.message, pods)
		}
	}
	return out, err
}

// progressOf says where a hook that timed out stands: a Job's active,
// succeeded and failed pods and its pods' phases, or a Pod's phase. It is
// best effort: a read that fails says nothing.
func (r *Runner) progressOf(ctx context.Context, a *apply.Applier, ref capstanv1.ObjectRef) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	live, err := a.Get(ctx, ref)
	if err != nil || live == nil {
		return ""
	}
	if live.GetKind() == "Pod" {
		phase, _, _ := unstructured.NestedString(live.Object, "status", "phase")
		return "the pod is " + phase
	}
	job := &batchv1.Job{}
	if runtime.DefaultUnstructuredConverter.FromUnstructured(live.Object, job) != nil {
		return ""
	}
	msg := fmt.Sprintf("the Job has %d active, %d succeeded and %d failed pods", job.Status.Active, job.Status.Succeeded, job.Status.Failed)
	pods, err := listJobPods(ctx, a, job)
	if err == nil && len(pods) > 0 {
		phases := map[corev1.PodPhase]int{}
		for _, p := range pods {
			phases[p.Status.Phase]++
		}
		msg += "; pods by phase:"
		for _, phase := range []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown} {
			if n := phases[phase]; n > 0 {
				msg += fmt.Sprintf(" %s %d", phase, n)
			}
		}
	}
	return msg
}

// jobPodFailures says how a failed Job's pods ended, best effort.
func jobPodFailures(ctx context.Context, a *apply.Applier, job *batchv1.Job) string {
	pods, err := listJobPods(ctx, a, job)
	if err != nil {
		return ""
	}
	var msg string
	for _, p := range pods {
		if p.Status.Phase != corev1.PodFailed {
			continue
		}
		if c := containerFailures(&p); c != "" {
			msg = joinMessage(msg, "pod "+p.Name+": "+c)
		}
	}
	return msg
}

// listJobPods lists the pods of one Job, by the controller-uid label that
// the Job controller sets and that no other Job's pods carry.
func listJobPods(ctx context.Context, a *apply.Applier, job *batchv1.Job) ([]corev1.Pod, error) {
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("v1")
	list.SetKind("PodList")
	if err := a.Client.List(ctx, list, client.InNamespace(job.Namespace),
		client.MatchingLabels{batchv1.ControllerUidLabel: string(job.UID)}); err != nil {
		return nil, err
	}
	pods := make([]corev1.Pod, 0, len(list.Items))
	for _, item := range list.Items {
		var p corev1.Pod
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, &p); err != nil {
			return nil, err
		}
		pods = append(pods, p)
	}
	slices.SortFunc(pods, func(x, y corev1.Pod) int { return x.CreationTimestamp.Compare(y.CreationTimestamp.Time) })
	return pods, nil
}

func joinMessage(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// cleanUp deletes the hooks that have policy, best effort: the hook's own
// failure is what the caller reports.
func (r *Runner) cleanUp(ctx context.Context, req Request, hooks []render.Hook, policy string, timeout time.Duration) {
	ctx = context.WithoutCancel(ctx)
	for _, h := range hooks {
		if !hasPolicy(h, policy) {
			continue
		}
		kept, err := r.deleteAndWait(ctx, req, capstanv1.RefOf(h.Object), timeout, "")
		if err != nil {
			logf.FromContext(ctx).Error(err, "Deleting a hook failed", "policy", policy, "kind", h.Object.GetKind(), "name", h.Object.GetName())
		}
		if kept != "" {
			logf.FromContext(ctx).Info("Hook's object kept: not deleted by its policy", "policy", policy, "kind", h.Object.GetKind(), "name", h.Object.GetName(), "keptBy", kept)
		}
	}
}

// deleteAndWait deletes a hook's object, and waits until it is gone. Pods
// of a Job go with it: the deletion propagates in the background, as in
// Helm, so the Job is gone at once and the garbage collector deletes its
// pods. An object of a kind Capstan never deletes, or that a mark in its
// manifests keeps (req.Keep, read on the live object, as a prune reads
// it), is not deleted: deleteAndWait returns what keeps it, and the
// caller applies over it. A StatefulSet is deleted only once no claim is
// owned by it (apply.Applier.ReleaseClaims), as the prune deletes one. With run, an object that does not carry it is
// another run's, and is left as it is. The API server's refusal to delete
// a Secret has its message withheld (apply.RefusedWrite), as a prune's:
// an admission policy may quote the Secret's data.
func (r *Runner) deleteAndWait(ctx context.Context, req Request, ref capstanv1.ObjectRef, timeout time.Duration, run string) (string, error) {
	if neverDeletedRef(ref) {
		// NOTE: hasPolicy keeps every caller from here; a kind that is
		// never deleted must not depend on that.
		return keptByKind, nil
	}
	a := req.Applier
	var uid types.UID
	for try := 1; ; try++ {
		live, err := a.Get(ctx, ref)
		if apimeta.IsNoMatchError(err) || (err == nil && live == nil) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		if try > 1 && live.GetUID() != uid || run != "" && live.GetAnnotations()[RunAnnotation] != run {
			// NOTE: another object of the same name replaced the one
			// read, or is not the run's: the one meant is gone.
			return "", nil
		}
		if ended, failure := Ended(live); run != "" && try == 1 && (!ended || failure != "") {
			// NOTE: a recorded run's object that failed, or still runs, is
			// left as it is, as Helm leaves a hook that failed: a run
			// that no look goes on from (one a change replaced while its
			// hook ran) records the hook it showed last before it knows
			// how that hook ends.
			return "", nil
		}
		if run != "" && live.GetDeletionTimestamp() != nil {
			// NOTE: a recorded run's object whose delete was sent already
			// (by the run, or an earlier look) is held by its finalizers
			// alone; it goes once they are removed. Waiting for it again
			// would hold a worker for the whole wait on every look, for
			// as long as no one removes them.
			return "", nil
		}
		if by := apply.KeptBy(live, req.Keep); by != "" {
			return by, nil
		}
		uid = live.GetUID()
		changed, err := a.ReleaseClaims(ctx, ref, live)
		switch {
		case err != nil:
			return "", fmt.Errorf("deleting %s: %w", ref.Describe(), err)
		case changed && try == maxDeleteTries:
			return "", fmt.Errorf("%s changed while its claims were kept from its delete, %d times; the next sync tries again", ref.Describe(), try)
		case changed:
			// NOTE: a StatefulSet whose claims would have gone with it:
			// read again, so the delete binds to a read with none owned.
			continue
		}
		// NOTE: the delete is bound to the UID and resourceVersion read,
		// so an object marked to be kept since the read is not deleted;
		// one that changed is read again.
		rv := live.GetResourceVersion()
		err = a.Client.Delete(ctx, live, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &uid, ResourceVersion: &rv})
		if err == nil || apierrors.IsNotFound(err) {
			break
		}
		if !apierrors.IsConflict(err) {
			return "", apply.RefusedWrite(ref, err)
		}
		if try == maxDeleteTries {
			return "", fmt.Errorf("%s changed between each read and its delete, %d times; the next sync tries again", ref.Describe(), try)
		}
	}
	bound := min(timeout, r.deleteWait())
	var finalizers []string
	err := wait.PollUntilContextTimeout(ctx, r.poll(), bound, true, func(ctx context.Context) (bool, error) {
		cur, err := a.Get(ctx, ref)
		switch {
		case err != nil && ctx.Err() != nil:
			return false, ctx.Err()
		case err != nil && nearDeadline(ctx, r.poll()):
			// The client refuses a read that cannot finish in time; that
			// says nothing about the object.
			return false, nil
		case err != nil:
			return false, err
		}
		if cur != nil {
			finalizers = cur.GetFinalizers()
		}
		return cur == nil || cur.GetUID() != uid, nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		// NOTE: bounded well within the hook timeout: the wait holds the
		// reconcile's worker, and what holds the object longer is a
		// finalizer that a person, or a controller that is down, must
		// remove. The next sync tries again.
		then := "and the next sync tries again"
		if run != "" {
			// NOTE: a recorded run's object is taken as going on the next
			// look (above): no sync waits for it again.
			then = "and it goes then; no sync waits for it again"
		}
		if len(finalizers) > 0 {
			return "", fmt.Errorf("%s was still there %s after it was deleted, held by its finalizers %s; the controller that owns them must remove them (remove them by hand if it is gone), %s",
				ref.Describe(), bound, strings.Join(finalizers, ", "), then)
		}
		return "", fmt.Errorf("%s was still there %s after it was deleted; the next sync tries again", ref.Describe(), bound)
	}
	return "", err
}

func (r *Runner) deleteWait() time.Duration {
	if r.DeleteWait > 0 {
		return r.DeleteWait
	}
	return DefaultDeleteWait
}

// maxDeleteTries bounds the reads and deletes of one hook's object whose
// metadata keeps changing between the two.
const maxDeleteTries = 3

// keptByKind is what keeps a hook's object of a kind Capstan never
// deletes.
const keptByKind = "its kind, which Capstan never deletes"

// NamespaceGoneReason says why no delete hook can run in the namespace
// name, read as live (nil when it does not exist): it does not exist, or
// it is being deleted. It is "" when the namespace is there to run in.
func NamespaceGoneReason(name string, live *unstructured.Unstructured) string {
	switch {
	case live == nil:
		return "the namespace " + name + " does not exist"
	case live.GetDeletionTimestamp() != nil:
		return "the namespace " + name + " is being deleted"
	}
	return ""
}

// ensureNamespace makes sure a hook's namespace exists. The controller
// applies the target namespace before pre-install hooks; before pre-upgrade
// hooks it may be gone, so the target namespace of an Addon with
// createNamespace is created here, with Capstan's labels and field manager,
// exactly as the controller would apply it.
//
// A delete hook's namespace (deleting) is never created, and one being
// deleted is no place for it: a namespaceGone says which. A Namespace
// is never deleted by an uninstall, so one made for its hooks would be
// left behind, and the API server refuses any object in a namespace being
// deleted.
func ensureNamespace(ctx context.Context, a *apply.Applier, addon *capstanv1.Addon, name string, deleting bool) error {
	ref := capstanv1.ObjectRef{APIVersion: "v1", Kind: "Namespace", Name: name}
	live, err := a.Get(ctx, ref)
	if err != nil {
		return fmt.Errorf("reading the hook's namespace %s: %w", name, err)
	}
	if deleting {
		if why := NamespaceGoneReason(name, live); why != "" {
			return namespaceGone(why)
		}
	}
	if live != nil {
		return nil
	}
	target := addon.Namespace
	if addon.Spec.TargetNamespace != "" {
		target = addon.Spec.TargetNamespace
	}
	if name != target || !addon.Spec.CreateNamespace {
		if name == target {
			return fmt.Errorf("the hook's namespace %s does not exist; create it, or set spec.createNamespace: true", name)
		}
		return fmt.Errorf("the hook's namespace %s does not exist and is not the add-on's target namespace; create it, or fix the namespace in the chart", name)
	}
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(name)
	ns.SetLabels(addon.AppliedLabels())
	if err := a.Apply(ctx, ns); err != nil {
		return fmt.Errorf("creating the target namespace %s for the hook: %w", name, err)
	}
	return nil
}

// nearDeadline reports whether ctx ends within d.
func nearDeadline(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) < d
}

func (r *Runner) poll() time.Duration {
	if r.Poll > 0 {
		return r.Poll
	}
	return time.Second
}
