package controller

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/source"
)

// findings are the facts the steps found that decide how a reconcile ends.
// Steps record facts here and never set the phase themselves: outcomeOf
// turns the findings and the error into the one outcome.
type findings struct {
	// paused: the paused annotation froze the add-on.
	paused bool
	// uninstalling: the Delete policy is removing the software.
	uninstalling bool
	// hooksRefused says why the uninstall runs none of its delete hooks
	// (deleteHooks): the guardrails they break, or the chart's signature
	// that failed. It reads after "since".
	hooksRefused string
	// foreground: a restricted Addon deleted with foreground propagation,
	// whose owned objects the garbage collector deleted at once
	// (foregroundNote).
	foreground bool
	// profileChanged says why the sync of an add-on installed under the
	// cluster profile, and restricted now, is held (checkProfile).
	profileChanged *hold
	// gated: the gates stopped the plan; verdict says why.
	gated   bool
	verdict plan.Verdict
	// driftWait is how long a fought drift of driftFought waits.
	driftWait   time.Duration
	driftFought capstanv1.ObjectRef
	// waitingFor says which workload is not ready yet.
	waitingFor string
	// hookWait is set when the reconcile ends while a Job or Pod hook
	// runs (awaitHook): a change of the hook's object looks again at once.
	hookWait bool
	// degraded names the objects that are no longer Current, of an
	// add-on that was Synced with nothing applied since (checkHealth).
	degraded string
	// lapsing says which objects of such an add-on are in progress, and
	// until when they may be before it is Degraded: it stays Synced
	// meanwhile (checkHealth, lapseOf).
	lapsing string
	// health is this reconcile's look at the health of what the add-on
	// runs, for the Healthy condition; nil when it made none.
	health *judgement
	// signature says why the chart's signature stopped the sync (at an
	// uninstall, hooksRefused says it).
	signature *hold
	// dependency says why the add-on waits on spec.dependsOn.
	dependency *hold
	// dependents names the add-ons a removal with uninstall waits for;
	// dependentsStay says that one of them is not being removed, and
	// dependentsStuck names those being removed whose removal is Stalled.
	dependents      []string
	dependentsStay  bool
	dependentsStuck []string
	// held names what the prune did not delete since its manifest asks
	// for a confirmation (Prune=confirm) that the approved plan lacked, or
	// since it is not the object the plan showed (apply.Deleting.Planned).
	held []capstanv1.ObjectRef
	// healthy: every workload is ready. applied says whether this sync
	// applied the plan, or found nothing to change.
	healthy bool
	applied bool
}

// outcomeOf decides how a reconcile ended, in one place: an error first,
// then what the steps found, in the order the pipeline finds it. stage is
// the step that ran last, for a failure's reason. An empty outcome writes
// no status (an Addon that is gone).
func outcomeOf(f findings, stage string, err error) outcome {
	o := decide(f, stage, err)
	if f.foreground && o.Phase == capstanv1.PhaseDeleting {
		o.Message = strings.TrimSuffix(o.Message, ".") + ". " + foregroundNote
	}
	return o
}

// decide is outcomeOf before the notes every outcome of its phase carries.
func decide(f findings, stage string, err error) outcome {
	var retried *plan.DryRunError
	if errors.As(err, &retried) && classify(err) == classTransient {
		// NOTE: within its grace (plan.DryRunGrace), a dry run the API
		// server could not take is no failure of the add-on: it is
		// Progressing, retried with backoff, with no Warning event and no
		// incident, as Argo CD and Flux show a retry. Once the grace ends
		// the plan records it as the object's refusal (DryRunFailed).
		return outcome{Phase: capstanv1.PhaseProgressing, Reason: ReasonDryRunRetrying, Message: retried.Retrying()}
	}
	var applyRetried *applyRetry
	if errors.As(err, &applyRetried) && classify(err) == classTransient {
		// NOTE: as a dry run's: an apply the API server could not take
		// for a moment (a webhook whose pod restarts since the dry run
		// passed) is Progressing within its grace, and the failure it
		// is (ApplyFailed) once the grace ends. err's message is the
		// masked one.
		return outcome{Phase: capstanv1.PhaseProgressing, Reason: ReasonApplyRetrying, Message: applyRetried.retrying(err.Error())}
	}
	if err != nil {
		reason := "Failed"
		if stage != "" {
			reason = stage + "Failed"
		}
		return outcome{Phase: capstanv1.PhaseFailed, Reason: reason, Message: err.Error(), Stalled: classify(err) == classTerminal}
	}
	switch {
	case f.paused && f.profileChanged != nil:
		return outcome{Phase: capstanv1.PhaseBlocked, Reason: f.profileChanged.reason, Stalled: true,
			Message: f.profileChanged.message + " It is paused as well (the annotation " + capstanv1.PausedAnnotation + " is \"true\"): nothing is fetched, rendered or applied, and it is still held once the annotation is removed."}
	case f.paused:
		return outcome{Phase: capstanv1.PhasePaused, Reason: "Paused",
			Message: "The annotation " + capstanv1.PausedAnnotation + " is \"true\": nothing is fetched, rendered or applied until it is removed."}
	case len(f.dependents) > 0 && f.dependentsStay:
		// NOTE: Stalled, since an add-on that is not being removed stays
		// until a person removes it: `capstan addon remove` ends its wait.
		return outcome{Phase: capstanv1.PhaseDeleting, Reason: ReasonWaitingForDependents, Stalled: true,
			Message: "the uninstall waits until no add-on depends on this one: remove " + strings.Join(f.dependents, ", ") + " first, or with it"}
	case len(f.dependents) > 0 && len(f.dependentsStuck) > 0:
		// NOTE: as Stalled as theirs: each waits for a person, and
		// `capstan addon remove` ends its wait here rather than wait for
		// ever.
		return outcome{Phase: capstanv1.PhaseDeleting, Reason: ReasonWaitingForDependents, Stalled: true,
			Message: "the uninstall waits until the add-ons that depend on this one are gone, and the removal of " + strings.Join(f.dependentsStuck, ", ") + " is stuck: see its status"}
	case len(f.dependents) > 0:
		return outcome{Phase: capstanv1.PhaseDeleting, Reason: ReasonWaitingForDependents,
			Message: "the uninstall waits until the add-ons that depend on this one, being removed too, are gone: " + strings.Join(f.dependents, ", ")}
	case f.uninstalling && f.hooksRefused != "" && f.waitingFor != "":
		return outcome{Phase: capstanv1.PhaseDeleting, Reason: reasonUninstalling,
			Message: "Uninstalling: " + f.waitingFor + ". The delete hooks are not run, since " + f.hooksRefused + "."}
	case f.uninstalling && f.hooksRefused != "":
		return outcome{Phase: capstanv1.PhaseDeleting, Reason: reasonUninstalling,
			Message: "Deleting the inventory without the delete hooks, as helm uninstall --no-hooks would, since " + f.hooksRefused + "."}
	case f.uninstalling && f.waitingFor != "":
		return outcome{Phase: capstanv1.PhaseDeleting, Reason: reasonUninstalling, Message: "Uninstalling: " + f.waitingFor + "."}
	case f.uninstalling:
		return outcome{Phase: capstanv1.PhaseDeleting, Reason: reasonUninstalling, Message: "Running pre-delete hooks and deleting the inventory."}
	case f.profileChanged != nil:
		return outcome{Phase: capstanv1.PhaseBlocked, Reason: f.profileChanged.reason, Message: f.profileChanged.message, Stalled: true}
	case f.gated:
		return outcome{Phase: f.verdict.Phase, Reason: f.verdict.Reason, Message: f.verdict.Message,
			Stalled: f.verdict.Phase == capstanv1.PhaseBlocked || f.verdict.Phase == capstanv1.PhaseFailed}
	case f.signature != nil:
		return outcome{Phase: capstanv1.PhaseBlocked, Reason: f.signature.reason, Message: f.signature.message, Stalled: true}
	case f.dependency != nil && f.dependency.blocked:
		return outcome{Phase: capstanv1.PhaseBlocked, Reason: f.dependency.reason, Message: f.dependency.message, Stalled: true}
	case f.dependency != nil:
		return outcome{Phase: capstanv1.PhaseProgressing, Reason: f.dependency.reason, Message: f.dependency.message}
	case f.driftWait > 0:
		return outcome{Phase: capstanv1.PhaseOutOfSync, Reason: reasonDriftFought,
			Message: fmt.Sprintf("%s changed behind Capstan's back again, soon after its drift was undone; another controller may own a field the chart sets. The drift is undone in %s. To stop the fight, leave that field out of the chart; to undo it now, raise spec.syncRequest.",
				f.driftFought.Describe(), f.driftWait)}
	case len(f.held) > 0:
		return outcome{Phase: capstanv1.PhaseOutOfSync, Reason: reasonPruneHeld, Message: heldMessage(f.held)}
	case f.degraded != "":
		return outcome{Phase: capstanv1.PhaseDegraded, Reason: reasonDegraded,
			Message: "Applied, and healthy until now: " + f.degraded + ". Nothing was changed by Capstan since; the objects are as the render asks."}
	case f.lapsing != "":
		// NOTE: Synced, the reason unchanged: an autoscale or a rollout
		// restart is no transition, so it sends no event and no
		// notification; the Healthy condition says what moves.
		return outcome{Phase: capstanv1.PhaseSynced, Reason: "Synced", Message: f.lapsing}
	case f.hookWait && f.waitingFor != "":
		return outcome{Phase: capstanv1.PhaseProgressing, Reason: reasonWaitingForHook, Message: f.waitingFor}
	case f.waitingFor != "":
		return outcome{Phase: capstanv1.PhaseProgressing, Reason: reasonWaitingForWorkloads, Message: f.waitingFor}
	case f.healthy && f.applied:
		return outcome{Phase: capstanv1.PhaseSynced, Reason: "Synced", Message: "Applied and healthy."}
	case f.healthy:
		return outcome{Phase: capstanv1.PhaseSynced, Reason: "Synced", Message: "In sync: nothing to change."}
	}
	return outcome{}
}

// heldMessage says what a sync's prune left for a confirmation.
func heldMessage(held []capstanv1.ObjectRef) string {
	names := describeAll(held)
	if len(names) > 5 {
		names = append(names[:5:5], fmt.Sprintf("and %d more", len(names)-5))
	}
	return fmt.Sprintf("Applied, but the prune left %d object(s) running: %s. An object among them was marked argocd.argoproj.io/sync-options: Prune=confirm after the plan was approved, or is not the one the plan showed (deleted and created anew under its name since); with it stay the waves the prune deletes after it. The next plan shows their delete, and asks for a confirmation where one is needed.",
		len(held), strings.Join(names, ", "))
}

// reasonPruneHeld is the Ready reason of a sync whose prune left what a
// person must confirm first. It is not the plan's PruneNeedsApproval, so
// that the plan after it, which asks for the approval, is a transition of
// its own: an event and a notification that say how to approve.
const reasonPruneHeld = "PruneHeld"

// ReasonWaitingForDependents is the Ready reason of an add-on whose
// uninstall waits until no add-on depends on it. It is Stalled when one of
// them is not being removed, which only a person moves on, so `capstan
// addon remove` stops waiting on it then; dependents being removed leave
// on their own, and are waited for.
const ReasonWaitingForDependents = "WaitingForDependents"

// ReasonDryRunRetrying is the Reconciling reason of an add-on whose dry
// run the API server could not take for a moment (a timeout, a 429, a 500
// or 503, a webhook it could not call): it is retried with backoff, and is
// DryRunFailed only once it has gone on failing for its grace.
const ReasonDryRunRetrying = "DryRunRetrying"

// ReasonApplyRetrying is the Reconciling reason of an add-on whose apply
// the API server could not take for a moment, although its dry run
// passed (a webhook it could not call, a timeout, a 429, a 500 or 503):
// it is retried with backoff, and is ApplyFailed only once it has gone on
// failing for its grace (plan.DryRunGrace, plan.ApplyGraceKey).
const ReasonApplyRetrying = "ApplyRetrying"

// reasonUninstalling is the Reconciling reason while the uninstall runs,
// or waits for what a wave deleted to be gone.
const reasonUninstalling = "Uninstalling"

// reasonWaitingForWorkloads is the Reconciling reason while applied
// workloads roll out.
const reasonWaitingForWorkloads = "WaitingForWorkloads"

// reasonWaitingForHook is the Reconciling reason while a Job or Pod hook
// runs and no reconcile waits for it (awaitHook).
const reasonWaitingForHook = "WaitingForHook"

// reasonDegraded is the Ready reason of a Degraded add-on.
const reasonDegraded = "Degraded"

// errClass is how a reconcile's error is handled.
type errClass int

const (
	// classTransient is retried with backoff.
	classTransient errClass = iota
	// classTerminal is for a person to fix: the add-on is Stalled and
	// waits for a change or the resync, without backoff.
	classTerminal
)

// terminal marks an error that a step judged a person must fix, where the
// error's type alone cannot say so (a credentials Secret that is missing).
type terminal struct{ error }

func (t terminal) Unwrap() error { return t.error }

// terminalErrors are, in one table, the errors only a person can fix. Any
// other error is transient.
var terminalErrors = []struct {
	what string
	is   func(error) bool
}{
	{"marked terminal by its step", func(err error) bool { var t terminal; return errors.As(err, &t) }},
	{"a spec field wrong in itself (a version that is no version or range)", func(err error) bool { var e *source.SpecError; return errors.As(err, &e) }},
	{"a chart archive that does not match its digest pin", func(err error) bool { var e *source.DigestMismatchError; return errors.As(err, &e) }},
	{"a broken or oversized archive", func(err error) bool { var e *source.ArchiveError; return errors.As(err, &e) }},
	{"a source that answers a client error (not 408 or 429)", func(err error) bool {
		var e *source.FetchError
		return errors.As(err, &e) && e.Status >= 400 && e.Status < 500 && e.Status != 408 && e.Status != 429
	}},
	{"a hook that failed, unless the API server only could not take it for a moment", func(err error) bool {
		return hooks.IsHookError(err) && !transientHookError(err)
	}},
}

// classify says how err is handled.
func classify(err error) errClass {
	if unrecorded(err) {
		// NOTE: a status write stopped a run of hooks (SyncFail hooks
		// after a terminal failure, say): the next look goes on from it
		// soon, with backoff, not at the resync.
		return classTransient
	}
	for _, t := range terminalErrors {
		if t.is(err) {
			return classTerminal
		}
	}
	return classTransient
}

// transientHookError reports whether a hook failed only because the API
// server could not take it for a moment (overloaded, timing out, a
// conflict, the connection): that is retried with backoff, not stalled.
func transientHookError(err error) bool { return hooks.Transient(err) }

// noteSettled records whether the add-on is settled (driftWatch.Settled):
// Synced, Degraded, or held by a gate with something applied that was
// judged. Only an add-on waiting for its rollout stays awaiting, and only
// one whose uninstall waits for what it deleted awaitingGone.
func (r *AddonReconciler) noteSettled(s *scope) {
	key := types.NamespacedName{Namespace: s.addon.Namespace, Name: s.addon.Name}
	switch {
	case s.outcome.Phase == capstanv1.PhaseSynced, s.outcome.Phase == capstanv1.PhaseDegraded,
		s.found.gated && s.found.health != nil && !s.found.health.nothing:
		r.settled.Store(key, true)
	default:
		r.settled.Delete(key)
	}
	// NOTE: after settled is stored, so that no status change in between
	// goes unseen.
	if s.outcome.Reason != reasonWaitingForWorkloads && !s.found.hookWait {
		r.awaiting.Delete(key)
	}
	if s.outcome.Reason != reasonUninstalling || s.found.waitingFor == "" {
		r.awaitingGone.Delete(key)
	}
}

// result ends a reconcile: it decides the outcome and maps the error to a
// result. A terminal error stalls and waits for a change or the resync, a
// transient one is retried with backoff, and no error resyncs after the
// interval or sooner when a step asked to.
func (r *AddonReconciler) result(s *scope, err error) (ctrl.Result, error) {
	// The error becomes the status's message and, when it is returned,
	// controller-runtime's log line: neither may quote a secret value.
	err = s.mask().Error(err)
	s.err = err
	s.outcome = outcomeOf(s.found, s.stage, err)
	r.noteSettled(s)
	var later *source.RetryAfterError
	switch {
	case errors.As(err, &later) && later.After > 0:
		// A server that asked for time gets it, not the backoff's next try.
		return ctrl.Result{RequeueAfter: later.After}, nil
	case err != nil && classify(err) == classTerminal:
		if s.retryStalled > 0 && s.retryStalled < r.Config.ResyncInterval {
			return ctrl.Result{RequeueAfter: s.retryStalled}, nil
		}
		return ctrl.Result{RequeueAfter: r.Config.ResyncInterval}, nil
	case err != nil:
		return ctrl.Result{}, err
	case s.requeueAfter > 0:
		return ctrl.Result{RequeueAfter: s.requeueAfter}, nil
	}
	return ctrl.Result{RequeueAfter: r.Config.ResyncInterval}, nil
}
