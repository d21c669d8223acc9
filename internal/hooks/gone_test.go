package hooks_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/hooks"
)

// TestJobDeletedWhileWaitedForFails deletes the seed Job while the runner
// waits for it, as the TTL controller deletes a Job with
// ttlSecondsAfterFinished: 0 the moment it finishes: the run fails with a
// *hooks.Error (reason Deleted), which the controller stalls on, rather
// than a plain error it would retry with backoff, running the event's
// hooks and the Job again.
func TestJobDeletedWhileWaitedForFails(t *testing.T) {
	f := newFixture(t)
	hs := f.hooksOf(`{hooks: {seed: {nodeLabel: "capstan.dev/`+f.ns+`"}}}`, false)
	done := make(chan error, 1)
	go func() { done <- f.run("post-install", hs, minute) }()
	eventually(t, 30*time.Second, "the seed Job to run", func() bool { return f.job("db-seed") != nil })
	if err := admin.Delete(context.Background(), f.job("db-seed"), client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the run still waits for a Job that was deleted")
	}
	e := hookError(t, err)
	if e.Reason != hooks.ReasonDeleted || e.Hook != seedRef(f.ns) || !strings.Contains(e.Error(), "was deleted before Capstan read how it ended") {
		t.Errorf("the run returned %v; want the seed Job's deletion", err)
	}
	if f.job("db-seed") != nil {
		t.Error("the run started the deleted Job anew")
	}
}

// TestHookDeletedWhileLeftRunningFails deletes a Job or Pod hook that a
// run left running (Yield), as a person cuts a long migration short or a
// drain evicts a bare Pod, and the Job of the hook before it, as its TTL
// would: the run that goes on from it, told the object's UID as status
// recorded it, fails the hook with the reason Deleted and makes neither
// object again.
func TestHookDeletedWhileLeftRunningFails(t *testing.T) {
	for _, tt := range []struct {
		name   string
		values func(ns string) string
		ref    func(ns string) capstanv1.ObjectRef
		obj    func(f *fixture) client.Object
	}{
		{
			name: "Job",
			values: func(ns string) string {
				return fmt.Sprintf(`{hooks: {seed: {nodeLabel: "capstan.dev/%s"}}, extraHooks: [{name: first, kind: Job, events: post-install, weight: "-1"}]}`, ns)
			},
			ref: seedRef,
			obj: func(f *fixture) client.Object {
				if j := f.job("db-seed"); j != nil {
					return j // NOTE: a nil *Job is no nil client.Object
				}
				return nil
			},
		},
		{
			name: "Pod",
			values: func(string) string {
				// NOTE: kwok leaves a bare Pod Running.
				return `{hooks: {seed: {enabled: false}}, extraHooks: [{name: first, kind: Job, events: post-install, weight: "-1"}, {name: check, kind: Pod, events: post-install, weight: "5"}]}`
			},
			ref: func(ns string) capstanv1.ObjectRef {
				return capstanv1.ObjectRef{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: "db-check"}
			},
			obj: func(f *fixture) client.Object {
				p := &corev1.Pod{}
				if err := admin.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "db-check"}, p); err != nil {
					if !apierrors.IsNotFound(err) {
						f.t.Fatal(err)
					}
					return nil
				}
				return p
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			y := f.yielding(f.hooksOf(tt.values(f.ns), false), minute)
			var running *hooks.Running
			err := y.run()
			for i := 0; i < 30 && errors.As(err, &running) && running.Hook != tt.ref(f.ns); i++ {
				err = y.run() // the Job before it, still running
			}
			if !errors.As(err, &running) || running.Hook != tt.ref(f.ns) {
				t.Fatalf("the first run returned %v; want the %s left running", err, tt.name)
			}
			first := tt.obj(f)
			if first == nil || running.UID != first.GetUID() {
				t.Fatalf("the run left %v running with the UID %q; want the %s's", first, running.UID, tt.name)
			}
			ctx := context.Background()
			for _, o := range []client.Object{first, f.job("db-first")} {
				if err := admin.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground), client.GracePeriodSeconds(0)); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, 30*time.Second, "the hook's object to be gone", func() bool { return tt.obj(f) == nil && f.job("db-first") == nil })

			e := hookError(t, y.run())
			if e.Reason != hooks.ReasonDeleted || e.Hook != tt.ref(f.ns) || !strings.Contains(e.Error(), "was deleted before Capstan read how it ended") {
				t.Errorf("the run that went on returned %v; want the %s's deletion", e, tt.name)
			}
			if o := tt.obj(f); o != nil {
				t.Errorf("the run made the deleted %s again (%s)", tt.name, o.GetUID())
			}
			if f.job("db-first") != nil {
				t.Error("the run ran the hook before it again, which had succeeded in it")
			}
		})
	}
}

// TestHookItsPolicyDeletedIsNotDeleted lets a run that goes on from a
// yield see the seed Job, with hook-succeeded, succeed and delete it, as a
// run with no Done (helm test) does before the controller clears
// status.hook. A look after a stop there is told the hook as the last
// progress showed it: its policy, not a person, deleted the Job, so the
// look must not fail it with the reason Deleted: it judges the hook by its
// object, as after any other stop.
func TestHookItsPolicyDeletedIsNotDeleted(t *testing.T) {
	f := newFixture(t)
	label := "capstan.dev/" + f.ns
	y := f.yielding(f.hooksOf(`{hooks: {seed: {nodeLabel: "`+label+`", deletePolicy: hook-succeeded}}}`, false), minute)
	if err := y.run(); !hooks.IsRunning(err) {
		t.Fatalf("the first run returned %v; want the seed Job left running", err)
	}
	f.labelNode(label)
	err := y.run()
	for i := 0; i < 60 && hooks.IsRunning(err); i++ {
		err = y.run()
	}
	if err != nil {
		t.Fatalf("once the node is there: %v", err)
	}
	if f.job("db-seed") != nil {
		t.Fatal("the seed Job was not deleted by its policy")
	}
	last := y.progress[len(y.progress)-1]
	y.req.Waiting, y.req.WaitingUID = &last.ObjectRef, last.UID
	err = y.run()
	for i := 0; i < 60 && hooks.IsRunning(err); i++ {
		err = y.run() // judged by its object, gone: run anew
	}
	if err != nil {
		t.Errorf("a look after a stop that followed the policy's delete returned %v; want no failure", err)
	}
}

// TestHookItsFailedPolicyDeletedIsNotDeleted lets a run that goes on from
// a yield see the seed Job, with hook-failed, fail, and its policy delete
// it before the controller records the failure. A look after a stop there
// is told the hook as the last progress showed it: its policy, not a
// person, deleted the Job, so the look must report the hook's own failure
// (the Job's BackoffLimitExceeded), not the reason Deleted.
func TestHookItsFailedPolicyDeletedIsNotDeleted(t *testing.T) {
	f := newFixture(t)
	label := "capstan.dev/" + f.ns
	y := f.yielding(f.hooksOf(`{hooks: {seed: {nodeLabel: "`+label+`", fail: true, deletePolicy: hook-failed}}}`, false), minute)
	if err := y.run(); !hooks.IsRunning(err) {
		t.Fatalf("the first run returned %v; want the seed Job left running", err)
	}
	f.labelNode(label)
	err := y.run()
	for i := 0; i < 60 && hooks.IsRunning(err); i++ {
		err = y.run()
	}
	if e := hookError(t, err); e.Reason != "BackoffLimitExceeded" || e.Hook != seedRef(f.ns) {
		t.Fatalf("once the node is there: %v; want the seed Job's BackoffLimitExceeded", err)
	}
	if f.job("db-seed") != nil {
		t.Fatal("the seed Job was not deleted by its policy")
	}
	last := y.progress[len(y.progress)-1]
	y.req.Waiting, y.req.WaitingUID = &last.ObjectRef, last.UID
	err = y.run()
	for i := 0; i < 60 && hooks.IsRunning(err); i++ {
		err = y.run() // judged by its object, gone: run anew
	}
	if e := hookError(t, err); e.Reason != "BackoffLimitExceeded" {
		t.Errorf("a look after a stop that followed the policy's delete returned %v; want the hook's own failure, BackoffLimitExceeded, not %s", err, hooks.ReasonDeleted)
	}
}
