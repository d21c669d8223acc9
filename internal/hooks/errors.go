package hooks

import (
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/render"
)

// Error is a hook that failed or did not finish in time. Its message names
// the hook (kind, namespace and name, event, weight and template), says
// what went wrong, and how to run it again. It never quotes a hook's
// output.
type Error struct {
	// Event is the hook event, such as pre-upgrade.
	Event string
	// Hook is the hook's object.
	Hook capstanv1.ObjectRef
	// Weight is the hook's weight.
	Weight int
	// Template is the chart template that rendered the hook.
	Template string
	// Reason is a CamelCase reason: the Job's Failed condition reason (such
	// as BackoffLimitExceeded or DeadlineExceeded), the pod's reason,
	// Timeout, or CreateFailed.
	Reason string
	// Message is the detail: the Job's condition message and how its pods
	// ended, or the API server's answer.
	Message string
	// Timeout is the per-hook limit, set when Reason is Timeout.
	Timeout time.Duration
	// Kept is set when the hook's object from an earlier run was kept,
	// because its delete policies lack before-hook-creation, so the earlier
	// result was read again, or, with ReasonCreateFailed, the API server
	// refused to change it in place to apply the hook over it.
	Kept bool
	// KeptBy, with Kept, says what kept the object though its policies
	// name before-hook-creation: its kind, which Capstan never deletes,
	// or a mark in its manifests, such as helm.sh/resource-policy: keep.
	KeptBy string
	// Left, with Request.KeepForRetry or for a hook the API server could
	// not take for a moment (Transient), are the objects of the hooks that
	// succeeded before this one that their hook-succeeded policy deletes
	// once the event has succeeded: left for the retry, which goes on from
	// the same run and does not run them again. The caller records them,
	// so that they are deleted when no retry goes on from the run.
	Left []capstanv1.ObjectRef
	// Err is the underlying error, if any.
	Err error
}

// ReasonTimeout is the Reason of a hook that did not finish in time.
const ReasonTimeout = "Timeout"

// ReasonCreateFailed is the Reason of a hook whose object could not be
// created, or whose earlier object could not be deleted.
const ReasonCreateFailed = "CreateFailed"

// ReasonDeleted is the Reason of a Job or Pod hook whose object was
// deleted before the runner read how it ended: by its
// ttlSecondsAfterFinished, a person or another controller. The hook may
// have done its work, so it is not run again at once.
const ReasonDeleted = "Deleted"

// ReasonDeleteFailed is the Reason of a hook that succeeded, but whose
// object its hook-succeeded policy could not delete.
const ReasonDeleteFailed = "DeleteFailed"

// ReasonOtherAddon is the Reason of a hook whose object of the same kind,
// namespace and name is another Addon's: its owner labels name that
// Addon, which holds it (Request.HeldBy). The hook neither deletes it
// (before-hook-creation) nor applies over it: an uninstall of the other
// would delete what this one made, and this one's policies what the other
// runs, as for an object (the ManagedByAnotherAddon gate).
const ReasonOtherAddon = "ManagedByAnotherAddon"

// ReasonNamespaceGone is the Reason of a pre-delete or post-delete hook
// whose namespace does not exist or is being deleted. A delete hook is
// never given a namespace of its own making, and the API server refuses
// any object in a namespace being deleted, so waiting cannot help: the
// controller goes on with the uninstall without its delete hooks
// (NamespaceGone).
const ReasonNamespaceGone = "NamespaceGone"

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s hook %s (weight %d", e.Event, e.Hook.Describe(), e.Weight)
	if e.Template != "" {
		fmt.Fprintf(&b, ", from %s", e.Template)
	}
	b.WriteString(") ")
	switch e.Reason {
	case ReasonTimeout:
		fmt.Fprintf(&b, "did not finish within the hook timeout of %s", e.Timeout)
		if e.Message != "" {
			b.WriteString(" (" + e.Message + ")")
		}
		b.WriteString("; make the hook finish sooner or raise spec.hookTimeout. ")
	case ReasonCreateFailed, ReasonNamespaceGone, ReasonOtherAddon:
		b.WriteString("could not be run: " + e.Message + ". ")
	case ReasonDeleteFailed:
		fmt.Fprintf(&b, "succeeded, but deleting it (policy %s) failed: %s. ", HookSucceeded, e.Message)
	case ReasonDeleted:
		b.WriteString("was deleted before Capstan read how it ended")
		if e.Message != "" {
			b.WriteString(" (" + e.Message + ")")
		}
		b.WriteString("; it may have done its work, so it is not run again at once: check what it did, and give a Job hook a ttlSecondsAfterFinished long enough to be read. ")
	default:
		b.WriteString("failed: " + e.Reason)
		if e.Message != "" {
			b.WriteString(": " + e.Message)
		}
		b.WriteString(". Fix the chart or its values. ")
	}
	switch {
	case e.transient():
		// NOTE: the API server did not take it; nothing was applied over.
	case e.Kept && e.KeptBy != "":
		fmt.Fprintf(&b, "Its object from an earlier run was kept and %s, not deleted by its %s policy (kept by %s); delete %s to run it anew. ", e.keptHow(), BeforeHookCreation, e.KeptBy, e.Hook.Describe())
	case e.Kept:
		fmt.Fprintf(&b, "Its object from an earlier run was kept and %s, because its delete policies lack %s; delete %s to run it anew, or add that policy. ", e.keptHow(), BeforeHookCreation, e.Hook.Describe())
	}
	if e.Event == render.TestEvent {
		// NOTE: tests run when asked; the controller says how to ask.
		return strings.TrimSpace(b.String())
	}
	if e.Event == render.SyncFailEvent {
		// NOTE: a render's SyncFail hooks run once, whatever their end.
		b.WriteString("It runs again only when another render fails.")
		return b.String()
	}
	switch {
	case e.transient():
		b.WriteString("The API server could not take it for a moment, so no hook failed: Capstan tries again with backoff, and the run goes on from this hook; the hooks that succeeded before it do not run again.")
		return b.String()
	case e.Kept && e.Reason == ReasonCreateFailed:
		// NOTE: the API server refuses to apply this hook over the object
		// kept, and refuses it again at each sync while it is there.
		b.WriteString("Until then, each sync tries it again and fails the same way.")
		return b.String()
	}
	b.WriteString("The next sync runs the hook again; to retry at once, raise spec.syncRequest (with manualSync, approve the plan instead: `capstan addon sync`).")
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// keptHow says what became of a kept object: read again for its result,
// or, when the hook could not be made, applied over.
func (e *Error) keptHow() string {
	if e.Reason == ReasonCreateFailed {
		return "applied over"
	}
	return "read again"
}

// transient reports whether the hook could not be made only because the
// API server could not take it for a moment: overloaded (429), timing
// out, failing (5xx), in conflict (an object still being deleted), or
// out of reach. It did not run, and nothing is wrong with it.
func (e *Error) transient() bool {
	if e.Reason != ReasonCreateFailed || e.Err == nil {
		return false
	}
	// NOTE: a conflict is an earlier object of the hook still being
	// deleted, which goes in a moment.
	return apply.Transient(e.Err) || apierrors.IsConflict(e.Err)
}

// Transient reports whether err is, or wraps, a hook that could not be
// made only because the API server could not take it for a moment
// (Error.transient). No hook failed: the caller retries it with backoff,
// and the run that goes on from this one (Request.Resume, with
// Request.Waiting set to the hook) does not run the hooks that succeeded
// before it again, whose objects Run leaves for it.
func Transient(err error) bool {
	var he *Error
	return errors.As(err, &he) && he.transient()
}

// NoHookFailed says, for a hook the API server could not take for a
// moment, that no hook failed: a caller that wraps a hook's failure
// leaves this error as it is.
func (e *Error) NoHookFailed() bool { return e.transient() }

// ended reports whether the hook ran and ended badly: it failed, did not
// finish within its timeout, or its object was deleted before it was read
// finished. A hook that could not be made or read (CreateFailed), whose
// namespace is gone, whose object is another Addon's, or whose object its
// hook-succeeded policy could not delete did not fail as a hook: its
// hook-failed policy leaves it.
func (e *Error) ended() bool {
	switch e.Reason {
	case ReasonCreateFailed, ReasonNamespaceGone, ReasonOtherAddon, ReasonDeleteFailed:
		return false
	}
	return true
}

// IsHookError reports whether err is, or wraps, a hook that failed or
// timed out. The controller can treat it as a failure a person must look
// at, rather than retrying it at once.
func IsHookError(err error) bool {
	var he *Error
	return errors.As(err, &he)
}

// ReadError is a run that stopped because a hook's object could not be
// read: the one it waited for, whose read the API server refused
// (Forbidden, Unauthorized) or answered with what is no object of the
// hook's kind, or, in a run that goes on from a stopped one
// (Request.Resume), an object that run may have left, whose read failed
// in any way. That says nothing of how the hook ends, and a migration Job
// may still run: the hook is left as it is, its hook-failed policy does
// not delete it, and a run that goes on from this one (Request.Resume,
// with Request.Waiting set to Hook) reads it again. It is no hook's
// failure. Err is the read's error, so that the API server's answer is
// read through it (apierrors.IsForbidden).
type ReadError struct {
	// Event is the hook event, such as post-install.
	Event string
	// Hook is the hook that could not be read.
	Hook capstanv1.ObjectRef
	// Left, with Request.KeepForRetry, are the objects of the hooks that
	// succeeded before this one that their hook-succeeded policy deletes
	// once the event has succeeded, as in Error.Left: left for the run
	// that goes on from this one, which does not run them again.
	Left []capstanv1.ObjectRef
	// Err is the read's error.
	Err error
}

func (e *ReadError) Error() string {
	return fmt.Sprintf("the %s hook %s could not be read: %v; it did not fail and may still run, so it is left as it is, and the next look reads it again",
		e.Event, e.Hook.Describe(), e.Err)
}

func (e *ReadError) Unwrap() error { return e.Err }

// NoHookFailed says that no hook failed: a caller that wraps a hook's
// failure leaves this error as it is.
func (e *ReadError) NoHookFailed() bool { return true }

// IsReadError reports whether err is, or wraps, a *ReadError.
func IsReadError(err error) bool {
	var e *ReadError
	return errors.As(err, &e)
}

// LeftForRetry returns the objects that a run with Request.KeepForRetry,
// or one a hook the API server could not take for a moment stopped, left
// for the run that goes on from it (Error.Left, ReadError.Left), and
// whether err ended such a run: a hook that failed, or one that could not
// be read.
func LeftForRetry(err error) ([]capstanv1.ObjectRef, bool) {
	var he *Error
	if errors.As(err, &he) {
		return he.Left, true
	}
	var re *ReadError
	if errors.As(err, &re) {
		return re.Left, true
	}
	return nil, false
}

// NamespaceGone reports whether err is, or wraps, a delete hook that was
// not run because its namespace does not exist or is being deleted, and
// says which (ReasonNamespaceGone).
func NamespaceGone(err error) (string, bool) {
	var he *Error
	if !errors.As(err, &he) || he.Reason != ReasonNamespaceGone {
		return "", false
	}
	return he.Message, true
}

// namespaceGone says that the namespace of a delete hook does not exist
// or is being deleted: "the namespace NAME is being deleted".
type namespaceGone string

func (e namespaceGone) Error() string { return string(e) }

// deleteEvent reports whether event is one of an uninstall.
func deleteEvent(event string) bool { return event == "pre-delete" || event == "post-delete" }

// Running is what Run returns when a Job or Pod hook still runs after
// Request.Yield: the hook is left running, and nothing of the run is
// cleaned up. A run that resumes with Waiting set to Hook goes on from it.
type Running struct {
	// Event is the hook event.
	Event string
	// Hook is the hook that still runs.
	Hook capstanv1.ObjectRef
	// Since is when it started.
	Since time.Time
	// UID is the UID of the hook's object as the run last read it, or
	// empty if no read answered: the caller records it (status.hook), and
	// the run that goes on passes it as Request.WaitingUID.
	UID types.UID
}

func (e *Running) Error() string {
	return fmt.Sprintf("the %s hook %s still runs (since %s)", e.Event, e.Hook.Describe(), e.Since.UTC().Format(time.RFC3339))
}

// IsRunning reports whether err says a hook was left running
// (Request.Yield).
func IsRunning(err error) bool {
	var r *Running
	return errors.As(err, &r)
}

// CleanUpError is a delete that failed after an event's hooks all
// succeeded and the event was recorded done (Request.Done): no hook of
// the event runs again, and the next sync deletes the object. It is no
// hook's failure.
type CleanUpError struct {
	// Event is the hook event, such as post-upgrade.
	Event string
	// Object is the hook-succeeded object whose delete failed.
	Object capstanv1.ObjectRef
	// Err is the delete's error.
	Err error
}

func (e *CleanUpError) Error() string {
	what := "the " + e.Event + " hooks"
	if e.Event == "" {
		what = "the hooks of an event"
	}
	return fmt.Sprintf("%s all succeeded and are recorded done; deleting %s (policy %s) failed: %v; no hook runs again, and it is deleted once it can be",
		what, e.Object.Describe(), HookSucceeded, e.Err)
}

func (e *CleanUpError) Unwrap() error { return e.Err }

// IsCleanUpError reports whether err is a *CleanUpError.
func IsCleanUpError(err error) bool {
	var e *CleanUpError
	return errors.As(err, &e)
}

// HooksRecorded says that the event's hooks succeeded and are recorded
// done: a caller that wraps a hook's failure leaves this error as it is.
func (e *CleanUpError) HooksRecorded() bool { return true }

// ProgressError is a run that stopped before a hook started, because
// Request.Progress failed: the caller could not record the hook it was
// about to start. Nothing of that hook was made or deleted, and nothing of
// the run was cleaned up. It is no hook's failure: the run goes on from
// where it stands at a later look.
type ProgressError struct {
	// Event is the hook event, such as pre-upgrade.
	Event string
	// Hook is the hook that was not started.
	Hook capstanv1.ObjectRef
	// Err is Request.Progress's error.
	Err error
}

func (e *ProgressError) Error() string {
	return fmt.Sprintf("the %s hook %s was not run: recording it first failed (%v); nothing of it was made or deleted, and the next look goes on from there",
		e.Event, e.Hook.Describe(), e.Err)
}

func (e *ProgressError) Unwrap() error { return e.Err }

// IsProgressError reports whether err is, or wraps, a *ProgressError.
func IsProgressError(err error) bool {
	var e *ProgressError
	return errors.As(err, &e)
}

// NoHookFailed says that no hook failed: a caller that wraps a hook's
// failure leaves this error as it is.
func (e *ProgressError) NoHookFailed() bool { return true }
