package controller

import (
	"context"
	"fmt"
	"time"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/health"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// checkHealth waits, by requeueing, until every applied object is Current;
// once they are, the sync goes on to register the add-on. It reads what the
// preview read, or the API server's answer to the apply; an object found
// Current and not written since is not read again. Past spec.healthTimeout
// after the last apply, the add-on is Failed with the objects that are not.
func (r *AddonReconciler) checkHealth(ctx context.Context, s *scope) (bool, error) {
	checks, err := health.Compile(s.addon.Spec.HealthChecks)
	if err != nil {
		return false, terminal{err}
	}
	known := r.verified.lookup(s.addon)
	var waiting []string
	var waitingKinds []schema.GroupVersionKind
	for _, obj := range s.objects {
		key := capstanv1.RefOf(obj).Key()
		if s.quiet[key] && known[key].Healthy && !checks.Judges(obj) {
			// Current when verified, and not written since. A kind with a
			// check is judged again: the check may have changed, and the
			// object not.
			continue
		}
		live := s.live[key]
		if live == nil {
			var err error
			if live, err = s.applier.Get(ctx, capstanv1.RefOf(obj)); err != nil {
				return false, err
			}
		}
		current, why, err := objectHealth(obj, live, checks)
		if err != nil {
			return false, err
		}
		if current {
			r.verified.markHealthy(s.addon, key, live.GetResourceVersion())
			continue
		}
		waiting = append(waiting, why)
		waitingKinds = append(waitingKinds, obj.GroupVersionKind())
	}
	key := client.ObjectKeyFromObject(s.addon)
	if len(waiting) > 0 {
		r.awaiting.Store(key, true)
		r.watchKinds(ctx, s, waitingKinds)
		list := notCurrentList(waiting)
		if t := s.addon.Spec.HealthTimeout; t != nil && s.addon.Status.LastAppliedTime != nil {
			if since := time.Since(s.addon.Status.LastAppliedTime.Time); since > t.Duration {
				return false, terminal{fmt.Errorf("not healthy %s after the last apply (spec.healthTimeout %s): %s",
					since.Round(time.Second), t.Duration, list)}
			}
		}
		s.found.waitingFor = "waiting for " + list
		s.requeueAfter = r.Config.HealthPoll
		return true, nil
	}
	r.awaiting.Delete(key)
	s.found.healthy = true
	s.found.applied = s.plan == nil
	return false, nil
}

// watchKinds starts, without waiting, the watch cache's informers of the
// kinds an add-on waits for, with the drift handler on them, so that their
// status changes reach driftWatch.nudge. The first sync of an add-on has
// started none yet.
func (r *AddonReconciler) watchKinds(ctx context.Context, s *scope, gvks []schema.GroupVersionKind) {
	watched := s.cluster.watched
	if watched == nil || r.drift == nil {
		return
	}
	for _, gvk := range gvks {
		// NOTE: GetInformer and hook are idempotent: a kind seen twice costs a map lookup.
		probe := &metav1.PartialObjectMetadata{}
		probe.SetGroupVersionKind(gvk)
		if inf, err := watched.GetInformer(ctx, probe, cache.BlockUntilSynced(false)); err == nil {
			r.drift.hook(gvk, inf, watched)
		}
	}
}
