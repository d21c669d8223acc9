package controller_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
)

// postDeleteHooks are dbapp's values for two post-delete Jobs: kept (its
// name), which has hook-succeeded, and db-second after it, which fails
// when fail is "true".
func postDeleteHooks(kept, policy, fail string) string {
	return `{extraHooks: [{name: ` + kept + `, kind: Job, events: post-delete, deletePolicy: "` + policy + `"},` +
		` {name: second, kind: Job, events: post-delete, weight: "1", fail: ` + fail + `}]}`
}

// deleteUntilPostDeleteFails deletes a, whose db-second post-delete Job
// fails, and returns the Addon once that failure is recorded, with the
// succeeded Job db-<kept> kept for the retry in status.pendingHook.
func deleteUntilPostDeleteFails(t *testing.T, a *capstanv1.Addon, ns, kept string) *capstanv1.Addon {
	t.Helper()
	synced(t, a)
	if err := admin.Delete(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	got := failedWith(t, a, "the post-delete hook failed", "Job "+ns+"/db-second")
	p := got.Status.PendingHook
	if p == nil || p.Event != "post-delete" || len(p.Objects) != 1 || p.Objects[0].Name != "db-"+kept {
		t.Fatalf("status.pendingHook = %+v; want post-delete, keeping the Job db-%s", p, kept)
	}
	if j := job(t, ns, "db-"+kept); j == nil || j.Status.Succeeded != 1 {
		t.Fatalf("db-%s %s; want the Job that succeeded, kept for the retry", kept, jobString(j))
	}
	return got
}

// gone waits until the Addon is deleted.
func gone(t *testing.T, a *capstanv1.Addon) {
	t.Helper()
	eventually(t, 90*time.Second, "the Addon to go", func() bool {
		return apierrors.IsNotFound(admin.Get(context.Background(), client.ObjectKeyFromObject(a), &capstanv1.Addon{}))
	})
}

// TestPostDeleteRetryGoesOnFromItsRun fails a post-delete event after a
// Job of it with before-hook-creation and hook-succeeded has succeeded,
// then moves the chart on to a new version, with values that mend the
// failing Job. The retry renders anew, and must go on from the run the
// uninstall recorded as its post-delete event began: the Job that
// succeeded is not created again, and is deleted once the event has
// succeeded. Before, the retry's run came from its own render, the kept
// Job was another run's, and its before-hook-creation deleted it and ran
// it again.
func TestPostDeleteRetryGoesOnFromItsRun(t *testing.T) {
	ns := newNamespace(t)
	rec := recordEvents(t, ns)
	const policy = "before-hook-creation,hook-succeeded"
	a := dbapp(t, ns, postDeleteHooks("first", policy, "true"),
		withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = capstanv1.DeletionDelete }))
	failed := deleteUntilPostDeleteFails(t, a, ns, "first")
	if p := failed.Status.PendingHook; p.Run == "" || p.Objects[0].Run != p.Run {
		t.Errorf("status.pendingHook = %+v; want it to record the run, whose Job db-first it keeps", p)
	}

	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.Chart.URL = dbappChart(t, "1.1.0")
		cur.Spec.Values = jsonValues(postDeleteHooks("first", policy, "false"))
	})
	gone(t, a)
	if n := rec.count("Job/db-first", watch.Added); n != 1 {
		t.Errorf("the post-delete Job db-first was created %d times; want once: it had succeeded in the run the retry goes on from", n)
	}
	if n := rec.count("Job/db-second", watch.Added); n < 2 {
		// NOTE: a resync before the change may retry it once more.
		t.Errorf("the post-delete Job db-second was created %d times; want it run again by the retry, as it had failed", n)
	}
	if j := job(t, ns, "db-first"); j != nil {
		t.Errorf("db-first %s is left; want it deleted once the event succeeded", jobString(j))
	}
}

// TestPostDeleteLeavesNoKeptJob fails a post-delete event after its
// Job db-first, with hook-succeeded only, has succeeded and was kept for
// the retry, then renames that hook. The retry runs the renamed hook and
// the mended one, and the Addon goes: the Job db-first, which the new
// render no longer names, is deleted before the finalizer is removed, as
// no record names it once the Addon is gone. Before, it was left behind.
// With deletionPolicy switched to Orphan instead, the Addon goes leaving
// it, as it leaves everything else it made.
func TestPostDeleteLeavesNoKeptJob(t *testing.T) {
	t.Run("delete", func(t *testing.T) {
		ns := newNamespace(t)
		a := dbapp(t, ns, postDeleteHooks("first", "hook-succeeded", "true"),
			withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = capstanv1.DeletionDelete }))
		deleteUntilPostDeleteFails(t, a, ns, "first")

		update(t, a, func(cur *capstanv1.Addon) {
			cur.Spec.Values = jsonValues(postDeleteHooks("renamed", "hook-succeeded", "false"))
		})
		gone(t, a)
		if j := job(t, ns, "db-first"); j != nil {
			t.Errorf("db-first %s is left after the Addon went; want it deleted before the finalizer was removed", jobString(j))
		}
		if j := job(t, ns, "db-renamed"); j != nil {
			t.Errorf("db-renamed %s is left; want it deleted by its policy", jobString(j))
		}
	})

	t.Run("orphan", func(t *testing.T) {
		ns := newNamespace(t)
		a := dbapp(t, ns, postDeleteHooks("first", "hook-succeeded", "true"),
			withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = capstanv1.DeletionDelete }))
		deleteUntilPostDeleteFails(t, a, ns, "first")

		update(t, a, func(cur *capstanv1.Addon) { cur.Spec.DeletionPolicy = capstanv1.DeletionOrphan })
		gone(t, a)
		if j := job(t, ns, "db-first"); j == nil {
			t.Error("db-first was deleted; an Addon removed with Orphan leaves its hook objects")
		}
	})
}

// TestStopAfterKeptPostDeleteJobIsDeleted fails a post-delete event after
// its Job db-first, with hook-succeeded only, has succeeded and was kept
// for the retry, under a shard's controller. The chart is then gone for
// good (404), so the uninstall runs no delete hook and deletes what the
// pending event kept before the finalizer goes; the controller stops right
// after that delete, before the status write that ends the reconcile. The
// chart comes back, mended, and the suite's controller takes the Addon up:
// it must find the post-delete stage over and let the Addon go, without
// running db-first again. Before, the pending event was turned into that
// record in memory only, and the next controller went on from the pending
// run, whose Job db-first was gone, and ran it a second time.
func TestStopAfterKeptPostDeleteJobIsDeleted(t *testing.T) {
	ns := newNamespace(t)
	rec := recordEvents(t, ns)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	stopped := make(chan struct{})
	var once sync.Once
	shard := startShardUntil(ctx, t, "kept-"+ns[len(ns)-5:], func(r *controller.AddonReconciler) {
		r.BeforeApplyStep = func(rctx context.Context, _ *capstanv1.Addon, step string) error {
			if step != "post-delete kept clean-up" {
				return nil
			}
			once.Do(func() {
				stop()
				// NOTE: the manager cancels its controllers' context once
				// it sees its own done; the reconcile ends with it, as a
				// stopped controller's does, writing nothing.
				select {
				case <-rctx.Done():
				case <-time.After(30 * time.Second):
				}
				close(stopped)
			})
			return errors.New("simulated stop after the kept Jobs were deleted")
		}
	})
	a := dbapp(t, ns, postDeleteHooks("first", "hook-succeeded", "true"), shard,
		withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = capstanv1.DeletionDelete }))
	url := a.Spec.Chart.URL
	deleteUntilPostDeleteFails(t, a, ns, "first")

	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = charts.srv.URL + "/charts/deleted/dbapp-1.0.0.tgz" })
	select {
	case <-stopped:
	case <-time.After(90 * time.Second):
		t.Fatal("the shard never came to delete what the pending post-delete event kept")
	}
	if j := job(t, ns, "db-first"); j != nil && j.DeletionTimestamp.IsZero() {
		t.Fatalf("db-first %s is still there after the clean-up; want it deleted before the stop", jobString(j))
	}
	got := getAddon(t, a)
	if p, d := got.Status.PendingHook, got.Status.PreHooksDone; p != nil || d == nil || d.Event != "post-delete" {
		t.Errorf("after the stop status.pendingHook = %+v, preHooksDone = %+v; want the post-delete stage recorded over before the delete", p, d)
	}

	// The suite's controller takes the Addon up, with its chart back.
	update(t, a, func(cur *capstanv1.Addon) {
		delete(cur.Labels, shardLabel)
		cur.Spec.Chart.URL = url
		cur.Spec.Values = jsonValues(postDeleteHooks("first", "hook-succeeded", "false"))
	})
	gone(t, a)
	if n := rec.count("Job/db-first", watch.Added); n != 1 {
		t.Errorf("the post-delete Job db-first was created %d times; want once: the stopped uninstall had recorded its stage over and deleted it", n)
	}
	if j := job(t, ns, "db-first"); j != nil && j.DeletionTimestamp.IsZero() {
		t.Errorf("db-first %s is left after the Addon went", jobString(j))
	}
}
