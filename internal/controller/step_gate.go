package controller

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/health"
	"capstan.dev/capstan/internal/plan"
)

// gate runs the gates. A plan that may not be applied ends the reconcile
// with the gate's phase.
//
// spec.healthChecks are compiled first: an expression that does not
// compile would otherwise show only once everything was applied. It is
// here, not with the render, so that an uninstall, which renders to find
// its delete hooks, never stops at it. Sync windows are read next: one
// the controller cannot read holds every change until it is fixed. While
// they hold a change, the add-on is looked at again when they may open, or
// at the resync if that is sooner.
//
// A gate holds changes, not the report of what runs: a held add-on's
// objects are still judged for the Healthy condition (judgeHeld).
func (r *AddonReconciler) gate(ctx context.Context, s *scope) (bool, error) {
	checks, err := health.Compile(s.addon.Spec.HealthChecks)
	if err != nil {
		return false, terminal{err}
	}
	s.checks = checks
	windows, err := syncWindows(s)
	if err != nil {
		s.verdict = plan.Verdict{Phase: capstanv1.PhaseFailed, Reason: plan.ReasonWindowInvalid,
			Message: err.Error() + "; nothing is applied until it is fixed"}
		s.found.gated, s.found.verdict = true, s.verdict
		r.judgeHeld(ctx, s, checks)
		return true, nil
	}
	if !s.continuesSync() {
		// NOTE: a sync recorded as begun that this one does not go on
		// from (the spec, the render or the request changed) is over:
		// the gates judge this plan as any other. One that failed for
		// good handled its request (plan.FailedRequest): recorded here,
		// or the request would bind its approval again once the record
		// is gone.
		if req, approved, ok := plan.FailedRequest(s.addon); ok {
			s.addon.Status.LastSyncRequest, s.addon.Status.LastApprovedPlan = req, approved
		}
		s.addon.Status.SyncInProgress = nil
	}
	state := r.gateState(s, s.plan, windows)
	s.verdict = plan.Decide(state)
	if s.verdict.Apply {
		return false, nil
	}
	wouldApply := func(p *capstanv1.Plan) bool {
		if state.ApprovedPlan != "" && state.ApprovedPlan == s.plan.Hash {
			// NOTE: an approval of the refused plan would not hold once
			// the dry run passes: the hash covers each object's result.
			return false
		}
		st := state
		st.Plan = p
		return plan.Decide(st).Apply
	}
	if s.verdict.Reason == plan.ReasonDryRunFailed {
		if wait, err := r.dryRunWaitsForWave(ctx, s, wouldApply); wait || err != nil {
			return true, err
		}
	}
	s.found.gated, s.found.verdict = true, s.verdict
	r.judgeHeld(ctx, s, checks)
	if s.verdict.Reason == plan.ReasonSyncWindow && !windows.Change.IsZero() {
		// NOTE: a second late, so that the window has changed by then.
		s.requeueSoon(min(time.Until(windows.Change)+time.Second, r.Config.ResyncInterval))
	}
	return true, nil
}

// gateState is what the gates decide on for plan p, with what
// spec.syncWindows say now.
func (r *AddonReconciler) gateState(s *scope, p *capstanv1.Plan, windows *plan.Windows) plan.State {
	st := plan.StateOf(s.addon, p)
	st.AppliedPlans = appliedPlans(s.addon.Status.History)
	// NOTE: what is kept counts as the inventory does, only of kinds a
	// prune may delete: a Namespace left out loses no workload.
	st.PruneThreshold, st.Kept, st.Confirm = r.Config.PruneApprovalThreshold, plan.CountDeletable(sparedRefs(s.kept)), describeAll(s.confirm)
	// NOTE: the share a prune deletes is of what still runs: objects the
	// preview found gone are no delete (plan.Build), and counted in the
	// inventory they would let a render that lost everything that is
	// left through the mass-prune gate.
	st.Inventory -= plan.CountDeletable(goneRefs(s.prune, s.pruneUIDs))
	st.Windows, st.Continuing = windows, s.continuesRun() || s.continuesSync()
	if st.Continuing {
		// NOTE: a sync that goes on from one that failed still handles
		// its request (Verdict.HandledSyncRequest), which its apply then
		// records (plan.FailedRequest).
		st.LastSyncRequest, st.LastApprovedPlan = s.addon.Status.LastSyncRequest, s.addon.Status.LastApprovedPlan
	}
	return st
}

// continuesSync reports whether this sync goes on from a person's sync
// that an earlier reconcile began to apply and did not finish
// (status.syncInProgress): an apply error, a controller stopped or its
// lease lost, a failure after the pre hooks ran. It does when the Addon's
// generation, the render and spec.syncRequest are those the sync began
// with, the request is still open, and every change of this plan is one
// the approved plan made (plan.Within). Its plan is then no longer the
// one approved only because part of it ran (what it applied is unchanged
// now, the pre hooks that ran are left out), so, as for a run of hooks
// that goes on (continuesRun), manual sync, the mass-prune approval and
// the windows do not hold it again. Any change to the spec makes another
// sync, which needs its own approval; so does a plan that changes
// anything else.
//
// The answer is worked out once a reconcile, at its first use, which
// comes once the preview knows the plan's changes (s.changes): the
// preview's CRD check (appliesNow), the gate, and the sync's record
// (beginSync) all ask it, and nothing it reads changes between them but
// the record the gate drops when the answer is no.
//
// NOTE: the render's inputs alone do not bind it: the render reads the
// cluster too (.Capabilities, as a CRD appears or the Kubernetes version
// changes), and a live object the approved plan left as it was may have
// drifted since; neither was approved.
func (s *scope) continuesSync() bool {
	if s.continuing == nil {
		b := s.addon.Status.SyncInProgress
		c := b != nil && s.render != nil && b.Generation == s.addon.Generation && b.RenderHash == s.render.Hash &&
			b.SyncRequest == s.addon.Spec.SyncRequest && s.addon.Spec.SyncRequest > s.addon.Status.LastSyncRequest &&
			plan.Within(s.changes, b.Changes)
		s.continuing = &c
	}
	return *s.continuing
}

// appliesNow reports whether a plan made of in would be applied by this
// reconcile, as far as the preview can tell: not a read-only plan, every
// dependency Ready, and the gates and windows letting it through. The
// preview asks it before it makes a shadow CRD (crdSafety), a write a
// plan that is not applied must not make. A read that fails counts as
// not applying: the step that needs it fails on it again.
func (r *AddonReconciler) appliesNow(ctx context.Context, s *scope, in plan.Input) bool {
	if s.readOnly {
		return false
	}
	if len(s.addon.Spec.DependsOn) > 0 {
		if f, err := r.dependencyState(ctx, s.addon); err != nil || f != nil {
			return false
		}
	}
	windows, err := syncWindows(s)
	if err != nil {
		return false
	}
	return plan.Decide(r.gateState(s, plan.Build(in), windows)).Apply
}

// syncWindows evaluates the add-on's spec.syncWindows now: nil when it
// sets none.
func syncWindows(s *scope) (*plan.Windows, error) {
	ws := s.addon.Spec.SyncWindows
	if len(ws) == 0 {
		return nil, nil
	}
	w, err := plan.EvaluateWindows(ws, time.Now())
	if err != nil {
		return nil, err
	}
	return &w, nil
}

// judgeHeld judges the health of what an add-on whose plan is held runs
// now, for the Healthy condition, as Argo CD reports health apart from
// sync. A read that fails, or a plan that was not previewed, leaves the
// condition as it was: the gate's verdict is the reconcile's outcome, and
// the next look judges again.
func (r *AddonReconciler) judgeHeld(ctx context.Context, s *scope, checks *health.Checks) {
	j, err := r.judgeRunning(ctx, s, checks)
	if err != nil {
		logf.FromContext(ctx).Error(s.mask().Error(err), "Judging the health of a held add-on failed")
		return
	}
	if j == nil {
		return
	}
	s.found.health = j
	r.watchKinds(ctx, s, j.kinds)
}

// appliedPlans lists the plans that history records as applied.
func appliedPlans(history []capstanv1.Revision) []string {
	out := make([]string, 0, len(history))
	for _, rev := range history {
		if rev.PlanHash != "" {
			out = append(out, rev.PlanHash)
		}
	}
	return out
}

// goneRefs are the objects of prune that the preview found gone: no UID
// was read for them.
func goneRefs(prune []capstanv1.ObjectRef, uids map[string]types.UID) []capstanv1.ObjectRef {
	var out []capstanv1.ObjectRef
	for _, r := range prune {
		if uids[r.Key()] == "" {
			out = append(out, r)
		}
	}
	return out
}
