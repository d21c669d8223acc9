package controller

import (
	"context"

	"capstan.dev/capstan/internal/plan"
)

// gate runs the gates. A plan that may not be applied ends the reconcile
// with the gate's phase.
func (r *AddonReconciler) gate(ctx context.Context, s *scope) (bool, error) {
	s.verdict = plan.Decide(plan.State{
		Plan: s.plan, Suspend: s.addon.Spec.Suspend, Adopt: s.addon.Spec.Adopt, AllowAdoptChanges: s.addon.Spec.AllowAdoptChanges,
		ManualSync: s.addon.Spec.ManualSync, SyncRequest: s.addon.Spec.SyncRequest, ApprovedPlan: s.addon.Spec.ApprovedPlan,
		LastSyncRequest: s.addon.Status.LastSyncRequest,
		Inventory:       len(s.addon.Status.Inventory), PruneThreshold: r.Config.PruneApprovalThreshold,
	})
	if s.verdict.Apply {
		return false, nil
	}
	s.found.gated, s.found.verdict = true, s.verdict
	return true, nil
}
