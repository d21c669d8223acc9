package hooks_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/render"
)

// yieldRun runs the post-install hooks of run one with a wait of one
// second, and records the progress the runner reports.
type yieldRun struct {
	f        *fixture
	req      hooks.Request
	progress []capstanv1.HookProgress
}

func (f *fixture) yielding(hs []render.Hook, timeout time.Duration) *yieldRun {
	y := &yieldRun{f: f}
	y.req = hooks.Request{
		Applier: f.applier, Addon: f.addon, Event: "post-install", Hooks: hs, Timeout: timeout,
		Run: "post-install/one", Yield: time.Second,
		Progress: func(p capstanv1.HookProgress) error { y.progress = append(y.progress, p); return nil },
	}
	return y
}

// run runs the request once; after a *hooks.Running it goes on from that
// hook, as the controller's next look does from status.hook.
func (y *yieldRun) run() error {
	err := y.f.runner.Run(context.Background(), y.req)
	var running *hooks.Running
	if errors.As(err, &running) {
		hook := running.Hook
		y.req.Resume, y.req.Waiting, y.req.WaitingSince, y.req.WaitingUID = true, &hook, running.Since, running.UID
	}
	return err
}

var seedRef = func(ns string) capstanv1.ObjectRef {
	return capstanv1.ObjectRef{APIVersion: "batch/v1", Kind: "Job", Namespace: ns, Name: "db-seed"}
}

// TestYieldLeavesTheHookRunning runs a seed Job that waits for a node with
// a one-second wait: the run returns *hooks.Running and leaves the Job
// running, neither deleted nor cleaned up. The runs that go on from it
// wait for the same Job, report it with the start the first run gave it,
// and end once the node is there and the Job has succeeded.
func TestYieldLeavesTheHookRunning(t *testing.T) {
	f := newFixture(t)
	label := "capstan.dev/" + f.ns
	y := f.yielding(f.hooksOf(`{hooks: {seed: {nodeLabel: "`+label+`"}}}`, false), minute)
	err := y.run()
	var running *hooks.Running
	if !errors.As(err, &running) || running.Hook != seedRef(f.ns) || running.Event != "post-install" {
		t.Fatalf("a run whose seed Job waits for a node returned %v; want *hooks.Running for the seed Job", err)
	}
	first := f.job("db-seed")
	if first == nil || first.DeletionTimestamp != nil || first.Annotations[hooks.RunAnnotation] != "post-install/one" {
		t.Fatalf("seed %v; want the Job of run one left running", first)
	}
	since := running.Since
	if err := y.run(); !hooks.IsRunning(err) {
		t.Fatalf("the run that went on while the Job still waits returned %v; want it still running", err)
	}
	last := y.progress[len(y.progress)-1]
	if last.Name != "db-seed" || !last.Since.Time.Equal(since) || last.Run != "post-install/one" {
		t.Errorf("the run that went on reported %+v; want the seed Job with its first start, %s, and its run", last, since)
	}
	if j := f.job("db-seed"); j == nil || j.UID != first.UID {
		t.Fatal("the run that went on replaced the Job it was waiting for")
	}

	f.labelNode(label)
	for i := 0; i < 60 && hooks.IsRunning(err); i++ {
		err = y.run()
	}
	if err != nil {
		t.Fatalf("once the node is there: %v", err)
	}
	if j := f.job("db-seed"); j == nil || j.UID != first.UID || j.Status.Succeeded != 1 {
		t.Fatalf("seed %v; want the Job the first run made, succeeded", j)
	}
}

// TestYieldKeepsTheTimeoutFromTheStart lets a hook that never finishes
// pass its timeout of eight seconds between two runs: the run that goes on
// reads it once and fails it for its timeout, counted from the first
// run's start, without starting it anew.
func TestYieldKeepsTheTimeoutFromTheStart(t *testing.T) {
	f := newFixture(t)
	y := f.yielding(f.hooksOf(`{hooks: {seed: {hang: true}}}`, false), 8*time.Second)
	err := y.run()
	var running *hooks.Running
	if !errors.As(err, &running) {
		t.Fatalf("a run whose seed Job hangs returned %v; want *hooks.Running", err)
	}
	first := f.job("db-seed")
	time.Sleep(time.Until(running.Since.Add(8*time.Second + 500*time.Millisecond)))
	err = y.run()
	if e := hookError(t, err); e.Reason != hooks.ReasonTimeout || e.Hook != seedRef(f.ns) {
		t.Errorf("past its timeout, the run that went on returned %v; want the seed Job's timeout", err)
	}
	if j := f.job("db-seed"); j != nil && j.UID != first.UID {
		t.Error("the run that went on past the timeout started the hook anew")
	}
}

// TestYieldReadsAHookThatFailedMeanwhile lets the seed Job fail while no
// run waits for it: the run that goes on reports its failure, with its
// pod's exit code, and leaves the failed Job as it is rather than running
// it again.
func TestYieldReadsAHookThatFailedMeanwhile(t *testing.T) {
	f := newFixture(t)
	label := "capstan.dev/" + f.ns
	y := f.yielding(f.hooksOf(`{hooks: {seed: {fail: true, exitCode: 3, nodeLabel: "`+label+`"}}}`, false), minute)
	if err := y.run(); !hooks.IsRunning(err) {
		t.Fatalf("a run whose seed Job waits for a node returned %v; want *hooks.Running", err)
	}
	first := f.job("db-seed")
	f.labelNode(label)
	eventually(t, 60*time.Second, "the seed Job to fail", func() bool {
		j := f.job("db-seed")
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
	err := y.run()
	if e := hookError(t, err); e.Reason == hooks.ReasonTimeout || e.Hook != seedRef(f.ns) || !strings.Contains(e.Message, "exited with code 3") {
		t.Errorf("the run that went on returned %v; want the seed Job's failure, with its pod's exit code", err)
	}
	if j := f.job("db-seed"); j == nil || j.UID != first.UID {
		t.Errorf("seed %v; want the failed Job kept as it was, not run again", j)
	}
}
