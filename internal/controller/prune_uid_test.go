package controller_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestPruneSparesAnObjectMadeAnew approves a plan of a manualSync
// add-on that prunes ConfigMap alpha. While the approved sync runs, before
// its prune, someone deletes alpha and creates it anew under its name with
// the add-on's labels (a copy put back from `kubectl get -o yaml`, a
// restore). The approval covers the delete of the object the plan showed,
// not of this one: it stays running and in the inventory, and the next plan
// shows its delete, which waits for its own approval.
func TestPruneSparesAnObjectMadeAnew(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url1, _ := charts.publish(t, cmChart("11.0.0", "alpha", "beta"))
	a := create(t, newAddon(controllerNS, "renew-"+ns, url1, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Prune, s.ManualSync = true, true
	})))
	approvePlan(t, a)
	synced(t, a)
	old := live(t, "v1", "ConfigMap", ns, "alpha")
	if old == nil {
		t.Fatal("alpha was not applied")
	}

	key := a.Namespace + "/" + a.Name
	var renewed atomic.Value
	stepHooks.Store(key, func(step string) error {
		if step != "prune" || renewed.Load() != nil {
			return nil
		}
		cm := &corev1.ConfigMap{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "alpha"}, cm); err != nil {
			return err
		}
		if err := admin.Delete(ctx, cm); err != nil {
			return err
		}
		fresh := &corev1.ConfigMap{}
		fresh.Namespace, fresh.Name, fresh.Labels, fresh.Annotations, fresh.Data = ns, "alpha", cm.Labels, cm.Annotations, map[string]string{"put": "back"}
		if err := admin.Create(ctx, fresh); err != nil {
			return err
		}
		renewed.Store(fresh.UID)
		return nil
	})
	t.Cleanup(func() { stepHooks.Delete(key) })

	url2, _ := charts.publish(t, cmChart("12.0.0", "beta", "gamma"))
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url2 })
	approvePlan(t, a)
	got := waitFor(t, a, 90*time.Second, "the next plan to ask about the object created anew", func(cur *capstanv1.Addon) bool {
		return renewed.Load() != nil && cur.Status.ObservedGeneration == cur.Generation && readyReason(cur) == "AwaitingApproval" &&
			cur.Status.Plan != nil && cur.Status.Plan.Summary.Delete == 1
	})
	alpha := live(t, "v1", "ConfigMap", ns, "alpha")
	if alpha == nil || alpha.GetUID() != renewed.Load() {
		t.Fatalf("alpha created anew since the plan was approved was pruned by that plan's approval (live: %v)", alpha)
	}
	if live(t, "v1", "ConfigMap", ns, "gamma") == nil {
		t.Error("the approved plan's gamma was not applied")
	}
	inInventory := false
	for _, r := range capstanv1.RefsOf(got.Status.Inventory) {
		inInventory = inInventory || r.Kind == "ConfigMap" && r.Name == "alpha"
	}
	if !inInventory {
		t.Error("alpha, left running, left the inventory; the next plan could not show its delete")
	}
}

// TestPruneOfAnObjectGoneAsksNoApproval: a manualSync add-on's render no
// longer holds ConfigMap beta, which someone deleted by hand already. The
// plan's prune of it deletes nothing, so it waits for no approval: the
// sync drops beta from the inventory, and the add-on is Synced.
func TestPruneOfAnObjectGoneAsksNoApproval(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url1, _ := charts.publish(t, cmChart("13.0.0", "alpha", "beta"))
	a := create(t, newAddon(controllerNS, "gone-"+ns, url1, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Prune, s.ManualSync = true, true
	})))
	approvePlan(t, a)
	synced(t, a)
	beta := &corev1.ConfigMap{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "beta"}, beta); err != nil {
		t.Fatalf("beta was not applied: %v", err)
	}
	if err := admin.Delete(ctx, beta); err != nil {
		t.Fatal(err)
	}

	url2, _ := charts.publish(t, cmChart("14.0.0", "alpha"))
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url2 })
	got := waitFor(t, a, 90*time.Second, "the sync that drops beta from the inventory", func(cur *capstanv1.Addon) bool {
		if cur.Status.ObservedGeneration == cur.Generation && readyReason(cur) == "AwaitingApproval" {
			t.Fatalf("the prune of beta, gone already, waits for approval: %s", describeStatus(cur))
		}
		return cur.Status.ObservedGeneration == cur.Generation && cur.Status.Phase == capstanv1.PhaseSynced
	})
	for _, r := range capstanv1.RefsOf(got.Status.Inventory) {
		if r.Kind == "ConfigMap" && r.Name == "beta" {
			t.Error("beta, gone, is still in the inventory")
		}
	}
	if live(t, "v1", "ConfigMap", ns, "alpha") == nil {
		t.Error("alpha, still rendered, is gone")
	}
}
