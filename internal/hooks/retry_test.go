package hooks_test

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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

// TestRetryFailedOtherwiseDeletesWhatSucceeded fails a post-install event
// at its second Job with an error that is no *hooks.Error: the API server
// refuses to read the Job once it runs (Forbidden). No error names the
// seed Job, with hook-succeeded, for the caller to keep it for the retry,
// so the run deletes it as Helm does, rather than leave it for ever.
func TestRetryFailedOtherwiseDeletesWhatSucceeded(t *testing.T) {
	f := newFixture(t)
	hs := f.hooksOf(`{hooks: {seed: {deletePolicy: hook-succeeded}}, extraHooks: [{name: second, kind: Job, events: post-install, weight: "1", hang: true}]}`, false)
	f.applier.Client = interceptor.NewClient(admin, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil || key.Name != "db-second" {
				return err
			}
			return apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, key.Name, errors.New("no reads"))
		},
	})
	req := hooks.Request{
		Applier: f.applier, Addon: f.addon, Event: "post-install", Hooks: hs, Timeout: minute,
		Run: "post-install/one", KeepForRetry: true,
	}
	err := f.runner.Run(context.Background(), req)
	if he := (*hooks.Error)(nil); err == nil || errors.As(err, &he) {
		t.Fatalf("the run returned %v; want a plain error for the read it was refused", err)
	}
	if j := f.job("db-seed"); j != nil {
		t.Errorf("seed %s; want it deleted: no error named it for the retry", j.UID)
	}
}
