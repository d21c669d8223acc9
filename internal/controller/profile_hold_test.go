package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/controller"
)

// TestClusterAddonMovedOutOfTrustIsNotSynced installs a cluster add-on in
// the controller's namespace whose chart the guardrails let through (only
// ConfigMaps, no spec.targetNamespace), then moves it to a shard whose
// controller does not trust that namespace, with a new chart version in
// the same write. A restricted sync would apply the new version as the
// controller, with owner references, and prune the ConfigMap it dropped,
// which the cluster profile (no spec.prune) keeps. The shard Blocks it
// with ProfileChanged instead and touches nothing: the dropped ConfigMap
// still runs, the new one is not created, and the kept one has no owner
// reference. Deleting it then leaves everything running, as before.
func TestClusterAddonMovedOutOfTrustIsNotSynced(t *testing.T) {
	inShard := startShard(t, "untrusting-sync", func(c *controller.Config) { c.TrustedNamespaces = []string{"elsewhere"} })
	name := fmt.Sprintf("held-%d", time.Now().UnixNano()%100000)
	configMaps := func(names ...string) chart {
		files := map[string]string{}
		for _, n := range names {
			files["templates/"+n+".yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-" + n + "\ndata:\n  at: " + n + "\n"
		}
		return chart{name: "held", files: files}
	}
	v1, v2 := configMaps("main", "extra", "dropped"), configMaps("main", "extra", "added")
	v1.version, v2.version = "1.0.0", "2.0.0"
	url1, _ := charts.publish(t, v1)
	url2, _ := charts.publish(t, v2)
	t.Cleanup(func() {
		for _, n := range []string{"main", "extra", "dropped", "added"} {
			_ = admin.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name + "-" + n}})
		}
	})

	a := synced(t, create(t, newAddon(controllerNS, name, url1)))
	if a.Status.Profile != capstanv1.ProfileCluster || len(a.Status.Inventory) != 3 {
		t.Fatalf("installed with status.profile %q and %d inventory entries; want cluster and 3", a.Status.Profile, len(a.Status.Inventory))
	}
	moved := update(t, a, func(cur *capstanv1.Addon) {
		inShard(cur)
		cur.Spec.Chart.URL = url2
	})
	got := waitFor(t, a, 90*time.Second, "the shard's look at the moved Addon", func(cur *capstanv1.Addon) bool {
		return cur.Generation == moved.Generation && cur.Status.ObservedGeneration == cur.Generation
	})
	ready := condition(got, capstanv1.ConditionReady)
	if got.Status.Phase != capstanv1.PhaseBlocked || ready == nil || ready.Reason != "ProfileChanged" {
		t.Errorf("the shard that does not trust %s left the add-on %s; want Blocked with ProfileChanged\n%s", controllerNS, got.Status.Phase, describeStatus(got))
	} else {
		for _, want := range []string{"Installed under the cluster profile", "places namespace " + controllerNS + " in the restricted profile", "Trust " + controllerNS + " again", "Orphan"} {
			if !strings.Contains(ready.Message, want) {
				t.Errorf("the Ready message %q does not say %q", ready.Message, want)
			}
		}
		if st := condition(got, capstanv1.ConditionStalled); st == nil || st.Status != metav1.ConditionTrue {
			t.Errorf("Stalled = %+v; want True: only a person can move it on", st)
		}
	}
	if got.Status.Profile != capstanv1.ProfileCluster || len(got.Status.Inventory) != 3 {
		t.Errorf("after the shard's look status.profile = %q with %d inventory entries; want cluster and the 3 it was installed with", got.Status.Profile, len(got.Status.Inventory))
	}
	if live(t, "v1", "ConfigMap", controllerNS, name+"-dropped") == nil {
		t.Error("the shard pruned the ConfigMap the new version drops; want the cluster add-on's software left running")
	}
	if live(t, "v1", "ConfigMap", controllerNS, name+"-added") != nil {
		t.Error("the shard created the new version's ConfigMap; want nothing applied under the restricted profile")
	}
	if cm := live(t, "v1", "ConfigMap", controllerNS, name+"-main"); cm == nil {
		t.Error("the kept ConfigMap is gone")
	} else if refs := cm.GetOwnerReferences(); len(refs) > 0 {
		t.Errorf("the kept ConfigMap has owner references %v; want none, as the cluster profile applied it", refs)
	}

	if err := admin.Delete(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "the Addon to go", func() bool {
		return apierrors.IsNotFound(admin.Get(context.Background(), client.ObjectKeyFromObject(a), &capstanv1.Addon{}))
	})
	for _, n := range []string{"main", "extra", "dropped"} {
		if live(t, "v1", "ConfigMap", controllerNS, name+"-"+n) == nil {
			t.Errorf("deleting the held add-on deleted ConfigMap %s-%s; want it left running (Orphan)", name, n)
		}
	}
}

// TestApprovalWhileHeldSinceTheProfileChangedIsUsedUp has a cluster add-on
// with manual sync and a new chart version waiting for approval, and moves
// it to a shard whose controller does not trust its namespace: Blocked,
// ProfileChanged, with the plan computed under the cluster profile left in
// status. The operations refuse to approve that plan; an approval written
// anyway, as kubectl would, is used up by the shard's hold. Moved back to
// the controller that trusts the namespace, the plan is the same hash as
// the one approved (the hash names no profile), and still the approval
// applies nothing: the plan waits for an approval given after the hold.
func TestApprovalWhileHeldSinceTheProfileChangedIsUsedUp(t *testing.T) {
	ctx := context.Background()
	inShard := startShard(t, "untrusting-approval", func(c *controller.Config) { c.TrustedNamespaces = []string{"elsewhere"} })
	name := fmt.Sprintf("approved-%d", time.Now().UnixNano()%100000)
	version := func(v string) chart {
		return chart{name: "approved", version: v, files: map[string]string{
			"templates/main.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-main\ndata:\n  at: \"" + v + "\"\n"}}
	}
	url1, _ := charts.publish(t, version("1.0.0"))
	url2, _ := charts.publish(t, version("2.0.0"))
	t.Cleanup(func() {
		_ = admin.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name + "-main"}})
	})
	at := func() any {
		cm := live(t, "v1", "ConfigMap", controllerNS, name+"-main")
		if cm == nil {
			t.Fatal("the ConfigMap is gone")
		}
		return cm.Object["data"].(map[string]any)["at"]
	}

	a := synced(t, create(t, newAddon(controllerNS, name, url1)))
	changed := update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.ManualSync = true
		cur.Spec.Chart.URL = url2
	})
	waiting := waitFor(t, a, 90*time.Second, "the new version's plan to wait for approval", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == changed.Generation && cur.Status.Phase == capstanv1.PhaseOutOfSync &&
			cur.Status.Plan != nil && cur.Status.Plan.Generation == changed.Generation
	})
	pending := waiting.Status.Plan.Hash

	update(t, waiting, inShard)
	held := waitFor(t, a, 90*time.Second, "the shard's hold", func(cur *capstanv1.Addon) bool {
		c := condition(cur, capstanv1.ConditionReady)
		return c != nil && c.Reason == controller.ReasonProfileChanged
	})
	if held.Status.Plan == nil || held.Status.Plan.Hash != pending || held.Status.Plan.Generation != held.Generation {
		t.Fatalf("the hold left plan %+v in status; want the pending plan %s of generation %d", held.Status.Plan, pending, held.Generation)
	}
	if _, err := addons.Approve(ctx, admin, client.ObjectKeyFromObject(a), pending); err == nil || !strings.Contains(err.Error(), "Blocked (ProfileChanged)") {
		t.Errorf("approving the held add-on's plan: %v; want it refused, saying the add-on is held", err)
	}

	approved := update(t, held, func(cur *capstanv1.Addon) {
		cur.Spec.ApprovedPlan = pending
		cur.Spec.SyncRequest = max(cur.Spec.SyncRequest, cur.Status.LastSyncRequest) + 1
	})
	got := waitFor(t, a, 90*time.Second, "the shard's look at the approval", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == approved.Generation
	})
	if got.Status.LastSyncRequest != approved.Spec.SyncRequest || got.Status.LastApprovedPlan != pending {
		t.Errorf("the hold left status.lastSyncRequest %d and lastApprovedPlan %q; want the request %d and its approval used up",
			got.Status.LastSyncRequest, got.Status.LastApprovedPlan, approved.Spec.SyncRequest)
	}

	// NOTE: with an annotation: the suite's main controller watches every
	// Addon, so a relabel alone is an update its predicates drop, where a
	// controller whose cache --watch-label-selector filters sees the Addon
	// arrive.
	back := update(t, got, func(cur *capstanv1.Addon) {
		delete(cur.Labels, shardLabel)
		metav1.SetMetaDataAnnotation(&cur.ObjectMeta, "example.com/moved", "back")
	})
	got = waitFor(t, a, 90*time.Second, "the trusting controller's look", func(cur *capstanv1.Addon) bool {
		c := condition(cur, capstanv1.ConditionReady)
		return cur.Status.ObservedGeneration == back.Generation && c != nil && c.Reason != controller.ReasonProfileChanged &&
			cur.Status.Phase != capstanv1.PhaseProgressing
	})
	if v := at(); v != "1.0.0" {
		t.Errorf("the ConfigMap is at %v once the namespace is trusted again; want 1.0.0: the approval written while held applied", v)
	}
	if got.Status.Plan == nil || got.Status.Plan.Hash != pending {
		t.Errorf("the trusting controller's plan is %+v; want the same hash as the one approved while held, %s", got.Status.Plan, pending)
	}
	if c := condition(got, capstanv1.ConditionReady); got.Status.Phase != capstanv1.PhaseOutOfSync || c.Reason != "AwaitingApproval" {
		t.Errorf("once trusted again the add-on is %s (%s); want OutOfSync, AwaitingApproval\n%s", got.Status.Phase, c.Reason, describeStatus(got))
	}
}

// TestPausedAddonHeldSinceItsProfileChangedIsHeldStill has a cluster
// add-on with manual sync and a new chart version waiting for approval,
// moves it to a shard whose controller does not trust its namespace
// (Blocked, ProfileChanged), and pauses it there. The paused look keeps
// the hold's Ready reason, Blocked and Stalled, saying it is paused as
// well, and the operations still refuse to approve its plan. Before, the
// pause wrote its own reason over the hold's: an approval was taken, and
// promised to apply once the annotation went, when the hold used it up.
func TestPausedAddonHeldSinceItsProfileChangedIsHeldStill(t *testing.T) {
	ctx := context.Background()
	inShard := startShard(t, "untrusting-paused", func(c *controller.Config) { c.TrustedNamespaces = []string{"elsewhere"} })
	name := fmt.Sprintf("paused-%d", time.Now().UnixNano()%100000)
	version := func(v string) chart {
		return chart{name: "paused", version: v, files: map[string]string{
			"templates/main.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-main\ndata:\n  at: \"" + v + "\"\n"}}
	}
	url1, _ := charts.publish(t, version("1.0.0"))
	url2, _ := charts.publish(t, version("2.0.0"))
	t.Cleanup(func() {
		_ = admin.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name + "-main"}})
	})

	a := synced(t, create(t, newAddon(controllerNS, name, url1)))
	changed := update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.ManualSync = true
		cur.Spec.Chart.URL = url2
	})
	waiting := waitFor(t, a, 90*time.Second, "the new version's plan to wait for approval", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == changed.Generation && cur.Status.Phase == capstanv1.PhaseOutOfSync &&
			cur.Status.Plan != nil && cur.Status.Plan.Generation == changed.Generation
	})
	pending := waiting.Status.Plan.Hash
	update(t, waiting, inShard)
	waitFor(t, a, 90*time.Second, "the shard's hold", func(cur *capstanv1.Addon) bool {
		c := condition(cur, capstanv1.ConditionReady)
		return c != nil && c.Reason == controller.ReasonProfileChanged
	})

	patchAnnotation(t, a, capstanv1.PausedAnnotation, "true")
	got := waitFor(t, a, 90*time.Second, "the shard's look at the paused Addon", func(cur *capstanv1.Addon) bool {
		c := condition(cur, capstanv1.ConditionReady)
		return cur.Status.Phase == capstanv1.PhasePaused || c != nil && strings.Contains(c.Message, "paused as well")
	})
	ready := condition(got, capstanv1.ConditionReady)
	if got.Status.Phase != capstanv1.PhaseBlocked || ready.Reason != controller.ReasonProfileChanged ||
		!strings.Contains(ready.Message, "Trust "+controllerNS+" again") || !strings.Contains(ready.Message, "still held once the annotation is removed") {
		t.Errorf("the paused held add-on is %s (%s); want Blocked with ProfileChanged, saying it is paused as well and held still\n%s", got.Status.Phase, ready.Reason, describeStatus(got))
	}
	if st := condition(got, capstanv1.ConditionStalled); st == nil || st.Status != metav1.ConditionTrue {
		t.Errorf("Stalled = %+v; want True: only a person can move it on, paused or not", st)
	}
	if _, err := addons.Approve(ctx, admin, client.ObjectKeyFromObject(a), pending); err == nil || !strings.Contains(err.Error(), "Blocked (ProfileChanged)") {
		t.Errorf("approving the paused held add-on's plan: %v; want it refused, saying the add-on is held", err)
	}
	if cur := getAddon(t, a); cur.Spec.ApprovedPlan != "" {
		t.Errorf("spec.approvedPlan = %q after the refusal; want no approval written", cur.Spec.ApprovedPlan)
	}
}
