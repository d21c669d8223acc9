package controller

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
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
	return []step{{"Cluster", r.selectTarget}, {"Fetch", r.fetch}, {"Values", r.resolveValues}, {"Render", r.renderObjects}, {"Prepare", r.prepare}, {"Generated", r.keepGenerated}}
}

// planSteps are the profile check, the render steps, then the fields
// spec.ignore leaves as they run, the guardrails and the preview: what the
// sync and `capstan plan` share. The profile check comes first, so that an
// add-on it holds has nothing read or written for it.
func (r *AddonReconciler) planSteps() []step {
	steps := append([]step{{"Profile", r.checkProfile}}, r.renderSteps()...)
	return append(steps, step{"Ignore", r.keepIgnored}, step{"Guard", r.checkGuardrails}, step{"Preview", r.preview})
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
		step{"Test", r.runTests},
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

// refreshRequest takes up a new value of the capstan.dev/refresh
// annotation: this reconcile fetches past the caches. A paused Addon
// fetches nothing and leaves the request for when it resumes.
func refreshRequest(s *scope) error {
	req := s.addon.Annotations[capstanv1.RefreshAnnotation]
	if req == "" || req == s.addon.Status.LastHandledRefresh {
		return nil
	}
	if err := overlongRequest(capstanv1.RefreshAnnotation, req, "refresh"); err != nil {
		// NOTE: not taken up, so never recorded: status could not hold it.
		return err
	}
	s.refresh = req
	return nil
}

// overlongRequest refuses a request annotation's value that status could
// not hold; command is the `capstan addon` command that writes one.
func overlongRequest(annotation, req, command string) error {
	if len(req) <= capstanv1.MaxRefreshLength {
		return nil
	}
	return terminal{fmt.Errorf("the %s annotation is %d characters long; give it at most %d, such as the time (capstan addon %s writes one)",
		annotation, len(req), capstanv1.MaxRefreshLength, command)}
}

// refreshHandled records a refresh request as handled in the status this
// reconcile writes, once its outcome is one to report: done, or stopped
// for a person to fix. A reconcile that ends in an error it retries leaves
// the request open, and the retry reads past the caches again.
func refreshHandled(s *scope) {
	if s.refresh != "" && (s.err == nil || classify(s.err) == classTerminal) {
		s.addon.Status.LastHandledRefresh = s.refresh
	}
}
