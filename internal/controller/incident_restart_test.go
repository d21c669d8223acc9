package controller_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/notify"
)

// receiverSecret creates one of the suite controller's receiver Secrets
// for the length of the test, and waits for the controller to read it.
func receiverSecret(t *testing.T, name string, data map[string]string) {
	t.Helper()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name}, StringData: data}
	if err := admin.Create(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), sec) })
	time.Sleep(1500 * time.Millisecond) // the controller reads the Secrets again at most every second
}

// restarted is a controller that has just started, as after a restart or
// a change of leader: a reconciler and a notifier of its own over the
// suite's cluster, which remember nothing. It sends to hook, a PagerDuty
// receiver at /pager-new and a JSON one at /chat-new. No manager runs
// it: a test calls its Reconcile, while the suite's controller goes on.
func restarted(t *testing.T, hook *webhook) *controller.AddonReconciler {
	t.Helper()
	cfg := rest.CopyConfig(cluster.ConfigFor(install.ControllerUser))
	cfg.UserAgent = "capstan-restarted"
	c, err := client.New(cfg, client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	guard, err := netguard.New(netguard.Config{Allow: []string{"127.0.0.0/8"}, Deny: netguard.APIServerDenyEntries(cfg.Host), LoopbackOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	pager, err := notify.ReceiverFromSecret("restarted/pager", map[string][]byte{"format": []byte("pagerduty"),
		"url": []byte(hook.srv.URL + "/pager-new"), "token": []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	chat, err := notify.ReceiverFromSecret("restarted/chat", map[string][]byte{"url": []byte(hook.srv.URL + "/chat-new")})
	if err != nil {
		t.Fatal(err)
	}
	n := &notify.Notifier{Client: guard.Client(), Backoff: 100 * time.Millisecond, Log: ctrl.Log.WithName("notify-restarted"),
		Receivers: func(context.Context) ([]notify.Receiver, error) { return []notify.Receiver{pager, chat}, nil }}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = n.Start(ctx) }()
	return &controller.AddonReconciler{Client: c, APIReader: c, RestConfig: cfg, Fetcher: reconciler.Fetcher, Hooks: reconciler.Hooks,
		Recorder: reconciler.Recorder, Notifier: n, Config: reconciler.Config}
}

// TestCloseSurvivesARestart: an add-on that failed, and paged, recovers
// while PagerDuty fails the resolve: it is Synced and keeps
// status.warningSince, since its close is owed. A controller that starts
// then, which remembers nothing, resolves the incident from the first
// reconcile that finds it so, to the incident receiver only and once;
// once that is delivered, its next status write clears warningSince.
func TestCloseSurvivesARestart(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	hook := newWebhook(t)
	receiverSecret(t, notifySecret+"-pager", map[string]string{"url": hook.srv.URL + "/pager-old", "format": "pagerduty", "token": "k", "selector": "team=" + ns})
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := newAddon(controllerNS, "restart-close-"+ns[len(ns)-5:], url+"-gone.tgz", withTarget(ns))
	a.Labels = map[string]string{"team": ns}
	a = create(t, a)
	t.Cleanup(func() { _ = admin.Delete(context.Background(), a) })
	waitPhase(t, a, capstanv1.PhaseFailed)
	eventually(t, 30*time.Second, "the trigger", func() bool { return hook.count("/pager-old") > 0 })

	// PagerDuty fails from now on, and the chart is back.
	hook.fail("/pager-old")
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url })
	waitPhase(t, a, capstanv1.PhaseSynced)
	eventually(t, 30*time.Second, "the failed resolve", func() bool {
		actions, _ := hook.actions(t, "/pager-old")
		return slices.Contains(actions, "resolve")
	})
	time.Sleep(time.Second)
	if got := getAddon(t, a); got.Status.Phase != capstanv1.PhaseSynced || got.Status.WarningSince == nil {
		t.Fatalf("a recovered add-on whose resolve was not delivered: %s with warningSince %v; want Synced and kept, for a controller that restarts now",
			got.Status.Phase, got.Status.WarningSince)
	}

	// The restart.
	r2 := restarted(t, hook)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(a)}
	if _, err := r2.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the resolve of the restarted controller", func() bool { return hook.count("/pager-new") > 0 })
	// The reconcile a manager would queue once the resolve is delivered.
	eventually(t, 30*time.Second, "status.warningSince cleared", func() bool {
		if _, err := r2.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		return getAddon(t, a).Status.WarningSince == nil
	})
	actions, keys := hook.actions(t, "/pager-new")
	if !slices.Equal(actions, []string{"resolve"}) || keys[0] != "capstan:Addon:"+controllerNS+":"+a.Name {
		t.Fatalf("the restarted controller sent %v of %v; want one resolve of the add-on", actions, keys)
	}
	if n := hook.count("/chat-new"); n != 0 {
		t.Fatalf("a chat heard %d times of a resolve sent again; want never", n)
	}
	if got := getAddon(t, a); got.Status.Phase != capstanv1.PhaseSynced {
		t.Fatalf("the add-on is %s; want it Synced still", got.Status.Phase)
	}
}

// TestTriggerSurvivesARestart: a controller that starts while an add-on
// is Failed, which remembers nothing, sends its trigger again from its
// first reconcile, to the incident receiver only, and once: the
// controller before may not have delivered it, and a failure that lasts
// makes no transition that would.
func TestTriggerSurvivesARestart(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	hook := newWebhook(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := create(t, newAddon(controllerNS, "restart-trigger-"+ns[len(ns)-5:], url+"-gone.tgz", withTarget(ns)))
	t.Cleanup(func() { _ = admin.Delete(context.Background(), a) })
	waitPhase(t, a, capstanv1.PhaseFailed)

	r2 := restarted(t, hook)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(a)}
	for range 2 {
		_, _ = r2.Reconcile(ctx, req) // the fetch fails, as before
	}
	eventually(t, 30*time.Second, "the trigger of the restarted controller", func() bool { return hook.count("/pager-new") > 0 })
	_, _ = r2.Reconcile(ctx, req)
	time.Sleep(2 * time.Second) // anything more would have come by now
	actions, keys := hook.actions(t, "/pager-new")
	if !slices.Equal(actions, []string{"trigger"}) || keys[0] != "capstan:Addon:"+controllerNS+":"+a.Name {
		t.Fatalf("the restarted controller sent %v of %v; want one trigger of the add-on", actions, keys)
	}
	if n := hook.count("/chat-new"); n != 0 {
		t.Fatalf("a chat heard %d times of a trigger sent again; want never", n)
	}
}

// TestWarningEndsWithSyncedWithoutIncidentReceivers: with no incident
// receiver, the write that makes a recovered add-on Synced clears
// status.warningSince, as it always did: no version of the Addon is
// Synced with it.
func TestWarningEndsWithSyncedWithoutIncidentReceivers(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	hook := newWebhook(t)
	receiverSecret(t, notifySecret, map[string]string{"url": hook.srv.URL + "/all"})
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := newAddon(controllerNS, "warning-ends-"+ns[len(ns)-5:], url+"-gone.tgz", withTarget(ns))

	wc, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &capstanv1.AddonList{}, client.InNamespace(controllerNS), client.MatchingFields{"metadata.name": a.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	var seen []capstanv1.AddonStatus
	go func() {
		for e := range w.ResultChan() {
			if got, ok := e.Object.(*capstanv1.Addon); ok {
				mu.Lock()
				seen = append(seen, got.Status)
				mu.Unlock()
			}
		}
	}()

	a = create(t, a)
	t.Cleanup(func() { _ = admin.Delete(context.Background(), a) })
	waitPhase(t, a, capstanv1.PhaseFailed)
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url })
	waitPhase(t, a, capstanv1.PhaseSynced)
	eventually(t, 30*time.Second, "the watch to see the Synced add-on", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) > 0 && seen[len(seen)-1].Phase == capstanv1.PhaseSynced
	})
	mu.Lock()
	defer mu.Unlock()
	warned := false
	for _, st := range seen {
		warned = warned || st.WarningSince != nil
		if st.Phase == capstanv1.PhaseSynced && st.WarningSince != nil {
			t.Fatalf("a version of the Addon is Synced with warningSince %v; want it cleared in the write that makes it Synced", st.WarningSince)
		}
	}
	if !warned {
		t.Fatal("no version of the Addon carried warningSince; the test saw no warning")
	}
}
