package controller

import (
	"context"
	"errors"
	"fmt"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// Plan computes an Addon's whole plan on demand, with every diff uncut up
// to plan.MaxFullDiffBytes, and changes nothing: no status is written,
// nothing is applied, generated values are not kept and values objects
// are not adopted. It runs the
// pipeline's steps up to the preview, with the reconciler's identities.
// `capstan plan` uses it when the plan in status had its diffs cut.
func (r *AddonReconciler) Plan(ctx context.Context, addon *capstanv1.Addon) (*capstanv1.Plan, error) {
	if err := r.init(); err != nil {
		return nil, err
	}
	if err := readableInventory(addon); err != nil {
		return nil, err
	}
	s := r.newScope(addon.DeepCopy())
	s.fullDiffs = true
	s.readOnly = true
	for _, st := range r.planSteps() {
		s.stage = st.name
		done, err := st.run(ctx, s)
		if err != nil {
			return nil, s.mask().Error(err)
		}
		if done {
			return nil, s.mask().Error(planStopped(s, st.name))
		}
	}
	return s.plan, nil
}

// ErrProfileHeld says that a plan on demand found the add-on's sync held
// since its profile changed (ProfileChanged): a conflict with the cluster's
// state, not a fault, which ends once the namespace is trusted again.
var ErrProfileHeld = errors.New("its sync is held since its profile changed")

// planStopped says why a plan on demand ended before its preview: a step
// that ends the sync there leaves nothing a plan could show. A chart whose
// signature spec.chart.verify refuses is not rendered, so the plan is the
// signature check's own error, which says which check failed and what to
// fix, never an empty plan. An add-on whose profile changed under it
// (checkProfile) has no plan either: its sync would apply nothing, and a
// restricted plan would show the prune of what it runs. The fetch and the
// profile check are the only steps before the preview that end the sync,
// so anything else is a bug.
func planStopped(s *scope, stage string) error {
	if h := s.found.profileChanged; h != nil {
		return fmt.Errorf("the add-on is Blocked (%s) and %w, so there is no plan: %s", h.reason, ErrProfileHeld, h.message)
	}
	if sig := s.found.signature; sig != nil && sig.err != nil {
		return fmt.Errorf("the chart's signature failed (%s), so nothing from it is rendered and there is no plan: %w", sig.reason, sig.err)
	}
	return fmt.Errorf("internal error: the %s step ended the plan before its preview without saying why; report this as a bug in Capstan", stage)
}
