package hooks_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/hooks"
)

// refuseAnApply makes the API server answer the fixture's first apply of
// the object name with 429 (Too Many Requests), as API Priority and
// Fairness does under load; the applies after it are answered.
func (f *fixture) refuseAnApply(name string) {
	var refused atomic.Bool
	f.applier.Client = interceptor.NewClient(admin, interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			raw, err := json.Marshal(obj)
			if err == nil && strings.Contains(string(raw), `"name":"`+name+`"`) && refused.CompareAndSwap(false, true) {
				return apierrors.NewTooManyRequests("slow down", 1)
			}
			return c.Apply(ctx, obj, opts...)
		},
	})
}

// TestTransientCreateKeepsWhatSucceeded runs a pre-upgrade event whose
// migrate Job, with hook-succeeded, succeeds, and whose second Job the API
// server cannot take for a moment (429). No hook failed: the error says
// so, and the migrate Job is left, not deleted by its policy as for a
// failure. The retry, which goes on from the run at the hook status.hook
// names, does not run the migrate Job again: Done finds the Job the first
// run made. Before, the run deleted it, and the retry, seconds later,
// ran the migration a second time.
func TestTransientCreateKeepsWhatSucceeded(t *testing.T) {
	f := newFixture(t)
	hs := f.hooksOf(`{hooks: {migrate: {deletePolicy: "before-hook-creation,hook-succeeded"}}, extraHooks: [{name: second, kind: Job, events: pre-upgrade, weight: "1"}]}`, true)
	f.refuseAnApply("db-second")
	ctx := context.Background()
	var shown []capstanv1.HookProgress
	req := hooks.Request{
		Applier: f.applier, Addon: f.addon, Event: "pre-upgrade", Hooks: hs, Timeout: minute, Run: "pre-upgrade/one",
		Progress: func(p capstanv1.HookProgress) error { shown = append(shown, p); return nil },
	}
	err := f.runner.Run(ctx, req)
	e := hookError(t, err)
	if e.Hook.Name != "db-second" || !hooks.Transient(err) || !apierrors.IsTooManyRequests(err) {
		t.Fatalf("the first run returned %v; want the second Job, not taken for a moment", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "no hook failed") || strings.Contains(msg, "The next sync runs the hook again") {
		t.Errorf("the error says %q; want that no hook failed and that the run goes on", msg)
	}
	if len(e.Left) != 1 || e.Left[0].Name != "db-migrate" {
		t.Errorf("the error leaves %v; want it to name the migrate Job, for the caller to record and delete when no retry comes", e.Left)
	}
	migrate := f.job("db-migrate")
	if migrate == nil || migrate.Status.Succeeded != 1 || migrate.DeletionTimestamp != nil {
		t.Fatalf("migrate %s; want the Job that succeeded left for the retry", jobString(migrate))
	}
	if len(shown) == 0 || shown[len(shown)-1].Name != "db-second" {
		t.Fatalf("progress %+v; want the second Job shown last", shown)
	}

	last := shown[len(shown)-1]
	req.Resume, req.Waiting, req.WaitingSince = true, &last.ObjectRef, last.Since.Time
	sameMigrate := false
	req.Done = func(_ context.Context, objs []capstanv1.ObjectRef) error {
		j := f.job("db-migrate")
		sameMigrate = j != nil && j.UID == migrate.UID
		return nil
	}
	if err := f.runner.Run(ctx, req); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if !sameMigrate {
		t.Error("the retry ran the migrate Job again, which had succeeded in the run it goes on from")
	}
	if j := f.job("db-second"); j == nil || j.Status.Succeeded != 1 {
		t.Errorf("second %s; want it run, succeeded", jobString(j))
	}
	if j := f.job("db-migrate"); j != nil && j.DeletionTimestamp == nil {
		t.Errorf("migrate %s; want it deleted by its policy once the event succeeded", j.UID)
	}
}
