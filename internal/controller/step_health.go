package controller

import (
	"context"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// checkHealth waits, by requeueing, until the applied workloads are ready;
// once they are, the sync goes on to register the add-on.
// It reads what the preview read, or the API server's answer to the apply.
func (r *AddonReconciler) checkHealth(ctx context.Context, s *scope) (bool, error) {
	known := r.verified.lookup(s.addon)
	for _, obj := range s.objects {
		if !healthKinds[obj.GetKind()] {
			continue
		}
		key := capstanv1.RefOf(obj).Key()
		if s.quiet[key] && known[key].Healthy {
			// Healthy when verified, and not written since.
			continue
		}
		live := s.live[key]
		if live == nil {
			var err error
			if live, err = s.applier.Get(ctx, capstanv1.RefOf(obj)); err != nil {
				return false, err
			}
		}
		ready, why, err := workloadReady(obj, live)
		if err != nil {
			return false, err
		}
		if ready {
			r.verified.markHealthy(s.addon, key, live.GetResourceVersion())
		}
		if !ready {
			s.found.waitingFor = why
			s.requeueAfter = r.Config.HealthPoll
			return true, nil
		}
	}
	s.found.healthy = true
	s.found.applied = s.plan == nil
	return false, nil
}
