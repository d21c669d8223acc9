package controller_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/install"
)

// waitingHooks is a hook runner that says when the run it wraps has
// reported its first hook: from then on, a resumed run waits for it.
type waitingHooks struct {
	controller.HookRunner
	once    sync.Once
	waiting chan struct{}
}

func (h *waitingHooks) Run(ctx context.Context, req hooks.Request) error {
	progress := req.Progress
	req.Progress = func(p capstanv1.HookProgress) error {
		if progress != nil {
			if err := progress(p); err != nil {
				return err
			}
		}
		h.once.Do(func() { close(h.waiting) })
		return nil
	}
	return h.HookRunner.Run(ctx, req)
}

// TestStopWhileAHookRunsLeavesItRunning stops a controller, as SIGTERM or
// a lost Lease does, while its reconcile waits for a pre-install Job that
// runs. The stopped reconcile writes nothing: status.hook still names the
// Job, and neither a Failed phase nor a warning event says the add-on
// failed. The next controller (the suite's) goes on waiting for that Job,
// and once it completes the add-on is Synced with the Job created once.
// Before, the stop cleared status.hook and wrote Failed, and the next
// controller deleted the running Job (its before-hook-creation policy)
// and started it again: a migration killed part-way and run anew.
func TestStopWhileAHookRunsLeavesItRunning(t *testing.T) {
	ns := newNamespace(t)
	label := "capstan.dev/" + ns
	rec := recordEvents(t, ns)
	a := dbapp(t, ns, `{hooks: {initdb: {nodeLabel: "`+label+`"}}}`, longHooks)
	runs := func(cur *capstanv1.Addon) bool {
		h := cur.Status.Hook
		return h != nil && h.Event == "pre-install" && h.Name == "db-initdb" && h.Run != ""
	}
	waitFor(t, a, 60*time.Second, "the pre-install hook to run", func(cur *capstanv1.Addon) bool {
		return runs(cur) && readyReason(cur) == "WaitingForHook"
	})
	first := job(t, ns, "db-initdb")
	if first == nil {
		t.Fatal("status.hook names db-initdb, which does not exist")
	}

	// A controller that waits for hooks within its reconcile.
	cfg := rest.CopyConfig(cluster.ConfigFor(install.ControllerUser))
	cfg.UserAgent = "capstan-stopping"
	c, err := client.New(cfg, client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	conf := reconciler.Config
	conf.HookWait = -1
	recorder := events.NewFakeRecorder(100)
	runner := &waitingHooks{HookRunner: reconciler.Hooks, waiting: make(chan struct{})}
	stopping := &controller.AddonReconciler{Client: c, APIReader: c, RestConfig: cfg, Fetcher: reconciler.Fetcher,
		Hooks: runner, Recorder: recorder, Config: conf}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() {
		_, err := stopping.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(a)})
		done <- err
	}()
	select {
	case <-runner.waiting:
	case err := <-done:
		t.Fatalf("the reconcile ended (%v) before it waited for the hook", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the reconcile never came to the hook")
	}
	time.Sleep(time.Second) // a few of the wait's reads
	stop()
	select {
	case err := <-done:
		// NOTE: what the stopped reconcile returns is the stop's; what it
		// wrote, below, is what counts.
		t.Logf("the stopped reconcile returned %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the stopped reconcile did not end")
	}

	got := getAddon(t, a)
	if !runs(got) || got.Status.Phase == capstanv1.PhaseFailed || got.Status.WarningSince != nil {
		t.Errorf("after the stop: %s, hook %+v, warningSince %v; want the hook still named and nothing failed", describeStatus(got), got.Status.Hook, got.Status.WarningSince)
	}
	select {
	case e := <-recorder.Events:
		t.Errorf("the stopped reconcile emitted an event: %s", e)
	default:
	}

	labelNode(t, label)
	synced(t, a)
	if j := job(t, ns, "db-initdb"); j == nil || j.UID != first.UID || j.Status.Succeeded != 1 {
		t.Errorf("initdb %s; want the Job that ran before the stop (uid %s), succeeded", jobString(j), first.UID)
	}
	if n := rec.count("Job/db-initdb", watch.Added); n != 1 {
		t.Errorf("the pre-install Job was created %d times; want once", n)
	}
}
