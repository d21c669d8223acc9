package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestHelmResourcePolicyKeepsObjects: an object its chart marks
// helm.sh/resource-policy: keep is left running, and leaves the inventory,
// when an upgrade no longer renders it (the plan says so before) and when
// the add-on is uninstalled, as Helm leaves it; an object without the mark
// goes both times.
func TestHelmResourcePolicyKeepsObjects(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	keep := "  annotations:\n    helm.sh/resource-policy: keep\n"
	url, _ := charts.publish(t, chart{name: "keepapp", version: "1.0.0", files: map[string]string{
		"templates/all.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: stays\ndata: {a: b}\n" +
			"---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: password\n" + keep + "stringData: {password: generated}\n",
		"templates/dropped.yaml": "{{ if .Values.all }}apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept\n" + keep + "data: {a: b}\n" +
			"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\ndata: {a: b}\n{{ end }}",
	}})
	a := create(t, newAddon(controllerNS, "keep-"+ns[len(ns)-5:], url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Prune = true
		s.DeletionPolicy = capstanv1.DeletionDelete
		s.Values = jsonValues("all: true")
	})))
	synced := waitPhase(t, a, capstanv1.PhaseSynced)
	inInventory := func(cur *capstanv1.Addon, name string) bool {
		for _, ref := range capstanv1.RefsOf(cur.Status.Inventory) {
			if ref.Name == name {
				return true
			}
		}
		return false
	}
	if !inInventory(synced, "kept") || !inInventory(synced, "plain") {
		t.Fatalf("inventory %v", synced.Status.Inventory)
	}

	// The upgrade drops both ConfigMaps; held for approval, the plan says
	// which one goes and which one stays.
	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.ManualSync = true
		cur.Spec.Values = jsonValues("all: false")
	})
	held := waitFor(t, a, 60*time.Second, "the plan held for approval", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseOutOfSync && cur.Status.ObservedGeneration == cur.Generation
	})
	var deletes []string
	for _, o := range held.Status.Plan.Objects {
		if o.Action == capstanv1.ActionDelete {
			deletes = append(deletes, o.Name)
		}
	}
	noticed := false
	for _, n := range held.Status.Plan.Notices {
		noticed = noticed || strings.Contains(n.Message, "1 object(s) the render no longer holds carry helm.sh/resource-policy: keep") && strings.Contains(n.Message, "ConfigMap "+ns+"/kept")
	}
	if len(deletes) != 1 || deletes[0] != "plain" || !noticed {
		t.Fatalf("the plan should delete plain alone and say that kept stays: deletes %v: %s", deletes, describeStatus(held))
	}
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.ManualSync = false })
	upgraded := waitFor(t, a, 60*time.Second, "the upgrade applied", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.AppliedHash != synced.Status.AppliedHash
	})
	if live(t, "v1", "ConfigMap", ns, "kept") == nil {
		t.Fatal("the prune deleted an object its chart marks to keep")
	}
	eventually(t, 30*time.Second, "the unmarked ConfigMap pruned", func() bool { return live(t, "v1", "ConfigMap", ns, "plain") == nil })
	if inInventory(upgraded, "kept") || inInventory(upgraded, "plain") {
		t.Fatalf("the kept object should leave the inventory: %v", upgraded.Status.Inventory)
	}
	var events eventsv1.EventList
	if err := admin.List(ctx, &events, client.InNamespace(controllerNS)); err != nil {
		t.Fatal(err)
	}
	told := false
	for _, e := range events.Items {
		told = told || e.Regarding.Name == a.Name && e.Reason == "KeptByResourcePolicy" && e.Action == "Prune" && strings.Contains(e.Note, "ConfigMap "+ns+"/kept")
	}
	if !told {
		t.Error("no KeptByResourcePolicy event names the kept ConfigMap")
	}

	// The uninstall leaves the marked Secret running.
	if err := admin.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the Addon uninstalled", func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(a), &capstanv1.Addon{}))
	})
	if live(t, "v1", "ConfigMap", ns, "stays") != nil {
		t.Fatal("the uninstall left an object without the mark")
	}
	if live(t, "v1", "Secret", ns, "password") == nil {
		t.Fatal("the uninstall deleted a Secret its chart marks to keep")
	}
	if live(t, "v1", "ConfigMap", ns, "kept") == nil {
		t.Fatal("the uninstall deleted what an earlier prune kept")
	}
}
