package hooks_test

import (
	"context"
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/render"
)

// TestRetryKeepsWhatSucceeded fails a post-install event at its second
// hook, a Job of weight 1, after the seed Job, with hook-succeeded, has
// succeeded: the seed Job is left for the retry and named in the error,
// not deleted as Helm deletes it. The retry, which goes on from the same
// run once the second Job passes, does not run the seed Job again: Done
// finds the Job the first run made, and is given it, and it is deleted
// once the event has succeeded.
func TestRetryKeepsWhatSucceeded(t *testing.T) {
	f := newFixture(t)
	values := func(fail string) []render.Hook {
		return f.hooksOf(`{hooks: {seed: {deletePolicy: hook-succeeded}}, extraHooks: [{name: second, kind: Job, events: post-install, weight: "1", fail: `+fail+`}]}`, false)
	}
	ctx := context.Background()
	req := hooks.Request{
		Applier: f.applier, Addon: f.addon, Event: "post-install", Hooks: values("true"), Timeout: minute,
		Run: "post-install/one", KeepForRetry: true,
	}
	e := hookError(t, f.runner.Run(ctx, req))
	if e.Hook.Name != "db-second" {
		t.Fatalf("the first run returned %v; want the second Job's failure", e)
	}
	first := f.job("db-seed")
	if first == nil || first.Status.Succeeded != 1 {
		t.Fatalf("seed %v; want the Job that succeeded left for the retry", first)
	}
	if len(e.Left) != 1 || e.Left[0] != seedRef(f.ns) {
		t.Errorf("the error left %v; want the seed Job", e.Left)
	}

	req.Hooks, req.Resume = values("false"), true
	var seedAtDone *capstanv1.ObjectRef
	sameSeed := false
	req.Done = func(_ context.Context, objs []capstanv1.ObjectRef) error {
		for _, o := range objs {
			if o == seedRef(f.ns) {
				seedAtDone = &o
			}
		}
		j := f.job("db-seed")
		sameSeed = j != nil && j.UID == first.UID
		return nil
	}
	if err := f.runner.Run(ctx, req); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if !sameSeed {
		t.Error("the retry ran the seed Job again, which had succeeded in the run it goes on from")
	}
	if seedAtDone == nil {
		t.Error("Done was not given the seed Job, which its hook-succeeded policy deletes")
	}
	if j := f.job("db-seed"); j != nil {
		t.Errorf("seed %v; want it deleted once the event succeeded", j)
	}
	if j := f.job("db-second"); j == nil || j.Status.Succeeded != 1 {
		t.Errorf("second %v; want the retried Job, succeeded", j)
	}
}
