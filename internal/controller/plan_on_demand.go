package controller

import (
	"context"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// Plan computes an Addon's whole plan on demand, with every diff uncut, and
// changes nothing: no status is written, nothing is applied, generated
// values are not kept and values objects are not adopted. It runs the
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
		if _, err := st.run(ctx, s); err != nil {
			return nil, s.mask().Error(err)
		}
	}
	return s.plan, nil
}
