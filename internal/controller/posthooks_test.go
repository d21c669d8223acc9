package controller_test

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestStopAfterPostHooksRunsThemOnce stops an install once its
// post-install hook's Job has completed, before the sync records that, as
// a controller killed there would: the next sync retries the pending
// post-install event, and finds the seed Job of this install succeeded, so
// it does not create it again.
func TestStopAfterPostHooksRunsThemOnce(t *testing.T) {
	ns := newNamespace(t)
	rec := recordEvents(t, ns)
	stops := stopOnceAt(t, controllerNS+"/hooks-"+ns, "post-install succeeded")
	a := dbapp(t, ns, "")
	got := synced(t, a)
	if stops.Load() == 0 {
		t.Fatal("the sync was never stopped")
	}
	if n := rec.count("Job/db-seed", watch.Added); n != 1 {
		t.Errorf("the post-install Job was created %d times; want once: it had succeeded before the stop", n)
	}
	if n := rec.rerunsAfterSuccess("db-seed"); n > 0 {
		t.Errorf("the post-install Job was created again %d times after it had succeeded", n)
	}
	if seed := job(t, ns, "db-seed"); seed == nil || seed.Status.Succeeded != 1 {
		t.Errorf("seed %s; want the Job that succeeded before the stop", jobString(seed))
	}
	if got.Status.PendingHook != nil || got.Status.Hook != nil {
		t.Errorf("status: pendingHook %+v, hook %+v; want both cleared once the retry found the hook done", got.Status.PendingHook, got.Status.Hook)
	}
	if n := rec.count("Job/db-initdb", watch.Added); n != 1 {
		t.Errorf("the pre-install Job was created %d times; want once", n)
	}
}

// rerunsAfterSuccess counts the Jobs of a name created after one of that
// name had been seen Complete: in a watch's order, a Job's last event
// before its deletion shows how it ended.
func (l *eventLog) rerunsAfterSuccess(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	succeeded, reruns := false, 0
	for _, e := range l.events {
		if e.key != "Job/"+name {
			continue
		}
		if e.typ == watch.Added && succeeded {
			reruns++
		}
		for _, c := range e.obj.(*batchv1.Job).Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				succeeded = true
			}
		}
	}
	return reruns
}
