package controller_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/hooks"
)

// leavingHooks is a hook runner that moves the Addon into another shard
// just before its pre-upgrade hook is recorded: it relabels the Addon,
// waits until the shard's cache has dropped it, and then lets the
// controller record the hook, keeping what that returned.
type leavingHooks struct {
	controller.HookRunner
	cache  client.Client
	addon  *capstanv1.Addon
	to     string
	once   sync.Once
	result chan error
}

func (h *leavingHooks) Run(ctx context.Context, req hooks.Request) error {
	if req.Event != "pre-upgrade" || req.Progress == nil {
		return h.HookRunner.Run(ctx, req)
	}
	progress := req.Progress
	req.Progress = func(p capstanv1.HookProgress) error {
		var moved error
		h.once.Do(func() { moved = leaveShard(ctx, h.cache, h.addon, h.to) })
		if moved != nil {
			return moved
		}
		err := progress(p)
		select {
		case h.result <- err:
		default:
		}
		return err
	}
	return h.HookRunner.Run(ctx, req)
}

// leaveShard relabels the Addon into the shard to and waits until the
// cache of the shard it leaves no longer holds it.
func leaveShard(ctx context.Context, cache client.Client, a *capstanv1.Addon, to string) error {
	key := client.ObjectKeyFromObject(a)
	cur := &capstanv1.Addon{}
	if err := admin.Get(ctx, key, cur); err != nil {
		return err
	}
	cur.Labels[shardLabel] = to
	if err := admin.Update(ctx, cur); err != nil {
		return err
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := cache.Get(ctx, key, &capstanv1.Addon{}); apierrors.IsNotFound(err) {
			return nil
		}
	}
	return context.DeadlineExceeded
}

// TestNoHookJobOnceTheAddonLeftTheShard upgrades an add-on of a shard
// whose pre-upgrade hook is a migration Job, and moves the Addon into
// another shard while the sync runs, just before the migrate hook is
// recorded in status.hook: the record finds the Addon gone from the shard
// and fails, and the old shard makes no migrate Job, applies nothing of
// the upgrade and writes no status. Before, the record's error was
// dropped and the Job was made: the new shard, syncing the same render
// under the same run name, would delete it by its before-hook-creation
// (or have its own deleted), a migration killed part-way and run again.
func TestNoHookJobOnceTheAddonLeftTheShard(t *testing.T) {
	ns := newNamespace(t)
	suffix := ns[len(ns)-5:]
	runner := reconciler.Hooks
	if runner == nil {
		runner = &hooks.Runner{}
	}
	h := &leavingHooks{HookRunner: runner, to: "elsewhere-" + suffix, result: make(chan error, 1)}
	shard := startShardWith(t, "hooks-"+suffix, func(r *controller.AddonReconciler) {
		h.cache = r.Client
		r.Hooks = h
	})
	a := dbapp(t, ns, "", shard)
	h.addon = a
	installed := synced(t, a)

	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`appVersion: "2.0"`) })
	var err error
	select {
	case err = <-h.result:
	case <-time.After(60 * time.Second):
		t.Fatal("the shard never came to record the pre-upgrade hook")
	}
	if err == nil {
		t.Error("recording the pre-upgrade hook of an Addon that left the shard succeeded; want it refused")
	}
	// NOTE: a Job made after the record would be there within a second;
	// the shard's next steps would be too.
	time.Sleep(3 * time.Second)
	if j := job(t, ns, "db-migrate"); j != nil {
		t.Errorf("the old shard made the migrate Job %s (run %s) after the Addon left it; want none", j.Name, j.Annotations[hooks.RunAnnotation])
	}
	if d := configData(t, ns); d["appVersion"] != "1.0" {
		t.Errorf("db-config appVersion = %q; the old shard applied the upgrade after the Addon left it", d["appVersion"])
	}
	got := getAddon(t, a)
	if got.Status.Hook != nil || got.Status.AppliedHash != installed.Status.AppliedHash {
		t.Errorf("the old shard wrote status after the Addon left it: hook %v, appliedHash %s (was %s)", got.Status.Hook, got.Status.AppliedHash, installed.Status.AppliedHash)
	}
}

// TestNoApplyOnceTheAddonLeftTheShard upgrades an add-on of a shard that
// has no pre-upgrade hook, and moves the Addon into another shard just
// before the sync's pre-hooks step: the step after it (the apply) checks
// the shard first, and the old shard applies nothing of the upgrade and
// writes no status. Before, it applied the whole upgrade, while the new
// shard synced the same Addon.
func TestNoApplyOnceTheAddonLeftTheShard(t *testing.T) {
	ns := newNamespace(t)
	suffix := ns[len(ns)-5:]
	var cache client.Client
	var target atomic.Pointer[capstanv1.Addon]
	moved := make(chan error, 1)
	var once sync.Once
	shard := startShardWith(t, "apply-"+suffix, func(r *controller.AddonReconciler) {
		cache = r.Client
		r.BeforeApplyStep = func(ctx context.Context, a *capstanv1.Addon, step string) error {
			if t := target.Load(); step == "pre-hooks" && t != nil && a.Name == t.Name && a.Status.AppliedHash != "" {
				once.Do(func() { moved <- leaveShard(ctx, cache, t, "elsewhere-"+suffix) })
			}
			return nil
		}
	})
	a := dbapp(t, ns, `{hooks: {migrate: {enabled: false}}}`, shard)
	installed := synced(t, a)
	target.Store(a)

	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.Values = jsonValues(`{appVersion: "2.0", hooks: {migrate: {enabled: false}}}`)
	})
	select {
	case err := <-moved:
		if err != nil {
			t.Fatalf("moving the Addon into another shard: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the shard never came to the upgrade's pre-hooks step")
	}
	// NOTE: an apply after the step would be there within a second.
	time.Sleep(3 * time.Second)
	if d := configData(t, ns); d["appVersion"] != "1.0" {
		t.Errorf("db-config appVersion = %q; the old shard applied the upgrade after the Addon left it", d["appVersion"])
	}
	if got := getAddon(t, a); got.Status.AppliedHash != installed.Status.AppliedHash {
		t.Errorf("the old shard recorded an apply after the Addon left it: appliedHash %s (was %s)", got.Status.AppliedHash, installed.Status.AppliedHash)
	}
}
