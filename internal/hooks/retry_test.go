package hooks_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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

// TestRetrySkipsHooksBeforeTheFailure fails a post-install event
// at its second Job, after the seed Job, which has only the default
// policy, succeeded. The TTL controller then deletes the seed Job (a
// chart's ttlSecondsAfterFinished, which prepare raises to five minutes,
// about when the resync retries). The retry goes on from the same run
// and is told the hook the run ended at (Request.Failed): it does not
// make the seed Job again, though nothing of it is left to show that it
// succeeded. Before, it ran the seed Job a second time.
func TestRetrySkipsHooksBeforeTheFailure(t *testing.T) {
	f := newFixture(t)
	values := func(fail string) []render.Hook {
		return f.hooksOf(`{extraHooks: [{name: second, kind: Job, events: post-install, weight: "1", fail: `+fail+`}]}`, false)
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
	seed := f.job("db-seed")
	if seed == nil || seed.Status.Succeeded != 1 {
		t.Fatalf("seed %v; want the Job that succeeded", seed)
	}
	if err := admin.Delete(ctx, seed, client.PropagationPolicy("Background")); err != nil {
		t.Fatal(err)
	}
	eventually(t, minute, "the seed Job gone", func() bool { return f.job("db-seed") == nil })

	req.Hooks, req.Resume, req.Failed = values("false"), true, &e.Hook
	if err := f.runner.Run(ctx, req); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if j := f.job("db-seed"); j != nil {
		t.Errorf("the retry made the seed Job again (%s), which had succeeded in the run it goes on from", j.UID)
	}
	if j := f.job("db-second"); j == nil || j.Status.Succeeded != 1 {
		t.Errorf("second %v; want the retried Job, succeeded", j)
	}
}

// refuseARead makes the API server refuse (Forbidden) the fixture's first
// read of the Job name once it exists, as an authorizer that fails for a
// moment would; the reads after it are answered.
func (f *fixture) refuseARead(name string) {
	var refused atomic.Bool
	f.applier.Client = interceptor.NewClient(admin, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil || key.Name != name || !refused.CompareAndSwap(false, true) {
				return err
			}
			return apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, key.Name, errors.New("no reads"))
		},
	})
}

// readError returns err as a refused read of a hook, or marks the test
// failed and returns an empty one.
func readError(t *testing.T, err error) *hooks.ReadError {
	t.Helper()
	re := &hooks.ReadError{}
	if he := (*hooks.Error)(nil); errors.As(err, &he) || !errors.As(err, &re) {
		t.Errorf("Run returned %v; want a *hooks.ReadError, and no hook's failure", err)
	}
	if !apierrors.IsForbidden(err) {
		t.Errorf("the error %v does not read as the API server's Forbidden", err)
	}
	return re
}

// TestRefusedReadKeepsWhatSucceeded fails a post-install event at its
// second Job with an error that is no hook's failure: the API server
// refuses a read of the Job once it runs (Forbidden). The run leaves the
// seed Job, with hook-succeeded, and names it in the error, for the caller
// to keep for the retry, as for a hook that failed. The retry goes on from
// the same run, waiting for the second Job again (status.hook names it),
// and does not run the seed Job again: Done finds the Job the first run
// made, and it is deleted once the event has succeeded. Before, the run
// deleted the seed Job, and the retry ran it a second time.
func TestRefusedReadKeepsWhatSucceeded(t *testing.T) {
	f := newFixture(t)
	label := "capstan.dev/" + f.ns
	hs := f.hooksOf(`{hooks: {seed: {deletePolicy: hook-succeeded}}, extraHooks: [{name: second, kind: Job, events: post-install, weight: "1", nodeLabel: "`+label+`"}]}`, false)
	f.refuseARead("db-second")
	ctx := context.Background()
	req := hooks.Request{
		Applier: f.applier, Addon: f.addon, Event: "post-install", Hooks: hs, Timeout: minute,
		Run: "post-install/one", KeepForRetry: true,
	}
	re := readError(t, f.runner.Run(ctx, req))
	seed := f.job("db-seed")
	if seed == nil || seed.Status.Succeeded != 1 {
		t.Fatalf("seed %v; want the Job that succeeded left for the retry", seed)
	}
	if len(re.Left) != 1 || re.Left[0] != seedRef(f.ns) {
		t.Errorf("the error left %v; want the seed Job", re.Left)
	}
	second := f.job("db-second")
	if second == nil {
		t.Fatal("the second Job is gone; want it left running")
	}

	f.labelNode(label)
	waiting := capstanv1.RefOf(hs[slices.IndexFunc(hs, func(h render.Hook) bool { return h.Object.GetName() == "db-second" })].Object)
	req.Resume, req.Waiting = true, &waiting
	sameSeed := false
	req.Done = func(_ context.Context, objs []capstanv1.ObjectRef) error {
		j := f.job("db-seed")
		sameSeed = j != nil && j.UID == seed.UID && slices.Contains(objs, seedRef(f.ns))
		return nil
	}
	if err := f.runner.Run(ctx, req); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if !sameSeed {
		t.Error("at Done the seed Job was not the one the first run made, or Done was not given it; the retry ran it again")
	}
	if j := f.job("db-seed"); j != nil {
		t.Errorf("seed %s; want it deleted once the event succeeded", j.UID)
	}
	if j := f.job("db-second"); j == nil || j.UID != second.UID || j.Status.Succeeded != 1 {
		t.Errorf("second %v; want the Job the first run left, succeeded", j)
	}
}

// TestRefusedReadLeavesTheHookRunning refuses a read of the pre-install
// initdb Job, with hook-failed, while the runner waits for it: the Job did
// not fail, and still runs, so its policy does not delete it. A run that
// goes on from that one, told that it waited for initdb, waits for the
// same Job once it can read it, and it succeeds. Before, the refused read
// deleted the running Job as if it had failed.
func TestRefusedReadLeavesTheHookRunning(t *testing.T) {
	f := newFixture(t)
	label := "capstan.dev/" + f.ns
	hs := f.hooksOf(`{hooks: {initdb: {nodeLabel: "`+label+`", deletePolicy: hook-failed}}}`, false)
	f.refuseARead("db-initdb")
	ctx := context.Background()
	var shown []capstanv1.HookProgress
	req := hooks.Request{
		Applier: f.applier, Addon: f.addon, Event: "pre-install", Hooks: hs, Timeout: minute, Run: "pre-install/one",
		Progress: func(p capstanv1.HookProgress) error { shown = append(shown, p); return nil },
	}
	re := readError(t, f.runner.Run(ctx, req))
	if len(shown) != 1 || shown[0].Name != "db-initdb" {
		t.Fatalf("progress %+v; want the initdb Job, shown once", shown)
	}
	if re.Hook != shown[0].ObjectRef {
		t.Errorf("the error names %s; want the initdb Job", re.Hook.Describe())
	}
	first := f.job("db-initdb")
	if first == nil || first.DeletionTimestamp != nil {
		t.Fatalf("initdb %v; want the running Job left as it is: it did not fail", first)
	}

	f.labelNode(label)
	req.Resume, req.Waiting, req.WaitingSince = true, &shown[0].ObjectRef, shown[0].Since.Time
	if err := f.runner.Run(ctx, req); err != nil {
		t.Fatalf("the run that went on: %v", err)
	}
	if j := f.job("db-initdb"); j == nil || j.UID != first.UID || j.Status.Succeeded != 1 {
		t.Errorf("initdb %v; want the Job the first run left, succeeded", j)
	}
}

// refuseReads makes the API server refuse (Forbidden) the fixture's first
// n reads of the Job name once it exists; the reads after them are
// answered.
func (f *fixture) refuseReads(name string, n int32) {
	var refused atomic.Int32
	f.applier.Client = interceptor.NewClient(admin, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil || key.Name != name || refused.Add(1) > n {
				return err
			}
			return apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, key.Name, errors.New("no reads"))
		},
	})
}

// TestRefusedReadsOfAStoppedRunAreNoFailure refuses two reads of the
// post-install second Job, with hook-failed, after the seed Job, with
// hook-succeeded: the run that waits for it ends with a *hooks.ReadError,
// and so does the run that goes on from it (Request.Resume, waiting for
// the second Job), whether or not it was told the Job's UID: its first
// read of the object the stopped run left is refused too. That is no
// hook's failure, which would have the controller clear status.hook, and
// its next sync delete the running Job by before-hook-creation and run
// the seed Job again. Neither Job is made again or deleted, and a third
// run, whose reads are answered, waits for the same Job until it
// succeeds. Before, the second run failed the hook as CreateFailed ("reading
// its object"), or, with no UID, took the hooks before it for not run.
func TestRefusedReadsOfAStoppedRunAreNoFailure(t *testing.T) {
	for _, withUID := range []bool{false, true} {
		name := "without the UID"
		if withUID {
			name = "with the UID"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			label := "capstan.dev/" + f.ns
			hs := f.hooksOf(`{hooks: {seed: {deletePolicy: hook-succeeded}}, extraHooks: [{name: second, kind: Job, events: post-install, weight: "1", deletePolicy: hook-failed, nodeLabel: "`+label+`"}]}`, false)
			f.refuseReads("db-second", 2)
			ctx := context.Background()
			var shown []capstanv1.HookProgress
			req := hooks.Request{
				Applier: f.applier, Addon: f.addon, Event: "post-install", Hooks: hs, Timeout: minute,
				Run: "post-install/one", KeepForRetry: true,
				Progress: func(p capstanv1.HookProgress) error { shown = append(shown, p); return nil },
			}
			_ = readError(t, f.runner.Run(ctx, req))
			seed, second := f.job("db-seed"), f.job("db-second")
			if seed == nil || seed.Status.Succeeded != 1 || second == nil || len(shown) == 0 {
				t.Fatalf("seed %v, second %v, progress %+v; want the seed Job succeeded and the second one running", seed, second, shown)
			}
			last := shown[len(shown)-1]
			if last.Name != "db-second" {
				t.Fatalf("the run showed %s last; want the second Job", last.Describe())
			}

			req.Resume, req.Waiting, req.WaitingSince = true, &last.ObjectRef, last.Since.Time
			if withUID {
				req.WaitingUID = second.UID
			}
			// NOTE: a run that took the refused read for no answer would
			// wait for the second Job; it yields at once instead.
			req.Yield = time.Second
			re := readError(t, f.runner.Run(ctx, req))
			if re.Hook != last.ObjectRef {
				t.Errorf("the error names %s; want the second Job", re.Hook.Describe())
			}
			if j := f.job("db-second"); j == nil || j.UID != second.UID || j.DeletionTimestamp != nil {
				t.Fatalf("second %v; want the running Job left as it is: it did not fail", j)
			}
			if j := f.job("db-seed"); j == nil || j.UID != seed.UID {
				t.Fatalf("seed %v; want the Job the first run made, not run again", j)
			}

			f.labelNode(label)
			req.Yield = 0
			if err := f.runner.Run(ctx, req); err != nil {
				t.Fatalf("the run whose reads are answered: %v", err)
			}
			if j := f.job("db-second"); j == nil || j.UID != second.UID || j.Status.Succeeded != 1 {
				t.Errorf("second %v; want the Job the first run made, succeeded", j)
			}
		})
	}
}

// TestReadsRefusedPastTheTimeoutEndTheHook: a read of the hook a stopped
// run waited for that keeps failing past the hook's timeout ends it as a
// timeout, as the wait would, rather than a read retried at every look
// for ever.
func TestReadsRefusedPastTheTimeoutEndTheHook(t *testing.T) {
	f := newFixture(t)
	label := "capstan.dev/" + f.ns
	hs := f.hooksOf(`{extraHooks: [{name: second, kind: Job, events: post-install, weight: "1", nodeLabel: "`+label+`"}]}`, false)
	ctx := context.Background()
	var shown []capstanv1.HookProgress
	req := hooks.Request{
		Applier: f.applier, Addon: f.addon, Event: "post-install", Hooks: hs, Timeout: minute,
		Run: "post-install/one", Yield: time.Second,
		Progress: func(p capstanv1.HookProgress) error { shown = append(shown, p); return nil },
	}
	if err := f.runner.Run(ctx, req); !hooks.IsRunning(err) {
		t.Fatalf("first run: %v; want a Job left running", err)
	}
	last := shown[len(shown)-1]
	second := f.job(last.Name)
	if second == nil {
		t.Fatalf("no Job %s", last.Name)
	}
	f.refuseReads(last.Name, 1)
	req.Resume, req.Waiting, req.WaitingSince, req.WaitingUID = true, &last.ObjectRef, last.Since.Add(-2*minute), second.UID
	var he *hooks.Error
	if err := f.runner.Run(ctx, req); !errors.As(err, &he) || he.Reason != hooks.ReasonTimeout || !strings.Contains(err.Error(), "could not be read within its timeout") {
		t.Fatalf("a refused read past the timeout: %v; want a Timeout that says the read failed", err)
	}
}

// refuseFirstRead makes the API server refuse (Forbidden) the fixture's
// first read of the Job name, whether or not it exists yet, as an
// authorizer that fails for a moment would.
func (f *fixture) refuseFirstRead(name string) *atomic.Bool {
	var refused atomic.Bool
	f.applier.Client = interceptor.NewClient(admin, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if key.Name == name && refused.CompareAndSwap(false, true) {
				return apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, key.Name, errors.New("no reads"))
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	return &refused
}

// TestRefusedReadOfALaterHookKeepsTheOneWaitedFor runs a pre-install
// event whose initdb Job, with hook-succeeded, is left running (Yield),
// after a zero Job and before a second one. The run that goes on from initdb
// sees it succeed, and then the API server refuses its first read for the
// second Job, before that one was shown in status.hook: the run ends with
// a *hooks.ReadError, and status.hook still names initdb, with its UID.
// The initdb Job must stay until the event has succeeded: the next run
// goes on from it again, and reads it. Before, the refused read had the
// run delete it by its policy, and the next run took it for deleted while
// left running and failed the event (reason Deleted), for good. The zero
// Job, which no look reads again, is deleted by its policy, as for a
// failure.
func TestRefusedReadOfALaterHookKeepsTheOneWaitedFor(t *testing.T) {
	f := newFixture(t)
	label := "capstan.dev/" + f.ns
	y := f.yielding(f.hooksOf(`{hooks: {initdb: {nodeLabel: "`+label+`", deletePolicy: hook-succeeded}}, extraHooks: [{name: zero, kind: Job, events: pre-install, weight: "-20", deletePolicy: hook-succeeded}, {name: second, kind: Job, events: pre-install, weight: "1"}]}`, false), minute)
	y.req.Event, y.req.Run = "pre-install", "pre-install/one"
	initdb := capstanv1.ObjectRef{APIVersion: "batch/v1", Kind: "Job", Namespace: f.ns, Name: "db-initdb"}
	var running *hooks.Running
	err := y.run()
	for i := 0; i < 30 && errors.As(err, &running) && running.Hook != initdb; i++ {
		err = y.run() // the zero Job before it, still running
	}
	if !errors.As(err, &running) || running.Hook != initdb {
		t.Fatalf("the first run returned %v; want the initdb Job left running", err)
	}
	first := f.job("db-initdb")
	if first == nil {
		t.Fatal("no initdb Job")
	}

	refused := f.refuseFirstRead("db-second")
	f.labelNode(label)
	err = y.run()
	for i := 0; i < 60 && hooks.IsRunning(err); i++ {
		err = y.run()
	}
	if !refused.Load() {
		t.Fatalf("the run returned %v and never read the second Job", err)
	}
	if re := readError(t, err); re.Hook.Name != "db-second" {
		t.Fatalf("the error names %s; want the second Job", re.Hook.Describe())
	}
	if y.req.Waiting == nil || *y.req.Waiting != initdb {
		t.Fatalf("the run that goes on waits for %v; want initdb, which status.hook still names", y.req.Waiting)
	}
	if j := f.job("db-initdb"); j == nil || j.UID != first.UID || j.DeletionTimestamp != nil {
		t.Fatalf("initdb %v; want the Job left until the event has succeeded: the next run reads it", j)
	}
	if j := f.job("db-zero"); j != nil && j.DeletionTimestamp == nil {
		t.Errorf("zero %s left; want it deleted by its policy, as for a failure: no look reads it again", j.UID)
	}

	err = y.run()
	for i := 0; i < 60 && hooks.IsRunning(err); i++ {
		err = y.run()
	}
	if err != nil {
		t.Fatalf("the run whose reads are answered: %v", err)
	}
	if j := f.job("db-second"); j == nil || j.Status.Succeeded != 1 {
		t.Errorf("second %v; want it run, succeeded", j)
	}
	if f.job("db-initdb") != nil {
		t.Error("the initdb Job is left; want it deleted by its policy once the event succeeded")
	}
}

// TestRefusedReadOfASyncFailHookCleansUp: SyncFail hooks run once, whatever
// their end, and no look goes on from them, so a refused read of the
// second one still has the first, which succeeded, deleted by its
// hook-succeeded policy, rather than left for a look that never comes.
func TestRefusedReadOfASyncFailHookCleansUp(t *testing.T) {
	f := newFixture(t)
	hs := f.hooksOf(`{hooks: {seed: {deletePolicy: hook-succeeded}}, extraHooks: [{name: second, kind: Job, events: post-install, weight: "1"}]}`, false)
	for i := range hs {
		if slices.Contains(hs[i].Events, "post-install") {
			hs[i].Events = []string{render.SyncFailEvent}
		}
	}
	f.refuseARead("db-second")
	req := hooks.Request{Applier: f.applier, Addon: f.addon, Event: render.SyncFailEvent, Hooks: hs, Timeout: minute, Run: "sync-fail/one"}
	if re := readError(t, f.runner.Run(context.Background(), req)); re.Hook.Name != "db-second" {
		t.Fatalf("the error names %s; want the second Job", re.Hook.Describe())
	}
	if j := f.job("db-seed"); j != nil && j.DeletionTimestamp == nil {
		t.Errorf("seed %s left; want it deleted by its policy, since no look goes on from a SyncFail run", j.UID)
	}
}
