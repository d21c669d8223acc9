package controller_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestRecreateMarks: without spec.recreate, an object whose manifest asks
// to be deleted and created anew when the API server refuses a change in
// place is, as Flux (kustomize.toolkit.fluxcd.io/force: enabled) and Argo
// CD (Force=true) do it: a Deployment whose selector changes and a
// RoleBinding whose roleRef changes are planned to be recreated, each
// with its mark, held with spec.manualSync, then, once it is unset,
// created anew, and a Recreated event names each with its mark.
func TestRecreateMarks(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "recreatemarks", version: "1.0.0", files: markedChart()})
	a := create(t, newAddon(controllerNS, "marks-"+ns[len(ns)-5:], url, withTarget(ns), withValues("track: a\nrole: reader\npolicy: OrderedReady")))
	waitPhase(t, a, capstanv1.PhaseSynced)
	web, binding := live(t, "apps/v1", "Deployment", ns, "web"), live(t, "rbac.authorization.k8s.io/v1", "RoleBinding", ns, "binding")
	if web == nil || binding == nil {
		t.Fatal("web or binding missing after the install")
	}

	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.ManualSync = true
		cur.Spec.Values = jsonValues("track: b\nrole: writer\npolicy: OrderedReady")
	})
	held := waitFor(t, a, 60*time.Second, "the plan held for approval", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseOutOfSync && cur.Status.ObservedGeneration == cur.Generation && cur.Status.Plan != nil
	})
	marked := map[string]string{}
	for _, o := range held.Status.Plan.Objects {
		if o.Recreate {
			marked[o.Name] = o.Diff
		}
	}
	if !strings.Contains(marked["web"], "as its manifest's kustomize.toolkit.fluxcd.io/force: enabled asks") ||
		!strings.Contains(marked["binding"], "as its manifest's argocd.argoproj.io/sync-options: Force=true asks") || len(marked) != 2 {
		t.Fatalf("the plan marks %v to be recreated; want web and binding, each with its mark", marked)
	}
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.ManualSync = false })
	upgraded := synced(t, a)
	newWeb, newBinding := live(t, "apps/v1", "Deployment", ns, "web"), live(t, "rbac.authorization.k8s.io/v1", "RoleBinding", ns, "binding")
	if newWeb == nil || newWeb.GetUID() == web.GetUID() {
		t.Errorf("web was not created anew: %v", newWeb)
	}
	if newBinding == nil || newBinding.GetUID() == binding.GetUID() {
		t.Fatalf("binding was not created anew: %v", newBinding)
	}
	if role, _, _ := unstructured.NestedString(newBinding.Object, "roleRef", "name"); role != "writer" {
		t.Errorf("binding's roleRef names %q, want writer", role)
	}
	if upgraded.Spec.Recreate {
		t.Fatal("the test needs spec.recreate unset")
	}
	eventually(t, 30*time.Second, "the Recreated event", func() bool {
		msg := recreatedEvent(t, a)
		return strings.Contains(msg, "Deployment "+ns+"/web (kustomize.toolkit.fluxcd.io/force: enabled)") &&
			strings.Contains(msg, "RoleBinding "+ns+"/binding (argocd.argoproj.io/sync-options: Force=true)")
	})
}

// recreatedEvent is the note of the newest Recreated event of a, or "".
func recreatedEvent(t *testing.T, a *capstanv1.Addon) string {
	t.Helper()
	var events eventsv1.EventList
	if err := admin.List(context.Background(), &events, client.InNamespace(a.Namespace)); err != nil {
		t.Fatal(err)
	}
	note := ""
	for _, e := range events.Items {
		if e.Regarding.Name == a.Name && e.Reason == "Recreated" {
			note = e.Note
		}
	}
	return note
}

// markedChart is recreateChart with its Deployment marked in Flux's way
// and its RoleBinding in Argo CD's; its StatefulSet, unmarked, keeps its
// policy in the test.
func markedChart() map[string]string {
	files := maps.Clone(recreateChart)
	files["templates/web.yaml"] = strings.Replace(files["templates/web.yaml"], "  name: web\n",
		"  name: web\n  annotations:\n    kustomize.toolkit.fluxcd.io/force: enabled\n", 1)
	files["templates/rbac.yaml"] = strings.Replace(files["templates/rbac.yaml"], "  name: binding\n",
		"  name: binding\n  annotations:\n    argocd.argoproj.io/sync-options: Replace=true, Force=true\n", 1)
	return files
}
