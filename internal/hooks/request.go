package hooks

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/render"
)

// Request is one event's hooks to run.
type Request struct {
	// Applier applies and deletes as the add-on's identity.
	Applier *apply.Applier
	// Addon is the add-on the hooks belong to.
	Addon *capstanv1.Addon
	// Event is the hook event, such as pre-install.
	Event string
	// Hooks are every hook of the render, prepared like the other objects
	// (namespace, labels); the runner runs those of Event.
	Hooks []render.Hook
	// Keep is the deletion whose marks keep a hook's object from the
	// deletes its policies ask for (apply.KeptBy): an object that
	// helm.sh/resource-policy: keep, or Flux's or Argo CD's mark, keeps is
	// never deleted by before-hook-creation, hook-succeeded or
	// hook-failed, and is applied over instead of created anew. The
	// controller passes apply.Recreating, which any of the marks keeps
	// from, in the cluster profile, and apply.NoKeep, the zero value, in
	// the restricted one, where no mark keeps an object.
	Keep apply.Deletion
	// HeldBy names, as "namespace/name", another Addon that holds live, the
	// object of the hook ref found before the hook is made, whose owner
	// labels name that Addon: the controller reads whether it still
	// exists, targets the same cluster and holds the object in its
	// inventory. "" lets the hook delete or apply over it, as an object
	// nothing holds. Such a hook is refused (ReasonOtherAddon). When
	// nil, the owner labels alone name the Addon that holds it.
	HeldBy func(ctx context.Context, ref capstanv1.ObjectRef, live *unstructured.Unstructured) (string, error)
	// Timeout bounds each hook; zero means DefaultTimeout.
	Timeout time.Duration
	// Progress is called when a hook starts, before anything of it is
	// made or deleted, so status can show it. When it fails, the run stops
	// there with a *ProgressError: nothing of that hook is made, and no
	// object of the run is deleted. The caller records the hook there
	// (status.hook), so that a run that goes on after a stop knows the
	// hook's object is its own; one it could not record must not be made.
	Progress func(capstanv1.HookProgress) error
	// Run names this run of the event's hooks. Every hook object is
	// stamped with it (RunAnnotation), so that a run that goes on from a
	// stopped one tells its own objects from those of earlier runs.
	Run string
	// Resume is set when this run goes on from one that stopped before its
	// end was recorded, such as a controller killed while a post event
	// ran: a hook whose object carries Run and succeeded is not run again,
	// and the hook the stopped run was waiting for (Waiting), if its object
	// carries Run and still runs, is waited for again rather than started
	// anew. Any other hook runs as usual.
	Resume bool
	// KeepForRetry is set when a failure leaves the event pending, to be
	// retried by a run that goes on from this one (Resume, the same Run):
	// a post event, whose objects stay applied. The hook-succeeded objects
	// of the hooks that succeeded before the one that failed are then left
	// where they are, not deleted as Helm deletes them: they show the
	// retry that those hooks succeeded in this run, so it does not run
	// them again. The *Error names them (Error.Left), and so does the
	// *ReadError of a hook that could not be read (ReadError.Left), for the
	// caller to record; once every hook has succeeded, Done is given them
	// with the others, and they are deleted then. It needs Run.
	KeepForRetry bool
	// Waiting is the hook the stopped run was waiting for when it stopped,
	// as status.hook showed it; nil when none.
	Waiting *capstanv1.ObjectRef
	// WaitingUID is the UID of the object of the hook named by Waiting, as
	// status.hook recorded it when a run left the hook running (Running.UID);
	// empty when none was recorded. A recorded UID shows that this run made
	// that object, so every hook before it succeeded; an object gone since,
	// or replaced by another, was deleted while nobody waited for it, and
	// the hook fails with ReasonDeleted rather than being run again.
	WaitingUID types.UID
	// Failed, with Resume, is the hook at which the run this one goes on
	// from ended without succeeding, as the caller recorded it
	// (status.pendingHook.failed): a hook that failed, or one that could
	// not be made or read. Hooks run one at a time and a failure ends the
	// run, so every hook before it succeeded in Run, and none of them runs
	// again, even once its object is gone (a Job's ttlSecondsAfterFinished)
	// or its policies never deleted it on success, which the object alone
	// could not show. nil when none was recorded.
	Failed *capstanv1.ObjectRef
	// WaitingSince is when the hook named by Waiting started, as
	// status.hook showed it: its timeout counts from then, and it is
	// reported with that start again.
	WaitingSince time.Time
	// Yield, when positive, bounds how long this run waits for a Job or
	// Pod hook that still runs: once it has waited that long, it leaves
	// the hook running and returns a *Running error. A later run with
	// Resume and Waiting set to that hook goes on waiting for it, so
	// that the caller holds nothing while a hook runs for minutes. Zero
	// waits until the hook finishes or times out.
	Yield time.Duration
	// AwaitHealthy, when set, is called once, before the first hook that
	// waits for the applied objects (render.Hook.AwaitsHealthy), and returns
	// when they are all Current; its error ends the run, with no hook of
	// the rest run.
	AwaitHealthy func(context.Context) error
	// Done, when set, is called once every hook of the event has
	// succeeded, before the hooks with hook-succeeded are deleted, with
	// their objects in the order they are deleted: the caller records
	// there that the event is done, and those objects, of the run Run, as
	// still to delete. A caller stopped after that record finds the event
	// done and deletes what is left of them (CleanUp); one stopped before
	// it finds each hook's object, and a resumed run skips them. When Done
	// fails, nothing is deleted and Run returns its error; when a delete
	// after it fails, Run returns a *CleanUpError.
	Done func(ctx context.Context, objects []capstanv1.ObjectRef) error
}

// progress reports p through Progress, if set, and returns a
// *ProgressError when that fails.
func (req Request) progress(p capstanv1.HookProgress) error {
	if req.Progress == nil {
		return nil
	}
	if err := req.Progress(p); err != nil {
		return &ProgressError{Event: p.Event, Hook: p.ObjectRef, Err: err}
	}
	return nil
}

// RunAnnotation, on a hook's object, is the Run of the request that made
// it.
const RunAnnotation = "capstan.dev/hook-run"
