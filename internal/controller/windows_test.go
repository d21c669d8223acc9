package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestSyncWindowsHoldChanges: a deny window holds the install (planned,
// nothing applied), and a person's sync with it, until the window says
// manualSync; a change of values after that is held again; with the
// window gone it applies. A window the controller cannot read holds
// everything, with the field to fix.
func TestSyncWindowsHoldChanges(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	always := capstanv1.SyncWindow{Kind: capstanv1.SyncWindowDeny, Schedule: "* * * * *", Duration: metav1.Duration{Duration: time.Minute}}
	a := create(t, newAddon(controllerNS, "windows-"+ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.SyncWindows = []capstanv1.SyncWindow{always}
	})))
	held := func(what string, want ...string) *capstanv1.Addon {
		t.Helper()
		got := waitFor(t, a, 60*time.Second, what, func(cur *capstanv1.Addon) bool {
			c := condition(cur, capstanv1.ConditionReady)
			return cur.Status.Phase == capstanv1.PhaseOutOfSync && cur.Status.ObservedGeneration == cur.Generation && c != nil && c.Reason == "SyncWindowClosed"
		})
		for _, w := range append(want, "changes wait for a sync window", "the deny window spec.syncWindows[0] is active") {
			if !strings.Contains(readyMessage(got), w) {
				t.Errorf("%s: the message does not say %q: %s", what, w, readyMessage(got))
			}
		}
		return got
	}
	got := held("the install held")
	if live(t, "apps/v1", "Deployment", ns, a.Name) != nil || len(got.Status.Inventory) != 0 || got.Status.Plan == nil || got.Status.Plan.Summary.Create == 0 {
		t.Fatalf("a held install applied something, or has no plan\n%s", describeStatus(got))
	}

	// A person's sync waits too, and stays pending; the CLI says so and
	// does not wait for it.
	out, err := capstanFails(t, "addon", "sync", a.Name, "-n", controllerNS, "--yes")
	if err == nil || !strings.Contains(err.Error(), "is held by its sync windows, and applies when they open") {
		t.Fatalf("capstan addon sync while a window holds changes: %v\n%s", err, out)
	}
	got = held("the sync request held", "stays pending")
	if got.Status.LastSyncRequest != 0 || live(t, "apps/v1", "Deployment", ns, a.Name) != nil {
		t.Fatalf("a held sync request was used up or applied: %s", describeStatus(got))
	}
	// The window lets a person's sync through: the pending one applies.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.SyncWindows[0].ManualSync = true })
	waitFor(t, a, 60*time.Second, "the pending sync applied", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.LastSyncRequest == 1
	})
	if live(t, "apps/v1", "Deployment", ns, a.Name) == nil {
		t.Fatal("Synced, and no Deployment runs")
	}

	// A change of values is no person's sync: held.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`{"greeting":"held"}`) })
	held("the change of values held")
	greeting := func() string {
		g, _, _ := unstructured.NestedString(live(t, "v1", "ConfigMap", ns, a.Name+"-config").Object, "data", "greeting")
		return g
	}
	if g := greeting(); g != "hello" {
		t.Fatalf("the greeting is %q while the window holds changes", g)
	}
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.SyncWindows = nil })
	waitFor(t, a, 60*time.Second, "the change applied without the window", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.ObservedGeneration == cur.Generation
	})
	if g := greeting(); g != "held" {
		t.Fatalf("the greeting is %q, want the change held before", g)
	}

	// Windows the controller cannot read hold everything, and say which.
	bad := create(t, newAddon(controllerNS, "windows-bad-"+ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.ReleaseName = "bad"
		s.SyncWindows = []capstanv1.SyncWindow{{Kind: capstanv1.SyncWindowAllow, Schedule: "@daily", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Mars/Olympus"}}
	})))
	failed := waitPhase(t, bad, capstanv1.PhaseFailed)
	if msg := readyMessage(failed); !strings.Contains(msg, "spec.syncWindows[0].timeZone") || !strings.Contains(msg, "not an IANA time zone") {
		t.Errorf("a time zone on Mars: %s", describeStatus(failed))
	}
	if live(t, "apps/v1", "Deployment", ns, "bad") != nil {
		t.Error("an add-on with a window the controller cannot read applied something")
	}
	err = admin.Create(ctx, newAddon(controllerNS, "windows-worse-"+ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.SyncWindows = []capstanv1.SyncWindow{{Kind: "sometimes", Schedule: "@daily", Duration: metav1.Duration{Duration: time.Hour}}}
	})))
	if err == nil || !strings.Contains(err.Error(), "spec.syncWindows[0].kind") {
		t.Errorf("a window of kind sometimes: %v", err)
	}
}

// TestAnAllowWindowOpensByItself: an add-on outside its only allow
// window is planned and held, and installs when the window opens, with
// no change to it: the controller looks again when the window opens.
func TestAnAllowWindowOpensByItself(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	// The next whole minute, or the one after when this one is nearly
	// over: the add-on must be seen held first.
	now := time.Now().UTC()
	opens := now.Truncate(time.Minute).Add(time.Minute)
	if opens.Sub(now) < 15*time.Second {
		opens = opens.Add(time.Minute)
	}
	a := create(t, newAddon(controllerNS, "opens-"+ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.SyncWindows = []capstanv1.SyncWindow{{Kind: capstanv1.SyncWindowAllow,
			Schedule: fmt.Sprintf("%d %d * * *", opens.Minute(), opens.Hour()), Duration: metav1.Duration{Duration: time.Hour}}}
	})))
	got := waitFor(t, a, 30*time.Second, "the install held", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseOutOfSync
	})
	if msg := readyMessage(got); !strings.Contains(msg, "opens at "+opens.Format(time.RFC3339)) {
		t.Fatalf("the message does not say when the window opens (%s): %s", opens.Format(time.RFC3339), msg)
	}
	if live(t, "apps/v1", "Deployment", ns, a.Name) != nil {
		t.Fatal("installed before the window opened")
	}
	got = waitFor(t, a, time.Until(opens)+45*time.Second, "the install when the window opens", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced
	})
	if at := got.Status.LastAppliedTime; at == nil || at.Time.Before(opens) {
		t.Fatalf("applied at %v, before the window opened at %s", at, opens)
	}
}
