package hooks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/hooks"
)

// TestProgressFailureMakesNothing runs the pre-upgrade hooks while a
// migrate Job of the same run already runs (made by another controller,
// as a shard that now selects the Addon would), and the caller cannot
// record the migrate hook (Request.Progress fails): the run stops there
// with a *hooks.ProgressError that wraps the caller's error, the running
// Job is neither deleted by its before-hook-creation policy nor replaced,
// and the hook before it, which succeeded and has hook-succeeded, is not
// cleaned up: nothing in the cluster changes once the record fails.
func TestProgressFailureMakesNothing(t *testing.T) {
	f := newFixture(t)
	hs := f.hooksOf(`{hooks: {migrate: {hang: true}}, extraHooks: [{name: first, kind: ConfigMap, events: pre-upgrade, weight: "-20", deletePolicy: hook-succeeded}]}`, true)
	req := hooks.Request{Applier: f.applier, Addon: f.addon, Event: "pre-upgrade", Hooks: hs, Timeout: minute,
		Run: "pre-upgrade/one", Yield: time.Second}
	ctx := context.Background()
	if err := f.runner.Run(ctx, req); !hooks.IsRunning(err) {
		t.Fatalf("the first run returned %v; want the migrate Job left running", err)
	}
	running := f.job("db-migrate")
	if running == nil {
		t.Fatal("the first run made no migrate Job")
	}

	refused := errors.New("the status write timed out")
	var reported []string
	req.Progress = func(p capstanv1.HookProgress) error {
		reported = append(reported, p.Name)
		if p.Name == "db-migrate" {
			return refused
		}
		return nil
	}
	err := f.runner.Run(ctx, req)
	var pe *hooks.ProgressError
	if !errors.As(err, &pe) || !errors.Is(err, refused) || pe.Hook.Name != "db-migrate" || hooks.IsHookError(err) {
		t.Fatalf("a run whose record of the migrate hook failed returned %v; want a *hooks.ProgressError for db-migrate that wraps the caller's error, and no hook failure", err)
	}
	if len(reported) != 2 || reported[1] != "db-migrate" {
		t.Errorf("progress reported %v; want db-first, then db-migrate", reported)
	}
	if j := f.job("db-migrate"); j == nil || j.UID != running.UID || j.DeletionTimestamp != nil {
		t.Errorf("migrate Job %s; want the running one (uid %s) left as it was", jobString(j), running.UID)
	}
	if f.configMap("db-first") == nil {
		t.Error("the hook-succeeded ConfigMap of the hook before it was deleted; a run that stops before a hook must clean nothing up")
	}
}
