package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	release "helm.sh/helm/v4/pkg/release/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/render"
)

// HookRunner runs the Helm hooks of one event the way Helm does: in weight
// order, waiting for Jobs and Pods, honouring delete policies. hooks.Runner
// implements it; tests may give another.
type HookRunner interface {
	Run(ctx context.Context, req hooks.Request) error
	// CleanUp deletes what is left of the hook-succeeded objects of runs
	// whose hooks all succeeded and whose end was recorded, once req.Done
	// had run and before Run deleted them. It returns those whose delete
	// failed.
	CleanUp(ctx context.Context, req hooks.Request, objs []capstanv1.HookObject) ([]capstanv1.HookObject, error)
}

// The hook events of each lifecycle, before and after the apply.
var hookEvents = map[Lifecycle][2]string{
	LifecycleInstall: {"pre-install", "post-install"},
	LifecycleUpgrade: {"pre-upgrade", "post-upgrade"},
	LifecycleDelete:  {"pre-delete", "post-delete"},
}

// events returns the hook events this sync runs before and after the
// apply; either may be empty. A retry runs only the post event that failed.
func (s *scope) events() (pre, post string) {
	if s.lifecycle == LifecycleRetryPost {
		if p := s.addon.Status.PendingHook; p != nil {
			return "", p.Event
		}
		return "", "" // the retried post hooks succeeded (recordPost)
	}
	e := hookEvents[s.lifecycle]
	if d := s.addon.Status.PreHooksDone; d != nil && s.render != nil && d.Event == e[0] && d.Hash == s.render.Hash {
		return "", e[1] // the pre hooks of this render ran before a stop
	}
	return e[0], e[1]
}

// plannedHooks lists the hooks this sync would run, in the order they run,
// then the chart's tests when spec.test.enable runs them after it, then a
// folder's SyncFail hooks, which run if it fails: a person who
// approves the plan approves them too, by their digests in its hash.
func (s *scope) plannedHooks() []capstanv1.PlannedHook {
	var out []capstanv1.PlannedHook
	pre, post := s.events()
	events := []string{pre, post}
	if pre != "" || post != "" {
		if t := s.addon.Spec.Test; t != nil && t.Enable {
			events = append(events, render.TestEvent)
		}
		events = append(events, render.SyncFailEvent)
	}
	for _, event := range events {
		if event == "" {
			continue
		}
		for _, h := range hooks.Select(s.hooks, event) {
			out = append(out, capstanv1.PlannedHook{ObjectRef: capstanv1.RefOf(h.Object), Events: []string{event}, Weight: h.Weight, DeletePolicies: h.DeletePolicies})
		}
	}
	return out
}

// hookNotices reports the hooks of events Helm does not know: Helm never
// runs them, and neither does Capstan, but the chart author should know.
// A folder's render gives its own notices (render.Result.Notices). It
// reports too the hooks with delete policies neither Helm nor, for a
// folder's hook, Argo CD knows (unknownPolicyNotice).
func hookNotices(hs []render.Hook) []capstanv1.Notice {
	var out []capstanv1.Notice
	for _, h := range hs {
		path := "hooks/" + h.Object.GetKind() + "/" + h.Object.GetName()
		if n, ok := unknownPolicyNotice(h); ok {
			out = append(out, capstanv1.Notice{Path: path, Message: n})
		}
		if len(h.UnknownEvents) == 0 {
			continue
		}
		out = append(out, capstanv1.Notice{
			Path: path,
			Message: fmt.Sprintf("the helm.sh/hook annotation in %s names event(s) Helm does not know (%s), so, as in Helm, the hook never runs; the known events are %s",
				h.Template, strings.Join(h.UnknownEvents, ", "), strings.Join(render.KnownHookEvents(), ", ")),
		})
	}
	return out
}

// unknownPolicyNotice words the notice of a hook whose delete policies
// name one that Helm (or, for a folder's hook, Argo CD) does not know,
// such as the typo before-hook-creaton or an empty one (a chart that
// templates the annotation from a value that is ""). Such a policy does nothing, and
// as in Helm and Argo CD the default, before-hook-creation, applies only
// when no policy is named: a hook with only the typo keeps the object of
// its last run, which its next run applies over and may read as done.
func unknownPolicyNotice(h render.Hook) (string, bool) {
	var unknown []string
	for _, p := range h.DeletePolicies {
		switch p {
		case hooks.BeforeHookCreation, hooks.HookSucceeded, hooks.HookFailed:
		case "":
			unknown = append(unknown, `"" (empty, such as a policy templated from a value that is empty)`)
		default:
			unknown = append(unknown, fmt.Sprintf("%q", p))
		}
	}
	if len(unknown) == 0 {
		return "", false
	}
	annotation, known := release.HookDeleteAnnotation, strings.Join([]string{hooks.BeforeHookCreation, hooks.HookSucceeded, hooks.HookFailed}, ", ")
	if _, argo := h.Object.GetAnnotations()[render.ArgoHookDeleteAnnotation]; h.Folder && argo {
		annotation, known = render.ArgoHookDeleteAnnotation, "BeforeHookCreation, HookSucceeded, HookFailed"
	}
	def := ""
	if len(unknown) == len(h.DeletePolicies) {
		def = ", and since it names no policy that is known, the default, before-hook-creation, does not apply either: the object of the hook's last run is not deleted before it runs again, and is applied over"
	}
	return fmt.Sprintf("the %s annotation in %s names delete policies that are not known (%s), which do nothing%s; the known policies are %s",
		annotation, h.Template, strings.Join(unknown, ", "), def, known), true
}

// runHooks runs the hooks of one event, if there are any. A hook that
// fails is terminal: the add-on is Stalled until the next change or resync,
// not retried at once. A retry of a pending post event goes on from the
// run that stopped (runEvent), and so does a run of an event that
// status.hook shows running: a controller stopped while it ran, or after
// its hooks succeeded and before that was recorded. A pre-upgrade
// migration Job still running is then waited for, not deleted and started
// anew, and one that succeeded is not run again; the run name (hookRun)
// holds the render, so a new render runs every hook.
func (r *AddonReconciler) runHooks(ctx context.Context, s *scope, event string, done recordDone) error {
	h := s.addon.Status.Hook
	return r.runEvent(ctx, s, event, s.lifecycle == LifecycleRetryPost || h != nil && h.Event == event, done)
}

// recordDone records in status, in one write, that an event's hooks all
// succeeded in run: the event's own record of its end, status.hook
// cleared, and status.preHooksDone naming run and objs, the objects of its
// hook-succeeded hooks, still to delete (doneRecord).
type recordDone func(ctx context.Context, run string, objs []capstanv1.ObjectRef) error

// doneRecord is the status.preHooksDone that records event done in run,
// for the render hash, with objs, of run, still to delete. A sync's record
// keeps the objects an earlier record still named (a delete that failed,
// finishCleanUp), so that they are deleted later, not forgotten; an
// uninstall's keeps only those of its own run, held for it: it tried the
// others once (finishCleanUp, in uninstall).
func (s *scope) doneRecord(event, hash, run string, objs []capstanv1.ObjectRef) *capstanv1.PendingHook {
	d := &capstanv1.PendingHook{Event: event, Hash: hash, Run: run}
	seen := map[string]bool{}
	for _, ref := range objs {
		d.Objects = append(d.Objects, capstanv1.HookObject{ObjectRef: ref, Run: run})
		seen[ref.Key()] = true
	}
	if old := s.addon.Status.PreHooksDone; old != nil {
		for _, o := range old.Objects {
			// NOTE: an object the new run made again under the same name
			// is the new run's. An uninstall's own run's objects were held
			// for it (goesOnFrom), never tried: they stay, whatever its
			// render now holds.
			if !seen[o.Key()] && (!deleteEvent(event) || o.Run == run) {
				d.Objects = append(d.Objects, o)
				seen[o.Key()] = true
			}
		}
	}
	return d
}

// leftOver is what status.preHooksDone keeps once the event it records no
// longer matters (the apply is recorded): the objects still to delete, in a
// record of no event, or nothing.
func leftOver(d *capstanv1.PendingHook) *capstanv1.PendingHook {
	if d == nil || len(d.Objects) == 0 {
		return nil
	}
	return &capstanv1.PendingHook{Objects: d.Objects}
}

// errUnrecorded is a run of hooks that all succeeded whose end could not be
// recorded (recordDone failed): nothing of it was deleted, status.hook
// still names it, and the next look goes on from it and records it. It is
// no hook's failure, and is retried with backoff.
type errUnrecorded struct{ err error }

func (e errUnrecorded) Error() string { return "recording that the hooks succeeded: " + e.err.Error() }
func (e errUnrecorded) Unwrap() error { return e.err }

// NoHookFailed tells apply.Sequence not to word it as a hook's failure.
func (e errUnrecorded) NoHookFailed() bool { return true }

// unrecorded reports whether err is a run that a status write stopped:
// one whose end could not be recorded (errUnrecorded), or one that did not
// start its next hook because status.hook could not name it first
// (hooks.ProgressError, showHook). Neither is a hook's failure: status.hook
// names where the run stands, nothing of it was deleted, and the next look
// goes on from it.
func unrecorded(err error) bool {
	return errors.As(err, &errUnrecorded{}) || hooks.IsProgressError(err)
}

// recordPost is the recordDone of a post event (post-install, post-upgrade,
// post-delete): status.pendingHook is cleared at once, not with the status
// the sync ends with after the health wait, the tests and the
// registration, and status.preHooksDone names the event and the run until
// its hook-succeeded objects are deleted. A controller stopped after that
// finds the event done and deletes what is left of them (finishCleanUp);
// before, it retried the event, whose hook-succeeded objects were gone,
// and ran every hook again.
func (r *AddonReconciler) recordPost(s *scope, event string) recordDone {
	return func(ctx context.Context, run string, objs []capstanv1.ObjectRef) error {
		hash := ""
		if !deleteEvent(event) {
			hash = s.render.Hash
		}
		st := &s.addon.Status
		var pending []capstanv1.HookObject
		if p := st.PendingHook; p != nil {
			pending = p.Objects
		}
		st.Hook, st.PendingHook = nil, nil
		// NOTE: the objects the failed runs before this one left for it
		// are this run's, and in objs; any other is deleted later.
		st.PreHooksDone = withLeftOvers(s.doneRecord(event, hash, run, objs), pending)
		return r.checkpointStatus(ctx, s)
	}
}

// finishCleanUp deletes what is left of the hook-succeeded objects that
// status.preHooksDone names (its Objects): an event was recorded done
// before the runner deleted them, and the controller stopped in between,
// or a delete failed. It deletes those objects, not what this look's
// render holds: a hook the render dropped, renamed or no longer deletes
// on success was still made by that run. Each is deleted only while it
// carries its run, so it may be called again. The objects deleted (or
// gone) leave the record; once none is left the record keeps no run, and
// a post event's record goes: nothing else reads it. It returns the
// objects whose delete failed, and a *hooks.CleanUpError.
func (r *AddonReconciler) finishCleanUp(ctx context.Context, s *scope) ([]capstanv1.HookObject, error) {
	d := s.addon.Status.PreHooksDone
	if d == nil || len(d.Objects) == 0 {
		return nil, nil
	}
	var held, objs []capstanv1.HookObject
	for _, o := range d.Objects {
		if s.goesOnFrom(o.Run) {
			held = append(held, o)
		} else {
			objs = append(objs, o)
		}
	}
	if len(objs) == 0 {
		return nil, nil
	}
	logf.FromContext(ctx).Info("Deleting what is left of the hook-succeeded objects of a run whose end was recorded", "event", d.Event, "run", d.Run, "objects", len(objs))
	left, err := r.Hooks.CleanUp(ctx, hooks.Request{Applier: s.applier, Addon: s.addon, Event: d.Event,
		Timeout: r.hookTimeout(s), Keep: s.keepFrom(apply.Recreating)}, objs)
	s.addon.Status.PreHooksDone = withObjects(d, slices.Concat(held, left))
	return left, err
}

// goesOnFrom reports whether run is the run of hooks status.hook names, and
// this look may go on from it: the same render's run of a sync's event
// while the Addon is not being deleted, or the uninstall's run of a
// delete event. The hook-succeeded objects such a run left when the API
// server could not take its next hook for a moment (leaveForRun) show it
// that those hooks succeeded, and stay until it ends. A run this look does
// not go on from (a new render, or the uninstall of an Addon whose sync
// stopped) leaves them to be deleted.
func (s *scope) goesOnFrom(run string) bool {
	h := s.addon.Status.Hook
	if h == nil || h.Run == "" || h.Run != run {
		return false
	}
	deleting := !s.addon.DeletionTimestamp.IsZero()
	if deleteEvent(h.Event) {
		return deleting
	}
	return !deleting && s.render != nil && hookRun(s, h.Event) == run
}

// leaveForRun records in status.preHooksDone the hook-succeeded objects
// that a run of a pre event (or of the tests) left when the API server
// could not take its next hook for a moment (hooks.Transient). The retry
// goes on from the run, which status.hook goes on naming, and does not run
// those hooks again, so finishCleanUp holds them while a look may go on
// from it (goesOnFrom). A retry may never come: a new render is another
// run, which does not name them when it renamed or dropped the hooks, and
// the uninstall runs other events; either deletes them. A post event's
// are status.pendingHook's (keepForRetry).
func leaveForRun(s *scope, event, run string, err error) {
	left, _ := hooks.LeftForRetry(err)
	if !hooks.Transient(err) || postEvent(event) || len(left) == 0 {
		return
	}
	objs := make([]capstanv1.HookObject, len(left))
	for i, ref := range left {
		objs[i] = capstanv1.HookObject{ObjectRef: ref, Run: run}
	}
	s.addon.Status.PreHooksDone = withLeftOvers(s.addon.Status.PreHooksDone, objs)
}

// recordMade records, with the status.hook that shows hook p of a sync's
// event about to run, the hook-succeeded objects its run has made by then
// or is about to make: those of the hooks before it, which all succeeded
// in the run, and its own. A post event's go to status.pendingHook's
// objects, with those its failed runs kept for the retry; a pre event's
// to status.preHooksDone's. The run goes on holding them (goesOnFrom,
// keepRun) and deletes them once the event is done; a run that ends
// unfinished (a hook left running, the wait before PostSync hooks ended,
// a status write that failed) and that no look goes on from, because a
// change renders another run, an uninstall replaces it, or the render
// renames or drops the hook, has them deleted before the next hooks run
// (finishCleanUp): each only while it carries the run and has ended
// well. Without the record, a hook of the next run with the same name and
// no before-hook-creation would apply over the Job the old run left and
// read its success as its own, and a Pod hook whose spec changed could
// not be applied at all. Recorded in the write that names the hook
// before its object is made, the record is never behind what the run
// made, whatever stops it. Delete events are left to the uninstall's own
// record, tests make each hook anew (before-hook-creation), and SyncFail
// hooks run once.
func recordMade(s *scope, event string, hs []render.Hook, p capstanv1.HookProgress) {
	if p.Run == "" || !syncEvent(event) {
		return
	}
	refs := hooks.SucceededRefs(hs, event, p.ObjectRef)
	if len(refs) == 0 {
		return
	}
	objs := make([]capstanv1.HookObject, len(refs))
	for i, ref := range refs {
		objs[i] = capstanv1.HookObject{ObjectRef: ref, Run: p.Run}
	}
	st := &s.addon.Status
	if pd := st.PendingHook; postEvent(event) && pd != nil && pd.Event == event {
		st.PendingHook = withLeftOvers(pd, objs)
		return
	}
	st.PreHooksDone = withLeftOvers(st.PreHooksDone, objs)
}

// warnCleanUp says, in the log and in a Warning event, that the
// hook-succeeded objects left could not be deleted, and what comes of it.
// The delete's error is masked in both: an admission webhook's or a
// policy's refusal may quote the object it was asked to delete.
func (r *AddonReconciler) warnCleanUp(ctx context.Context, s *scope, left []capstanv1.HookObject, err error, then string) {
	refs := make([]string, len(left))
	for i, o := range left {
		refs[i] = o.Describe()
	}
	m := s.mask()
	logf.FromContext(ctx).Error(m.Error(err), "Deleting the hook-succeeded objects of a recorded run failed", "objects", refs)
	r.Recorder.Eventf(s.addon, nil, "Warning", "HookCleanUpFailed", "CleanUp", "Deleting %s, left by hooks that succeeded, failed: %s; %s.",
		truncate(strings.Join(refs, ", "), 400), truncate(m.String(err.Error()), 400), then)
}

// hookClash names the event, pre or post, one of whose hooks in this
// look's render makes an object of left, or is empty.
func (s *scope) hookClash(left []capstanv1.HookObject, pre, post string) string {
	keys := map[string]bool{}
	for _, o := range left {
		keys[o.Key()] = true
	}
	for _, event := range []string{pre, post} {
		if event == "" {
			continue
		}
		for _, h := range hooks.Select(s.hooks, event) {
			if keys[capstanv1.RefOf(h.Object).Key()] {
				return event
			}
		}
	}
	return ""
}

// withLeftOvers is the record d with objs to delete too, those it does not
// name already: all of them in a record of no event when d is nil.
func withLeftOvers(d *capstanv1.PendingHook, objs []capstanv1.HookObject) *capstanv1.PendingHook {
	if len(objs) == 0 {
		return d
	}
	nd := &capstanv1.PendingHook{}
	if d != nil {
		nd = d.DeepCopy()
	}
	for _, o := range objs {
		if !slices.Contains(nd.Objects, o) {
			nd.Objects = append(nd.Objects, o)
		}
	}
	return nd
}

// dropPending clears status.pendingHook, whose event no run goes on from
// now: the hook-succeeded objects its failed runs left for the retry
// (keepForRetry) go to status.preHooksDone, which a later look deletes
// (finishCleanUp).
func dropPending(st *capstanv1.AddonStatus) {
	if p := st.PendingHook; p != nil {
		st.PreHooksDone = withLeftOvers(st.PreHooksDone, p.Objects)
	}
	st.PendingHook = nil
}

// keepForRetry records in status.pendingHook the hook-succeeded objects
// that a failed run of its post event left for the retry
// (hooks.LeftForRetry: a hook that failed, or one that could not be read),
// with their run, and the hook at which that run ended (failed): the
// retry goes on from the run, runs none of the hooks before that one
// again, and deletes the objects once every hook has succeeded
// (recordPost), and a render that replaces the event has them deleted
// instead (recordApply).
func keepForRetry(s *scope, event, run string, err error) {
	left, ended := hooks.LeftForRetry(err)
	p := s.addon.Status.PendingHook
	if !ended || p == nil || p.Event != event {
		return
	}
	np := p.DeepCopy()
	// NOTE: a retry that rendered another run (a post-delete whose chart
	// moved on) goes on from none of that run's hooks: what they left is
	// deleted by a later look, and the record does not grow with each
	// failed retry.
	np.Objects = keepRun(&s.addon.Status, p.Objects, run)
	objs := make([]capstanv1.HookObject, len(left))
	for i, ref := range left {
		objs[i] = capstanv1.HookObject{ObjectRef: ref, Run: run}
	}
	np = withLeftOvers(np, objs)
	if np.Failed != nil && np.Failed.Run != run {
		np.Failed = nil
	}
	if h := s.addon.Status.Hook; h != nil && h.Event == event && h.Run == run {
		// NOTE: status.hook names a hook of a run only once every hook
		// before it has succeeded in that run, and still names the one
		// at which this run ended. The retry goes on from it without
		// running those again: their objects alone cannot show it once
		// the TTL controller has deleted a Job, or when no policy kept
		// them.
		np.Failed = &capstanv1.HookObject{ObjectRef: h.ObjectRef, Run: run}
	}
	if deleteEvent(event) {
		// NOTE: a record written with no run (by a Capstan before the
		// uninstall recorded it) takes the run that failed: the next
		// retry goes on from it.
		np.Run = run
	}
	s.addon.Status.PendingHook = np
}

// keepRun returns the objects of objs that run made, which a run going on
// from it keeps for its retry, and hands the others to
// status.preHooksDone, for a later look to delete: no run goes on from
// them.
func keepRun(st *capstanv1.AddonStatus, objs []capstanv1.HookObject, run string) []capstanv1.HookObject {
	var kept []capstanv1.HookObject
	for _, o := range objs {
		if o.Run == run {
			kept = append(kept, o)
		} else {
			st.PreHooksDone = withLeftOvers(st.PreHooksDone, []capstanv1.HookObject{o})
		}
	}
	return kept
}

// syncEvent reports whether event is one a sync runs, before or after
// its apply: pre-install, post-install, pre-upgrade or post-upgrade.
func syncEvent(event string) bool {
	for l, e := range hookEvents {
		if l != LifecycleDelete && (event == e[0] || event == e[1]) {
			return true
		}
	}
	return false
}

// postEvent reports whether event is one that runs after the apply (or
// the uninstall's deletes): a failure leaves it pending, and its retry
// goes on from the run that failed.
func postEvent(event string) bool {
	for _, e := range hookEvents {
		if event == e[1] {
			return true
		}
	}
	return false
}

// withObjects is the record d with objs still to delete: with none left,
// the record withoutRun makes.
func withObjects(d *capstanv1.PendingHook, objs []capstanv1.HookObject) *capstanv1.PendingHook {
	nd := *d
	nd.Objects = objs
	if len(objs) == 0 {
		return withoutRun(&nd)
	}
	return &nd
}

// withoutRun is the record d once the hook-succeeded objects of its run
// are deleted: the same record with no run, or none for a post-install or
// post-upgrade event, whose end status.pendingHook's absence records, or
// for a record that only kept objects (leftOver).
func withoutRun(d *capstanv1.PendingHook) *capstanv1.PendingHook {
	if d == nil {
		return nil
	}
	if d.Event == "" || d.Event == hookEvents[LifecycleInstall][1] || d.Event == hookEvents[LifecycleUpgrade][1] {
		return nil
	}
	return &capstanv1.PendingHook{Event: d.Event, Hash: d.Hash}
}

// runEvent runs the hooks of one event. With resume, this sync goes on
// from a run of the same event whose end was never recorded
// (status.pendingHook): a controller killed after a post hook's Job
// completed, or while it ran, or a post hook that failed. The hooks that
// succeeded in that run are not run again, and the one it was waiting for
// (status.hook) is waited for again; the others run as usual.
//
// done, when set, records the event done (recordDone) once every hook has
// succeeded and before the runner deletes those with hook-succeeded
// (hooks.Request.Done). A controller stopped before that write finds each
// hook's object succeeded in the run status.hook names, and one stopped
// after it finds the event done, with the run whose leftovers a later look
// deletes (finishCleanUp): either way no hook runs again. When done fails,
// status is as it was, nothing is deleted, and runEvent returns an
// errUnrecorded.
func (r *AddonReconciler) runEvent(ctx context.Context, s *scope, event string, resume bool, done recordDone) error {
	h := s.addon.Status.Hook
	if !s.hasHooks(event) {
		if h != nil && h.Event == event {
			// NOTE: a run this render does not go on with (the change
			// that waited for it renders no such hooks).
			s.addon.Status.Hook = nil
		}
		return nil
	}
	run := hookRun(s, event)
	if p := s.addon.Status.PendingHook; deleteEvent(event) && p != nil && p.Event == event && p.Run != "" {
		// NOTE: the run recorded as the uninstall's post-delete event
		// began: its retries go on from it once status.hook no longer
		// names it (a hook failed), whatever the source renders by then.
		run = p.Run
	}
	var waiting *capstanv1.ObjectRef
	var since time.Time
	var waitingUID types.UID
	var failed *capstanv1.ObjectRef
	if p := s.addon.Status.PendingHook; resume && p != nil && p.Event == event && p.Failed != nil && p.Failed.Run == run {
		ref := p.Failed.ObjectRef
		failed = &ref
	}
	if resume && h != nil && h.Event == event {
		ref := h.ObjectRef
		waiting, since = &ref, h.Since.Time
		if deleteEvent(event) && h.Run != "" {
			// NOTE: an uninstall renders its hooks again at each look, and
			// a source that moved meanwhile renders anew; the deletion is
			// one, and so is its run.
			run = h.Run
		}
		if h.Run == run {
			// NOTE: the Job or Pod a look left running (endedByHook); one
			// deleted since is the hook's failure (Deleted), not a hook to
			// run again. A change that renders anew is another run, which
			// runs its hooks as usual.
			waitingUID = h.UID
		}
	}
	hs := s.hooks
	// What the manifests mark to be kept is never deleted by a hook's
	// policies, as a prune or an uninstall leaves it (in the cluster
	// profile; in the restricted one no mark keeps an object).
	keep := s.keepFrom(apply.Recreating)
	if event == render.TestEvent {
		hs = testHooks(hs, testFilters(s.addon))
		// NOTE: a test's object is its run's: a new run deletes it
		// whatever its marks, so that an old run's result is never read
		// as its own.
		keep = apply.NoKeep
	}
	called, recorded := false, false
	var deleted []capstanv1.ObjectRef // what the runner deletes once done records the event
	var finish func(context.Context, []capstanv1.ObjectRef) error
	if done != nil {
		finish = func(ctx context.Context, objs []capstanv1.ObjectRef) error {
			called = true
			deleted = objs
			// Tests stop here, as a controller killed after the hooks
			// succeeded and before it recorded that would: status.hook
			// still names the last hook, and every hook's object is there.
			if err := r.stepHook(ctx, s, event+" succeeded"); err != nil {
				return errUnrecorded{err}
			}
			before := s.addon.Status.DeepCopy()
			if err := done(ctx, run, objs); err != nil {
				// NOTE: the status this reconcile ends with says what the
				// stored one says: status.hook names the run, whose
				// objects are all there.
				s.addon.Status = *before
				return errUnrecorded{err}
			}
			recorded = true
			// Tests stop here, as a controller killed after the record
			// and before the runner deleted the hook-succeeded objects
			// would: a later look finds the event done, and deletes them.
			return r.stepHook(ctx, s, event+" clean-up")
		}
	}
	err := r.Hooks.Run(ctx, hooks.Request{
		Applier: s.applier, Addon: s.addon, Event: event, Hooks: hs, Timeout: r.hookTimeout(s), Keep: keep, Done: finish,
		Progress: func(p capstanv1.HookProgress) error {
			p.Generation = s.addon.Generation
			if h := s.addon.Status.Hook; h != nil && h.ObjectRef == p.ObjectRef && h.Run == p.Run && h.Generation != 0 {
				p.Generation = h.Generation // the run goes on: it began then
			}
			recordMade(s, event, hs, p)
			return r.showHook(ctx, s, &p)
		},
		Run: run, Resume: resume, Waiting: waiting, WaitingSince: since, WaitingUID: waitingUID, Failed: failed, Yield: r.hookWait(event),
		// NOTE: a hook never deletes or applies over what another add-on
		// holds, as its objects never do (the ManagedByAnotherAddon gate).
		HeldBy: func(ctx context.Context, ref capstanv1.ObjectRef, live *unstructured.Unstructured) (string, error) {
			return r.heldBy(ctx, s, ref, live)
		},
		// NOTE: a failed post event is retried by a run that goes on from
		// this one (status.pendingHook): the hooks that succeeded keep
		// their objects until the event has succeeded, so the retry does
		// not run them again.
		KeepForRetry: postEvent(event),
		AwaitHealthy: func(ctx context.Context) error { return r.awaitCurrent(ctx, s, event) },
	})
	if err == nil && finish != nil && !called {
		// A HookRunner that does not call Done (a test's) ran them all.
		err = finish(ctx, nil)
	}
	if hooks.IsRunning(err) || err != nil && (ctx.Err() != nil || unrecorded(err)) {
		// NOTE: status.hook goes on naming the hook: the next look reads
		// it, and the run goes on from it once it has finished. So does
		// a run the controller's stop cut short: the hook it waited for
		// still runs, and must not be taken for ended. So does one whose
		// end could not be recorded: the next look finds every hook
		// succeeded, and records it.
		return err
	}
	keepForRetry(s, event, run, err)
	leaveForRun(s, event, run, err)
	if (hooks.IsReadError(err) || hooks.Transient(err)) && event != render.SyncFailEvent {
		// NOTE: no hook failed: the API server refused to read the one the
		// run waited for, which may still run (a migration), or could not
		// take the next one for a moment. status.hook goes on naming it,
		// as for a hook left running, so that the retry (with backoff)
		// goes on from the run; cleared, it would find no run to go on
		// from, and before-hook-creation would delete the Jobs of the
		// hooks that succeeded and run them anew.
		// SyncFail hooks are recorded as run whatever their end: no look
		// goes on from them.
		return err
	}
	if done == nil && err == nil {
		// Tests stop here, as a controller killed after the hooks
		// succeeded would.
		if err := r.stepHook(ctx, s, event+" succeeded"); err != nil {
			return err
		}
	}
	if d := s.addon.Status.PreHooksDone; recorded && err == nil && d != nil {
		// NOTE: the runner deleted the hook-succeeded objects of this run
		// that this render holds; the record keeps those of earlier runs
		// still to delete, and those this run kept for a retry under a
		// name this render no longer holds (a post-delete whose chart
		// moved on), which the runner never read.
		s.addon.Status.PreHooksDone = withObjects(d, slices.DeleteFunc(slices.Clone(d.Objects), func(o capstanv1.HookObject) bool {
			return o.Run == run && slices.ContainsFunc(deleted, func(ref capstanv1.ObjectRef) bool { return ref.Key() == o.Key() })
		}))
	}
	// NOTE: done cleared status.hook in the write that records the event
	// done. A status.hook cleared apart from that record would leave
	// neither after a stop between the two writes: the next sync would
	// find no run to go on from, and before-hook-creation would delete the
	// Completed migration Job and run it again.
	if cerr := r.showHook(ctx, s, nil); err == nil && errors.Is(cerr, errLeftShard) {
		// NOTE: another write failure is left to the write that ends the
		// reconcile, which clears status.hook too: until then it names a
		// hook that has ended, which the next look reads and never runs
		// again. An Addon that left the shard ends the sync here.
		return cerr
	}
	return err
}

// hookRun names one run of an event's hooks, for the runner to stamp on
// the hook objects. It holds the Addon's UID (an Addon made again under
// the same name is another release, whose post-install hooks run anew),
// the event, the render, and the newest revision in status.history (which
// the apply before the post hooks adds): the same render applied again
// later, as when a failed upgrade is rolled back to the values before it,
// is another run. A drift repair adds no revision, so a sync that repairs
// drift and then goes on from a post hook still running is the same run.
// An Addon with no history yet (applied by a Capstan without it) uses its
// last apply's time instead.
func hookRun(s *scope, event string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", s.addon.UID, event)
	if s.render != nil {
		h.Write([]byte(s.render.Hash))
	}
	if hist := s.addon.Status.History; len(hist) > 0 {
		fmt.Fprintf(h, "\nrevision %d", hist[0].Number)
	} else if t := s.addon.Status.LastAppliedTime; t != nil {
		// NOTE: status keeps whole seconds; so does the name.
		fmt.Fprintf(h, "\n%s", t.UTC().Format(time.RFC3339))
	}
	if event == render.TestEvent {
		// NOTE: each request is a run of its own: a resumed run must not
		// take an earlier run's test, kept by its policies, for its own.
		fmt.Fprintf(h, "\n%s", s.addon.Annotations[capstanv1.TestAnnotation])
		if key := testFiltersKey(testFilters(s.addon)); key != "" {
			// NOTE: other filters are another run: one resumed must not
			// take tests it never ran for passed.
			fmt.Fprintf(h, "\nfilters %s", key)
		}
	}
	return event + "/" + hex.EncodeToString(h.Sum(nil))[:16]
}

// deleteEvent reports whether event is one of an uninstall's.
func deleteEvent(event string) bool { return event == "pre-delete" || event == "post-delete" }

// continuesRun reports whether this sync goes on from a run of hooks that
// an earlier reconcile left running (status.hook): the same event of the
// same render, by the run's name, and the same generation of the Addon.
// Such a sync is one that began, and a person approved or a window let
// through: manual sync, the mass-prune approval and the windows do not
// hold it again (plan.State.Continuing), as they would not have held a
// sync that waited for its hook within one reconcile. Any change to the
// Addon since (suspend, manualSync, prune) makes it another sync, which
// the gates judge as any other.
func (s *scope) continuesRun() bool {
	h := s.addon.Status.Hook
	if h == nil || h.Run == "" || s.render == nil || h.Generation != s.addon.Generation {
		return false
	}
	pre, post := s.events()
	return (h.Event == pre || h.Event == post) && h.Event != "" && h.Run == hookRun(s, h.Event)
}

// endedByHook ends a reconcile whose run of hooks left a Job or Pod hook
// running (hooks.Running), holding no worker while it runs.
func (r *AddonReconciler) endedByHook(ctx context.Context, s *scope, err error) bool {
	var run *hooks.Running
	if !errors.As(err, &run) {
		return false
	}
	if h := s.addon.Status.Hook; h != nil && run.UID != "" && h.ObjectRef == run.Hook && h.Event == run.Event {
		// NOTE: recorded with the status this reconcile ends with: a later
		// look that finds another object, or none, knows the one this run
		// made was deleted while nobody waited for it (runEvent), and does
		// not make it again. Without it (that write failed), the look
		// cannot tell, and judges the hook by what it finds.
		nh := *h
		nh.UID = run.UID
		s.addon.Status.Hook = &nh
	}
	r.awaitHook(ctx, s, run.Event, run.Hook, run.Since, nil)
	return true
}

// awaitHook ends a reconcile waiting for a running hook: a change of its
// object (its Job's status) looks again at once, and the health poll
// bounds the wait. status.hook names it, and the look that finds it ended
// goes on with the run (runEvent). The add-on is Progressing while it
// waits (WaitingForHook), but for a test run that does not hold it
// (quietTests): a Synced add-on stays Synced while it is tested. readErr,
// when set, is why this look could not read the hook: the message says so,
// and what to fix if it lasts.
func (r *AddonReconciler) awaitHook(ctx context.Context, s *scope, event string, ref capstanv1.ObjectRef, since time.Time, readErr error) {
	s.found.hookWait = true
	kinds := []schema.GroupVersionKind{schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)}
	deleting := !s.addon.DeletionTimestamp.IsZero()
	changed := s.keepObserved && s.addon.Generation != s.addon.Status.ObservedGeneration
	what := "" // NOTE: no outcome of its own: the phase stays as it is
	if event != render.TestEvent || !quietTests(s) || deleting || changed {
		what = fmt.Sprintf("waiting for the %s hook %s to finish (running since %s)", event, ref.Describe(), since.UTC().Format(time.RFC3339))
		if readErr != nil {
			// NOTE: a look that cannot read the hook waits as for one that
			// runs, until spec.hookTimeout; without this, nothing in
			// status would say why the wait does not end.
			msg := s.mask().String(readErr.Error())
			switch {
			case apierrors.IsForbidden(readErr):
				what += fmt.Sprintf("; reading it was refused: %s; Capstan reads it again at each look — if this lasts, give %s get on %s in %s",
					msg, readerOf(r, s), resourceOf(s, ref), ref.Namespace)
			case apierrors.IsUnauthorized(readErr):
				what += fmt.Sprintf("; reading it was refused: %s; Capstan reads it again at each look — if this lasts, check the credentials of %s",
					msg, readerOf(r, s))
			default:
				what += fmt.Sprintf("; reading it failed: %s; Capstan reads it again at each look", msg)
			}
		}
		switch {
		case deleting && !deleteEvent(event):
			what += "; the Addon's deletion goes on once it has finished"
		case changed && !deleting:
			what += "; the change to the Addon is taken up once it has finished"
		}
	}
	r.awaitWith(ctx, s, what, kinds)
}

// readerOf names the identity that reads and applies the add-on's
// objects: the account a remote cluster's kubeconfig names, the
// impersonated add-ons account in the cluster profile, or the controller's
// own in the restricted profile.
func readerOf(r *AddonReconciler, s *scope) string {
	switch {
	case s.cluster != nil && s.cluster.server != "":
		return "the account spec.kubeConfig names"
	case s.profile == capstanv1.ProfileCluster:
		return "the add-ons account " + r.Config.AddonsUser()
	}
	return "the controller's account"
}

// resourceOf is how an RBAC rule names ref's kind: its resource, with its
// group, as the cluster's REST mapper maps it (the kind lowercased, with an
// s, when it cannot).
func resourceOf(s *scope, ref capstanv1.ObjectRef) string {
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	plural, _ := apimeta.UnsafeGuessKindToResource(gvk)
	gr := plural.GroupResource()
	if s.cluster != nil && s.cluster.mapper != nil {
		if m, err := s.cluster.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			gr = m.Resource.GroupResource()
		}
	}
	return gr.String()
}

// quietTests reports whether a run of the chart's tests leaves the add-on's
// phase as it is: one whose failure would not hold the add-on (no
// spec.test.enable, or ignoreFailures), or one only asked for of a render
// whose last run passed. A run that holds it keeps it from Synced until
// it has passed, as Flux's HelmRelease is not Ready before its tests; one
// asked for after a failure keeps a Failed add-on from reading Synced.
func quietTests(s *scope) bool {
	t := s.addon.Spec.Test
	if t == nil || !t.Enable || t.IgnoreFailures {
		return true
	}
	last := s.addon.Status.LastTest
	return last != nil && last.AppliedHash == s.addon.Status.AppliedHash && last.Result == capstanv1.TestSucceeded
}

// awaitRunningHook ends a look at an add-on whose Job or Pod hook, as
// status.hook names it, still runs within its timeout: the look reads only
// that object, renders and applies nothing, and a change to the Addon, or
// its deletion, waits until the hook has finished, as it would if the
// controller had waited within one reconcile. A hook that has finished, is
// gone, belongs to another run, is another object than the one the run
// made (status.hook.uid) or is past its timeout goes on to the pipeline,
// whose run reads how it ended, or fails it as deleted.
func (r *AddonReconciler) awaitRunningHook(ctx context.Context, s *scope) bool {
	h := s.addon.Status.Hook
	if h == nil || h.Run == "" || r.hookWait(h.Event) == 0 || time.Since(h.Since.Time) >= r.hookTimeout(s) {
		return false
	}
	if _, err := r.selectCluster(ctx, s); err != nil {
		return false
	}
	if leavesInventory(s, s.cluster) {
		// NOTE: the hook runs in the inventory's cluster, which the
		// deletion leaves as it is, not in the one selected (which may
		// not even answer: selectCluster did not check).
		return false
	}
	// The hook's changes wake the add-on from this cluster's watch cache
	// (knowsObject), after a restart too.
	r.verified.target(s.addon, s.cluster.inventoryCluster(), s.cluster.watched, s.applier)
	live, err := s.applier.Get(ctx, h.ObjectRef)
	if err == nil && (live == nil || live.GetDeletionTimestamp() != nil || live.GetAnnotations()[hooks.RunAnnotation] != h.Run ||
		h.UID != "" && live.GetUID() != h.UID) {
		return false
	}
	if err != nil {
		// NOTE: a read that fails says nothing of the hook, and the
		// pipeline must not take it for gone: a change that waits would
		// replace a migration that still runs. The next look reads again,
		// and the waiting message says why this one could not.
		logf.FromContext(ctx).Error(s.mask().Error(err), "Reading the running hook failed", "hook", h.Describe())
	} else if ended, failure := hooks.Ended(live); ended {
		if failure != "" && h.Generation != s.addon.Generation && r.Recorder != nil {
			// NOTE: the change that waited for it may render a run that
			// does not go on from this one, and would not say it failed.
			r.Recorder.Eventf(s.addon, nil, "Warning", "HookFailed", "Hook", "The %s hook %s failed while a change to the Addon waited for it: %s",
				h.Event, h.Describe(), truncate(s.mask().String(failure), 500))
		}
		return false
	}
	s.found.uninstalling = !s.addon.DeletionTimestamp.IsZero() && s.deletionPolicy() == capstanv1.DeletionDelete
	// NOTE: observedGeneration stays: a change that waits for the hook
	// has not been looked at yet.
	s.keepObserved = true
	r.awaitHook(ctx, s, h.Event, h.ObjectRef, h.Since.Time, err)
	return true
}

// hookWait is how long a reconcile waits for a Job or Pod hook of event
// before it frees its worker (hooks.Request.Yield). A folder's SyncFail
// hooks are waited for within the reconcile: they run once per render,
// recorded as soon as they end, from the path of a sync that failed.
func (r *AddonReconciler) hookWait(event string) time.Duration {
	if event == render.SyncFailEvent || r.Config.HookWait < 0 {
		return 0
	}
	return r.Config.HookWait
}

// showHook writes the hook about to run into status (status.hook) before
// the runner makes its object, so a long hook is visible while it runs,
// and a look after a stop goes on from it: it waits for the hook's Job
// rather than have before-hook-creation delete it and start it anew. A
// look that goes on waiting for the hook status already shows writes
// nothing. When the write fails (errLeftShard once the Addon has left this
// controller's shard), it returns the error, and the runner makes nothing
// of the hook: no hook object exists that status does not name. The
// status this reconcile ends with then names the hook the stored one
// names.
func (r *AddonReconciler) showHook(ctx context.Context, s *scope, p *capstanv1.HookProgress) error {
	h := s.addon.Status.Hook
	if p == nil && h == nil {
		return nil
	}
	if p != nil && h != nil && h.ObjectRef == p.ObjectRef && h.Event == p.Event && h.Run == p.Run && h.Since.Unix() == p.Since.Unix() && h.Generation == p.Generation && h.UID == p.UID {
		return nil
	}
	s.addon.Status.Hook = p
	if err := r.checkpointStatus(ctx, s); err != nil {
		if p != nil {
			s.addon.Status.Hook = h
		}
		return fmt.Errorf("writing status.hook: %w", err)
	}
	return nil
}
