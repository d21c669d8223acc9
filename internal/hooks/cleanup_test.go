package hooks_test

import (
	"context"
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/hooks"
)

// TestCleanUpLeavesWhatDidNotSucceed runs a pre-upgrade event whose dump
// Job (hook-succeeded) succeeds and whose migration Job (hook-succeeded,
// no hook-failed) fails, as a run a change replaced records both before
// it knows how the second ends. CleanUp of the run's objects deletes the
// dump Job and leaves the migration that failed, as Helm leaves a hook
// that failed, and returns no error for it.
func TestCleanUpLeavesWhatDidNotSucceed(t *testing.T) {
	f := newFixture(t)
	hs := f.hooksOf(`{hooks: {migrate: {deletePolicy: hook-succeeded, fail: true}}, extraHooks: [{name: dump, kind: Job, events: pre-upgrade, weight: "-10", deletePolicy: hook-succeeded}]}`, true)
	ctx := context.Background()
	req := hooks.Request{Applier: f.applier, Addon: f.addon, Event: "pre-upgrade", Hooks: hs, Timeout: minute, Run: "pre-upgrade/one", KeepForRetry: true}
	if e := hookError(t, f.runner.Run(ctx, req)); e.Hook.Name != "db-migrate" {
		t.Fatalf("the run returned %v; want the migration's failure", e)
	}
	if j := f.job("db-dump"); j == nil || j.Status.Succeeded != 1 {
		t.Fatalf("dump %v; want the Job that succeeded, kept", j)
	}
	var objs []capstanv1.HookObject
	selected := hooks.Select(hs, "pre-upgrade")
	last := capstanv1.RefOf(selected[len(selected)-1].Object)
	for _, ref := range hooks.SucceededRefs(hs, "pre-upgrade", last) {
		objs = append(objs, capstanv1.HookObject{ObjectRef: ref, Run: req.Run})
	}
	if len(objs) != 2 {
		t.Fatalf("SucceededRefs = %v; want the dump and migrate Jobs", objs)
	}
	left, err := f.runner.CleanUp(ctx, req, objs)
	if err != nil || len(left) > 0 {
		t.Fatalf("CleanUp left %v: %v", left, err)
	}
	if j := f.job("db-dump"); j != nil {
		t.Errorf("dump %v; want it deleted", j)
	}
	if j := f.job("db-migrate"); j == nil {
		t.Error("the migration Job that failed was deleted; want it left as it is")
	}
}
