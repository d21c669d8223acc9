package controller_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/hooks"
)

// refusedRead is what a hook runner whose read the API server refused
// saw: the UID of the Job whose read it refused, and what the run
// returned.
type refusedRead struct {
	uid types.UID
	err error
}

// refusingHooks is a hook runner whose applier has the API server refuse
// (Forbidden) its first read of the Job name once it exists, in a run of
// event, as an authorizer that fails for a moment would. The controller's
// own reads are answered.
type refusingHooks struct {
	controller.HookRunner
	event, name string
	refused     atomic.Bool
	result      chan refusedRead
}

func (h *refusingHooks) Run(ctx context.Context, req hooks.Request) error {
	if req.Event != h.event || h.refused.Load() {
		return h.HookRunner.Run(ctx, req)
	}
	var uid types.UID
	a := *req.Applier
	a.Client = refusingClient{Client: a.Client, refuse: func(key client.ObjectKey, obj client.Object) error {
		if key.Name != h.name || !h.refused.CompareAndSwap(false, true) {
			return nil
		}
		uid = obj.GetUID()
		return apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, key.Name, errors.New("no reads for a moment"))
	}}
	req.Applier = &a
	err := h.HookRunner.Run(ctx, req)
	if uid != "" {
		h.result <- refusedRead{uid: uid, err: err}
	}
	return err
}

// refusingClient answers a read that succeeds with refuse's error.
type refusingClient struct {
	client.Client
	refuse func(client.ObjectKey, client.Object) error
}

func (c refusingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	return c.refuse(key, obj)
}

// TestRefusedHookReadLeavesTheRunAsItIs installs the dbapp chart whose
// post-install seed Job, with hook-succeeded, succeeds, and whose second
// Job, with hook-failed, waits for a node; the API server refuses one read
// of the second Job while the controller waits for it. No hook failed:
// the second Job is left running, status.hook goes on naming it, and
// status.pendingHook names the seed Job for the retry, which goes on from
// the same run once the node is there: neither Job is made again, and the
// seed Job is deleted once the event has succeeded. Before, the refused
// read had hook-failed delete the running Job and the run delete the seed
// Job, and the retry ran both anew.
func TestRefusedHookReadLeavesTheRunAsItIs(t *testing.T) {
	ns := newNamespace(t)
	rec := recordEvents(t, ns)
	label := "capstan.dev/" + ns
	h := &refusingHooks{HookRunner: reconciler.Hooks, event: "post-install", name: "db-second", result: make(chan refusedRead, 1)}
	shard := startShardWith(t, "read-"+ns[len(ns)-5:], func(r *controller.AddonReconciler) { r.Hooks = h })
	a := dbapp(t, ns, `{hooks: {seed: {deletePolicy: hook-succeeded}}, extraHooks: [{name: second, kind: Job, events: post-install, weight: "1", deletePolicy: hook-failed, nodeLabel: "`+label+`"}]}`, shard)

	var refused refusedRead
	select {
	case refused = <-h.result:
	case <-time.After(90 * time.Second):
		t.Fatal("the controller never came to read the second Job")
	}
	if !hooks.IsReadError(refused.err) || hooks.IsHookError(refused.err) || !apierrors.IsForbidden(refused.err) {
		t.Errorf("the run returned %v; want a refused read, no hook's failure", refused.err)
	}
	seed := job(t, ns, "db-seed")
	if seed == nil || seed.Status.Succeeded != 1 {
		t.Fatalf("seed %s; want the Job that succeeded left for the retry", jobString(seed))
	}
	got := waitFor(t, a, 30*time.Second, "status.hook to name the second Job, and status.pendingHook the seed Job", func(cur *capstanv1.Addon) bool {
		p := cur.Status.PendingHook
		return cur.Status.Hook != nil && cur.Status.Hook.Name == "db-second" && p != nil && len(p.Objects) == 1 && p.Objects[0].Name == "db-seed"
	})
	if j := job(t, ns, "db-second"); j == nil || j.UID != refused.uid || j.DeletionTimestamp != nil {
		t.Fatalf("second %s; want the running Job whose read was refused (%s), left as it is", jobString(j), refused.uid)
	}
	if p := got.Status.PendingHook; p.Objects[0].Run != seed.Annotations[hooks.RunAnnotation] {
		t.Errorf("status.pendingHook names the seed Job of run %s; want %s", p.Objects[0].Run, seed.Annotations[hooks.RunAnnotation])
	}
	if isStalled(got) {
		t.Errorf("the add-on is Stalled (%s); no hook failed", readyMessage(got))
	}

	labelNode(t, label)
	synced(t, a)
	if n := rec.rerunsAfterSuccess("db-seed"); n > 0 {
		t.Errorf("the seed Job was created again %d times after it had succeeded", n)
	}
	if n := rec.count("Job/db-second", watch.Added); n != 1 {
		t.Errorf("the second Job was created %d times; want once", n)
	}
	if j := job(t, ns, "db-second"); j == nil || j.UID != refused.uid || j.Status.Succeeded != 1 {
		t.Errorf("second %s; want the Job whose read was refused, succeeded", jobString(j))
	}
	eventually(t, 30*time.Second, "the seed Job to be deleted by its policy", func() bool { return job(t, ns, "db-seed") == nil })
}

// busyHooks is a hook runner whose applier has the API server answer its
// first apply of the object name, in a run of event, with 429 (Too Many
// Requests), as API Priority and Fairness does under load.
type busyHooks struct {
	controller.HookRunner
	event, name string
	refused     atomic.Bool
	result      chan error
}

func (h *busyHooks) Run(ctx context.Context, req hooks.Request) error {
	if req.Event != h.event || h.refused.Load() {
		return h.HookRunner.Run(ctx, req)
	}
	a := *req.Applier
	a.Client = busyClient{Client: a.Client, busy: func(obj runtime.ApplyConfiguration) error {
		raw, err := json.Marshal(obj)
		if err != nil || !strings.Contains(string(raw), `"name":"`+h.name+`"`) || !h.refused.CompareAndSwap(false, true) {
			return nil
		}
		return apierrors.NewTooManyRequests("slow down", 1)
	}}
	req.Applier = &a
	err := h.HookRunner.Run(ctx, req)
	if h.refused.Load() {
		h.result <- err
	}
	return err
}

// busyClient answers an apply with busy's error, when it gives one.
type busyClient struct {
	client.Client
	busy func(runtime.ApplyConfiguration) error
}

func (c busyClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := c.busy(obj); err != nil {
		return err
	}
	return c.Client.Apply(ctx, obj, opts...)
}

// TestBusyHookCreateGoesOnFromTheRun installs the dbapp chart whose
// pre-install initdb Job succeeds and whose second pre-install Job the API
// server cannot take for a moment (429). No hook failed: status.hook goes
// on naming the second Job, and the retry, with backoff, goes on from the
// run: the initdb Job is made once. Before,
// status.hook was cleared, and the retry, seconds later, ran every hook
// anew, initdb's before-hook-creation deleting its Completed Job.
func TestBusyHookCreateGoesOnFromTheRun(t *testing.T) {
	ns := newNamespace(t)
	rec := recordEvents(t, ns)
	h := &busyHooks{HookRunner: reconciler.Hooks, event: "pre-install", name: "db-second", result: make(chan error, 1)}
	shard := startShardWith(t, "busy-"+ns[len(ns)-5:], func(r *controller.AddonReconciler) { r.Hooks = h })
	a := dbapp(t, ns, `{extraHooks: [{name: second, kind: Job, events: pre-install, weight: "1"}]}`, shard)

	var err error
	select {
	case err = <-h.result:
	case <-time.After(90 * time.Second):
		t.Fatal("the controller never came to apply the second Job")
	}
	if !hooks.Transient(err) {
		t.Errorf("the run returned %v; want the second Job, not taken for a moment", err)
	}
	synced(t, a)
	if n := rec.count("Job/db-initdb", watch.Added); n != 1 {
		t.Errorf("the initdb Job was created %d times; want once: it had succeeded in the run the retry goes on from", n)
	}
	if n := rec.count("Job/db-second", watch.Added); n != 1 {
		t.Errorf("the second Job was created %d times; want once", n)
	}
}

// busyRun is a hook runner whose applier has the API server answer every
// apply of the object name with 429 (Too Many Requests) in the first run
// of event that makes it, and in that run alone: the API server stays
// overloaded for as long as that run is retried.
type busyRun struct {
	controller.HookRunner
	event, name string
	mu          sync.Mutex
	run         string
	refused     chan error
}

func (h *busyRun) Run(ctx context.Context, req hooks.Request) error {
	if req.Event != h.event {
		return h.HookRunner.Run(ctx, req)
	}
	h.mu.Lock()
	if h.run == "" {
		h.run = req.Run
	}
	busy := h.run == req.Run
	h.mu.Unlock()
	if !busy {
		return h.HookRunner.Run(ctx, req)
	}
	a := *req.Applier
	a.Client = busyClient{Client: a.Client, busy: func(obj runtime.ApplyConfiguration) error {
		raw, err := json.Marshal(obj)
		if err != nil || !strings.Contains(string(raw), `"name":"`+h.name+`"`) {
			return nil
		}
		return apierrors.NewTooManyRequests("slow down", 1)
	}}
	req.Applier = &a
	err := h.HookRunner.Run(ctx, req)
	select {
	case h.refused <- err:
	default:
	}
	return err
}

// TestBusyHookRunNeverRetriedLeavesNothing installs the dbapp chart whose
// pre-install initdb Job, with hook-succeeded, succeeds, and whose second
// pre-install Job the API server cannot take (429) for as long as that
// run is retried. The initdb Job is kept for the retry, which never
// comes: the values change, and the new render drops the initdb hook. The
// new run goes on without it, and the initdb Job the first run left is
// deleted. Before, no record named it, and it stayed for good.
func TestBusyHookRunNeverRetriedLeavesNothing(t *testing.T) {
	ns := newNamespace(t)
	h := &busyRun{HookRunner: reconciler.Hooks, event: "pre-install", name: "db-second", refused: make(chan error, 1)}
	shard := startShardWith(t, "busyrun-"+ns[len(ns)-5:], func(r *controller.AddonReconciler) { r.Hooks = h })
	second := `extraHooks: [{name: second, kind: Job, events: pre-install, weight: "1"}]`
	a := dbapp(t, ns, `{hooks: {initdb: {deletePolicy: "before-hook-creation,hook-succeeded"}}, `+second+`}`, shard)

	select {
	case err := <-h.refused:
		if !hooks.Transient(err) {
			t.Fatalf("the run returned %v; want the second Job, not taken for a moment", err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("the controller never came to apply the second Job")
	}
	initdb := job(t, ns, "db-initdb")
	if initdb == nil || initdb.Status.Succeeded != 1 || initdb.DeletionTimestamp != nil {
		t.Fatalf("initdb %s; want the Job that succeeded left for the retry", jobString(initdb))
	}
	waitFor(t, a, 30*time.Second, "status.hook to name the second Job", func(cur *capstanv1.Addon) bool {
		return cur.Status.Hook != nil && cur.Status.Hook.Name == "db-second"
	})

	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.Values = jsonValues(`{hooks: {initdb: {enabled: false}}, ` + second + `}`)
	})
	synced(t, a)
	if j := job(t, ns, "db-second"); j == nil || j.Status.Succeeded != 1 {
		t.Errorf("second %s; want it run by the new render, succeeded", jobString(j))
	}
	eventually(t, 30*time.Second, "the initdb Job the first run left to be deleted", func() bool {
		j := job(t, ns, "db-initdb")
		return j == nil || j.DeletionTimestamp != nil
	})
}
