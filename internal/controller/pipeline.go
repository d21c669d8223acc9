package controller

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
)

// step is one stage of the pipeline. It returns done when the reconcile
// ends here without error.
type step struct {
	name string
	run  func(ctx context.Context, s *scope) (done bool, err error)
}

// renderSteps fetch the source, resolve the values, render and prepare the
// objects: what the sync, `capstan plan` and the delete hooks share.
func (r *AddonReconciler) renderSteps() []step {
	return []step{{"Cluster", r.selectCluster}, {"Fetch", r.fetch}, {"Values", r.resolveValues}, {"Render", r.renderObjects}, {"Prepare", r.prepare}, {"Generated", r.keepGenerated}}
}

// planSteps are the render steps, then the guardrails and the preview: what
// the sync and `capstan plan` share.
func (r *AddonReconciler) planSteps() []step {
	return append(r.renderSteps(), step{"Guard", r.checkGuardrails}, step{"Preview", r.preview})
}

// reconcileNormal runs the pipeline for an Addon that is not being deleted.
func (r *AddonReconciler) reconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	steps := append(r.planSteps(),
		step{"Depends", r.checkDependencies},
		step{"Gate", r.gate},
		step{"Drift", r.paceDrift},
		step{"Apply", r.applyPlan},
		step{"Paced", r.recordUndo},
		step{"Health", r.checkHealth},
		step{"Register", r.register},
	)
	for _, st := range steps {
		s.stage = st.name
		done, err := st.run(ctx, s)
		if err != nil || done {
			return r.result(s, err)
		}
	}
	return r.result(s, nil)
}
