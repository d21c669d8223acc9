package controller

import (
	"context"
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/health"
	"capstan.dev/capstan/internal/notify"
	"capstan.dev/capstan/internal/plan"
)

// checkHealth waits, by requeueing, until every applied object is Current;
// once they are, the sync goes on to register the add-on. It reads what the
// preview read, or the API server's answer to the apply; an object found
// Current and not written since is not read again. Past spec.healthTimeout
// after the last apply, the add-on is Failed with the objects that are not;
// and so it is, with no timeout, once an object failed past failedGrace
// after it (failedAfterApply).
//
// Once every object of the last apply has been found Current
// (status.firstHealthyTime, which the next apply clears), an object that
// stops being Current makes the add-on Degraded (lapseOf): at once when it
// failed, and when it is only in progress (an autoscale, a rollout
// restart, an eviction) once it has stayed so past the grace
// (degradedGrace); until then the add-on stays Synced with its Healthy
// condition False, and is looked at again at the grace's end. There is no
// rollout of Capstan's to wait for, and no timeout turns it Failed.
func (r *AddonReconciler) checkHealth(ctx context.Context, s *scope) (bool, error) {
	checks := s.checks
	checks.NewLook()
	known := r.verified.lookup(s.addon)
	j := &judgement{}
	for _, obj := range s.objects {
		key := capstanv1.RefOf(obj).Key()
		if err := r.judgeObject(ctx, s, checks, known, j, obj, s.live[key], s.quiet[key], true); err != nil {
			return false, err
		}
	}
	s.found.health = j
	key := client.ObjectKeyFromObject(s.addon)
	st := &s.addon.Status
	if len(j.notCurrent) > 0 {
		r.watchKinds(ctx, s, j.kinds)
		list := notCurrentList(j.notCurrent)
		if st.FirstHealthyTime != nil {
			// NOTE: looked at in its turn (settled, noteSettled), not ahead
			// of the queued syncs as a rollout is: it may stay down for
			// hours.
			now, grace := time.Now(), degradedGrace(s)
			since := notCurrentSince(st, now)
			degraded, left := lapseOf(j.failed, inWarning(st, s.read.Phase), since, grace, now)
			if degraded {
				s.found.degraded = list
				s.requeueSoon(min(degradedPoll, r.Config.ResyncInterval))
				return true, nil
			}
			s.found.lapsing = fmt.Sprintf("In sync: nothing to change. Not Current since %s: %s. The add-on is Degraded if they are not Current by %s (spec.healthTimeout, %s when unset).",
				since.UTC().Format(time.RFC3339), list, since.Add(grace).UTC().Format(time.RFC3339), plan.DefaultWaveTimeout)
			s.requeueSoon(min(left, r.Config.ResyncInterval))
			return true, nil
		}
		r.awaiting.Store(key, true)
		if failedAfterApply(j.failed, st.LastAppliedTime, min(failedGrace, waveTimeout(s)), time.Now()) {
			return false, terminal{fmt.Errorf("an object failed after the last apply, and no wait makes it Current: %s; fix it (its own status says why), and the next sync judges it again",
				notCurrentList(j.failures))}
		}
		if t := s.addon.Spec.HealthTimeout; t != nil && st.LastAppliedTime != nil {
			if since := time.Since(st.LastAppliedTime.Time); since > t.Duration {
				return false, terminal{fmt.Errorf("not healthy %s after the last apply (spec.healthTimeout %s): %s",
					since.Round(time.Second), t.Duration, list)}
			}
		}
		s.found.waitingFor = "waiting for " + list
		s.requeueAfter = r.Config.HealthPoll
		return true, nil
	}
	if st.FirstHealthyTime == nil {
		now := metav1.Now()
		st.FirstHealthyTime = &now
	}
	// NOTE: settled before it stops awaiting, so that no status change
	// in between goes unseen.
	r.settled.Store(key, true)
	r.awaiting.Delete(key)
	s.found.healthy = true
	s.found.applied = s.plan == nil
	return false, nil
}

// failedAfterApply decides whether objects that are not Current end the
// wait after an apply as a failure: when one of them failed (failed),
// once the grace has passed since the last apply (applied; at once when
// nothing was applied). Within the grace a failure may be a status that
// still describes the object before the apply, which may have fixed it,
// as the wave wait allows (failedGrace). A failed object is not waited
// for as one in progress is: a Job past its backoffLimit or a Deployment
// past its progressDeadlineSeconds does not recover by itself, and with
// spec.healthTimeout unset nothing else would end the wait.
func failedAfterApply(failed bool, applied *metav1.Time, grace time.Duration, now time.Time) bool {
	return failed && (applied == nil || now.Sub(applied.Time) >= grace)
}

// degradedGrace is how long an object of an add-on that has been healthy
// may stay in progress before the add-on is Degraded: spec.healthTimeout,
// the bound of the wait after an apply, or plan.DefaultWaveTimeout (10
// minutes, the default progressDeadlineSeconds of a Deployment, after
// which Argo CD calls a rollout Degraded) when unset. A Deployment whose
// rollout passes its own progressDeadlineSeconds is Failed by kstatus,
// and so Degraded at once.
func degradedGrace(s *scope) time.Duration { return waveTimeout(s) }

// lapseOf decides what objects that are not Current make of an add-on that
// has been healthy since its last apply: Degraded, or not yet and how long
// until the grace ends. An object that failed makes it Degraded at once;
// objects only in progress since since, once they have been so for grace.
// An add-on still in a warning (warned: Degraded, or Failed or Blocked,
// and not Synced since) stays in it, so that an object that goes from
// failed back to in progress neither closes the incident its failure
// opened nor opens another at the grace's end.
func lapseOf(failed, warned bool, since time.Time, grace time.Duration, now time.Time) (degraded bool, left time.Duration) {
	if failed || warned {
		return true, 0
	}
	if left = since.Add(grace).Sub(now); left <= 0 {
		return true, 0
	}
	return false, left
}

// notCurrentSince is since when the add-on's objects have not all been
// Current: when its Healthy condition turned False, or now when it is not
// False (this look is the first to find them so). The condition's
// transition time survives a restart of the controller, so the grace does
// not start again.
func notCurrentSince(st *capstanv1.AddonStatus, now time.Time) time.Time {
	c := apimeta.FindStatusCondition(st.Conditions, capstanv1.ConditionHealthy)
	if c == nil || c.Status != metav1.ConditionFalse || c.LastTransitionTime.After(now) {
		return now
	}
	return c.LastTransitionTime.Time
}

// inWarning reports whether the add-on is in a phase that needs a look, or
// has not been Synced since it was (status.warningSince, which markWarning
// keeps through the phases on the way); was is the phase it was read with.
// A Synced add-on that keeps warningSince has settled: the mark waits only
// for its incident's close to be delivered (owesClose).
func inWarning(st *capstanv1.AddonStatus, was capstanv1.Phase) bool {
	return st.WarningSince != nil && was != capstanv1.PhaseSynced || phaseSeverity(was) == notify.SeverityWarning
}

// degradedPoll is how often a Degraded add-on is looked at when no status
// change of its objects wakes it first: a workload may stay down for
// hours, and each look renders and previews the add-on again.
const degradedPoll = time.Minute

// judgeRunning judges the health of what an add-on runs now, whose plan a
// gate holds: the objects of its inventory, not the render it may not
// apply. It reads what the preview read, the objects found Current and not
// written since not at all, and the rest (an object the plan would prune)
// from the API server; an inventory object the preview found missing is not
// Current. Nil when the preview did not run (violations, values errors):
// nothing was read to judge by.
func (r *AddonReconciler) judgeRunning(ctx context.Context, s *scope, checks *health.Checks) (*judgement, error) {
	if s.quiet == nil {
		return nil, nil
	}
	rendered := make(map[string]*unstructured.Unstructured, len(s.objects))
	for _, obj := range s.objects {
		rendered[capstanv1.RefOf(obj).Key()] = obj
	}
	checks.NewLook()
	known := r.verified.lookup(s.addon)
	j := &judgement{nothing: len(s.addon.Status.Inventory) == 0}
	for _, ref := range capstanv1.RefsOf(s.addon.Status.Inventory) {
		key := ref.Key()
		// NOTE: the rendered manifest, when the render holds the object,
		// tells a Job the chart creates suspended (createdSuspended).
		obj := rendered[key]
		if obj == nil {
			obj = &unstructured.Unstructured{}
			obj.SetAPIVersion(ref.APIVersion)
			obj.SetKind(ref.Kind)
			obj.SetNamespace(ref.Namespace)
			obj.SetName(ref.Name)
		}
		// NOTE: a rendered object the preview read and found missing is
		// missing; one it did not read (quiet, or not rendered) is read.
		read := s.quiet[key] || rendered[key] == nil
		if err := r.judgeObject(ctx, s, checks, known, j, obj, s.live[key], s.quiet[key], read); err != nil {
			return nil, err
		}
	}
	return j, nil
}

// judgeObject judges one object into j, from live when the preview read it.
// An object quiet in the watch cache (unchanged since it was verified) and
// known Current is Current with no read, unless a health check judges its
// kind: the check may have changed, and the object not. With read, an
// object not read yet is read from the API server. An object that turns
// Current is remembered so, at its resourceVersion.
func (r *AddonReconciler) judgeObject(ctx context.Context, s *scope, checks *health.Checks, known map[string]plan.Verified,
	j *judgement, obj, live *unstructured.Unstructured, quiet, read bool) error {
	key := capstanv1.RefOf(obj).Key()
	if quiet && known[key].Healthy && !checks.Judges(obj) {
		return nil
	}
	if live == nil && read {
		var err error
		if live, err = s.applier.Get(ctx, capstanv1.RefOf(obj)); err != nil {
			return err
		}
	}
	current, failed, why := r.judge(ctx, s, obj, live, checks)
	if current {
		r.verified.markHealthy(s.addon, key, live.GetResourceVersion())
		return nil
	}
	j.notCurrent = append(j.notCurrent, why)
	j.kinds = append(j.kinds, obj.GroupVersionKind())
	if failed {
		j.failed = true
		j.failures = append(j.failures, why)
	}
	return nil
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
