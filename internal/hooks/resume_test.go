package hooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/render"
)

// runAs runs the post-install hooks as one run (run), resuming or not.
func (f *fixture) runAs(ctx context.Context, hs []render.Hook, run string, resume bool, waiting *capstanv1.ObjectRef) error {
	return f.runner.Run(ctx, hooks.Request{
		Applier: f.applier, Addon: f.addon, Event: "post-install", Hooks: hs, Timeout: minute,
		Run: run, Resume: resume, Waiting: waiting,
	})
}

// TestResumeSkipsWhatSucceeded runs the post-install seed hook, then goes
// on from that run as a controller restarted before it recorded the end
// would: the seed Job, which carries the run and succeeded, is not run
// again. A run that resumes another run does not take the Job for its own:
// that one runs the hook anew.
func TestResumeSkipsWhatSucceeded(t *testing.T) {
	f := newFixture(t)
	hs := f.hooksOf("", false)
	ctx := context.Background()
	if err := f.runAs(ctx, hs, "post-install/one", false, nil); err != nil {
		t.Fatal(err)
	}
	first := f.job("db-seed")
	if first == nil || first.Annotations[hooks.RunAnnotation] != "post-install/one" {
		t.Fatalf("seed %v; want a Job stamped with its run", first)
	}
	if err := f.runAs(ctx, hs, "post-install/one", true, nil); err != nil {
		t.Fatal(err)
	}
	if j := f.job("db-seed"); j == nil || j.UID != first.UID {
		t.Fatalf("resuming the run that made it replaced the seed Job that had succeeded (%v)", j)
	}
	if err := f.runAs(ctx, hs, "post-install/two", true, nil); err != nil {
		t.Fatal(err)
	}
	second := f.job("db-seed")
	if second == nil || second.UID == first.UID || second.Status.Succeeded != 1 {
		t.Fatalf("another run kept the Job of run one (%v); it must run the hook anew", second)
	}
}

// TestResumeWaitsForTheHookItWaitedFor stops a run while it waits for the
// seed Job, which waits for a node, as a controller killed then would. The
// run that goes on from it, told that the stopped run waited for the seed
// hook, waits for the same Job, which succeeds once the node is there,
// rather than deleting it and running it anew. Told nothing (the hook had
// timed out, and status no longer shows it), it starts the hook anew.
func TestResumeWaitsForTheHookItWaitedFor(t *testing.T) {
	f := newFixture(t)
	label := "capstan.dev/" + f.ns
	hs := f.hooksOf(`{hooks: {seed: {nodeLabel: "`+label+`"}}}`, false)
	stop := func(run string, resume bool, waiting *capstanv1.ObjectRef) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if err := f.runAs(ctx, hs, run, resume, waiting); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a run stopped while the seed Job waits for a node returned %v", err)
		}
	}
	stop("post-install/one", false, nil)
	first := f.job("db-seed")
	if first == nil || first.Status.Succeeded != 0 {
		t.Fatalf("seed %v; want a Job that still waits", first)
	}
	seed := &capstanv1.ObjectRef{APIVersion: "batch/v1", Kind: "Job", Namespace: f.ns, Name: "db-seed"}
	stop("post-install/one", true, seed)
	if j := f.job("db-seed"); j == nil || j.UID != first.UID {
		t.Fatal("the run that went on from the stopped one replaced the Job it was waiting for")
	}
	stop("post-install/one", true, nil) // as after a timeout: status shows no hook
	second := f.job("db-seed")
	if second == nil || second.UID == first.UID {
		t.Fatal("a run that was told of no hook waited for kept the Job; it must start the hook anew")
	}

	f.labelNode(label)
	if err := f.runAs(context.Background(), hs, "post-install/one", true, seed); err != nil {
		t.Fatal(err)
	}
	if j := f.job("db-seed"); j == nil || j.UID != second.UID || j.Status.Succeeded != 1 {
		t.Fatalf("seed %v; want the Job the stopped run waited for, succeeded", j)
	}
}

// labelNode puts label: "true" on one of the cluster's nodes until the test
// ends.
func (f *fixture) labelNode(label string) {
	f.t.Helper()
	ctx := context.Background()
	nodes := &corev1.NodeList{}
	if err := admin.List(ctx, nodes); err != nil || len(nodes.Items) == 0 {
		f.t.Fatalf("listing nodes: %v (%d)", err, len(nodes.Items))
	}
	name := nodes.Items[0].Name
	setLabel := func(value *string) error {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]*string{label: value}}})
		return admin.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, patch))
	}
	v := "true"
	if err := setLabel(&v); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		if err := setLabel(nil); err != nil {
			f.t.Errorf("removing the node label: %v", err)
		}
	})
}

// TestDoneComesBeforeTheCleanUp runs the seed hook, with hook-succeeded,
// whose Done fails as a controller stopped after it recorded the event
// would: the seed Job is still there when Done is called, Done is given
// it, and Run deletes nothing. CleanUp then deletes only an object that
// carries the run it names, reading no render, and may be called again
// once the object is gone.
func TestDoneComesBeforeTheCleanUp(t *testing.T) {
	f := newFixture(t)
	hs := f.hooksOf(`{hooks: {seed: {deletePolicy: hook-succeeded}}}`, false)
	ctx := context.Background()
	stopped := errors.New("stopped after the record")
	seen := false
	var given []capstanv1.ObjectRef
	err := f.runner.Run(ctx, hooks.Request{
		Applier: f.applier, Addon: f.addon, Event: "post-install", Hooks: hs, Timeout: minute, Run: "post-install/one",
		Done: func(_ context.Context, objs []capstanv1.ObjectRef) error {
			seen, given = f.job("db-seed") != nil, objs
			return stopped
		},
	})
	if !errors.Is(err, stopped) {
		t.Fatalf("Run = %v; want Done's error", err)
	}
	if !seen {
		t.Fatal("the seed Job was gone when Done was called; want it deleted only after")
	}
	if len(given) != 1 || given[0].Kind != "Job" || given[0].Name != "db-seed" {
		t.Fatalf("Done was given %v; want the seed Job alone", given)
	}
	cleanUp := func(run string) {
		t.Helper()
		// NOTE: no Hooks: the clean-up reads only the objects it is given.
		left, err := f.runner.CleanUp(ctx, hooks.Request{Applier: f.applier, Addon: f.addon, Event: "post-install", Timeout: minute},
			[]capstanv1.HookObject{{ObjectRef: given[0], Run: run}})
		if err != nil || len(left) > 0 {
			t.Fatalf("CleanUp(%s) = %v, %v", run, left, err)
		}
	}
	cleanUp("post-install/two")
	if f.job("db-seed") == nil {
		t.Fatal("a clean-up of another run deleted the seed Job")
	}
	cleanUp("post-install/one")
	if f.job("db-seed") != nil {
		t.Fatal("the clean-up of its run left the seed Job")
	}
	cleanUp("post-install/one")
}
