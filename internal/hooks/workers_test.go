package hooks_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/render"
)

// TestJobHookWithATTLYields runs a seed Job that never finishes with a
// one-second wait. With the ttlSecondsAfterFinished the controller's
// hooks keep (hooks.MinJobTTLSeconds), the run leaves it running and
// returns *hooks.Running, as for a Job without one, rather than holding
// the caller's worker for the whole hook timeout. With a shorter TTL,
// which the TTL controller could act on before a later look, the run
// still waits within itself.
func TestJobHookWithATTLYields(t *testing.T) {
	withTTL := func(f *fixture, ttl int64) []render.Hook {
		hs := f.hooksOf(`{hooks: {seed: {hang: true}}}`, false)
		for _, h := range hs {
			if h.Object.GetName() == "db-seed" {
				if err := unstructured.SetNestedField(h.Object.Object, ttl, "spec", "ttlSecondsAfterFinished"); err != nil {
					t.Fatal(err)
				}
			}
		}
		return hs
	}

	t.Run("the minimum TTL", func(t *testing.T) {
		f := newFixture(t)
		start := time.Now()
		err := f.yielding(withTTL(f, hooks.MinJobTTLSeconds), 20*time.Second).run()
		var running *hooks.Running
		if !errors.As(err, &running) || running.Hook != seedRef(f.ns) {
			t.Fatalf("a run whose seed Job hangs, with a TTL of %ds, returned %v after %s; want *hooks.Running", hooks.MinJobTTLSeconds, err, time.Since(start).Round(time.Second))
		}
		if j := f.job("db-seed"); j == nil || j.DeletionTimestamp != nil {
			t.Error("the Job that still runs was not left running")
		}
	})

	t.Run("a TTL too short to wait for by looks", func(t *testing.T) {
		f := newFixture(t)
		err := f.yielding(withTTL(f, 0), 4*time.Second).run()
		if e := hookError(t, err); e.Reason != hooks.ReasonTimeout {
			t.Errorf("a run whose seed Job hangs, with a TTL of 0, returned %v; want it waited for until its timeout", err)
		}
	})
}

// heldHook is a ConfigMap hook of post-install that the finalizer
// capstan.dev/test-hold keeps from going, with the delete policies given.
func heldHook(t *testing.T, ns, name string, finalizer bool, policies ...string) render.Hook {
	t.Helper()
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("v1")
	obj.SetKind("ConfigMap")
	obj.SetNamespace(ns)
	obj.SetName(name)
	if finalizer {
		obj.SetFinalizers([]string{heldBy})
	}
	t.Cleanup(func() { releaseHeld(t, ns, name) })
	return render.Hook{Object: obj, Events: []string{"post-install"}, DeletePolicies: policies, Template: "held/templates/" + name + ".yaml"}
}

const heldBy = "capstan.dev/test-hold"

// releaseHeld removes the test's finalizer, so the object and its namespace
// can go.
func releaseHeld(t *testing.T, ns, name string) {
	cm := &corev1.ConfigMap{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
		return
	}
	patch := client.MergeFrom(cm.DeepCopy())
	cm.Finalizers = nil
	if err := admin.Patch(context.Background(), cm, patch); err != nil {
		t.Errorf("releasing %s/%s: %v", ns, name, err)
	}
}

// runWithin runs the hooks of post-install with a hook timeout of ten
// minutes, and fails the test if the run takes longer than limit.
func (f *fixture) runWithin(t *testing.T, hs []render.Hook, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f.run("post-install", hs, 10*time.Minute) }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("the run still waits after %s for an object a finalizer holds", limit)
	}
	return nil
}

// TestFinalizerHeldHookStallsSoon runs hooks whose objects a finalizer no
// one removes holds: an earlier run's object that before-hook-creation
// must delete first, and one that hook-succeeded deletes after it
// succeeded. With a hook timeout of ten minutes, each run ends within
// the delete wait (two seconds here, thirty by default) with a
// *hooks.Error that names the finalizer, which the controller stalls on,
// rather than holding its worker for the timeout, or a plain error it
// would retry with backoff, running every hook of the event again.
func TestFinalizerHeldHookStallsSoon(t *testing.T) {
	t.Run("before-hook-creation", func(t *testing.T) {
		f := newFixture(t)
		f.runner.DeleteWait = 2 * time.Second
		earlier := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "held", Finalizers: []string{heldBy}}}
		if err := admin.Create(context.Background(), earlier); err != nil {
			t.Fatal(err)
		}
		err := f.runWithin(t, []render.Hook{heldHook(t, f.ns, "held", false)}, 60*time.Second)
		e := hookError(t, err)
		if e.Reason != hooks.ReasonCreateFailed || e.Hook.Name != "held" || !strings.Contains(e.Error(), heldBy) {
			t.Errorf("the run returned %v; want the hook that could not be run, naming the finalizer %s", err, heldBy)
		}
	})

	t.Run("hook-succeeded", func(t *testing.T) {
		f := newFixture(t)
		f.runner.DeleteWait = 2 * time.Second
		err := f.runWithin(t, []render.Hook{heldHook(t, f.ns, "held-after", true, hooks.HookSucceeded)}, 60*time.Second)
		e := hookError(t, err)
		if e.Reason != hooks.ReasonDeleteFailed || e.Hook.Name != "held-after" || !strings.Contains(e.Error(), heldBy) || !strings.Contains(e.Error(), "succeeded, but deleting it") {
			t.Errorf("the run returned %v; want the hook whose hook-succeeded delete failed, naming the finalizer %s", err, heldBy)
		}
	})
}

// TestAHeldLeftoverCostsOneWait records a hook's ConfigMap that a finalizer
// no one removes holds: the first clean-up deletes it and waits its bound,
// and keeps it in the record with an error naming the finalizer; the next
// one sees its delete already sent and takes it as going, without waiting
// again, so a held leftover does not hold a worker on every look.
func TestAHeldLeftoverCostsOneWait(t *testing.T) {
	f := newFixture(t)
	f.runner.DeleteWait = 2 * time.Second
	ctx := context.Background()
	held := heldHook(t, f.ns, "held-leftover", true, hooks.HookSucceeded).Object
	held.SetAnnotations(map[string]string{hooks.RunAnnotation: "post-install/one"})
	if err := admin.Create(ctx, held); err != nil {
		t.Fatal(err)
	}
	recorded := []capstanv1.HookObject{{ObjectRef: capstanv1.RefOf(held), Run: "post-install/one"}}
	req := hooks.Request{Applier: f.applier, Addon: f.addon, Event: "post-install", Timeout: minute}
	left, err := f.runner.CleanUp(ctx, req, recorded)
	if len(left) != 1 || !hooks.IsCleanUpError(err) || !strings.Contains(err.Error(), heldBy) || strings.Contains(err.Error(), "tries again") {
		t.Fatalf("the first clean-up = %v, %v; want the held ConfigMap left, with an error naming %s and no try again", left, err, heldBy)
	}
	start := time.Now()
	left, err = f.runner.CleanUp(ctx, req, left)
	if err != nil || len(left) > 0 {
		t.Fatalf("the second clean-up = %v, %v; want the ConfigMap taken as going", left, err)
	}
	if took := time.Since(start); took >= f.runner.DeleteWait {
		t.Errorf("the second clean-up took %s; want no second wait of %s for a delete already sent", took, f.runner.DeleteWait)
	}
}
