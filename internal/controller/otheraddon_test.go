package controller_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/plan"
)

// TestAnotherAddonsObjectsAreNotTaken installs one chart as Addon first,
// then the same chart, release name and namespace as Addon second, with
// spec.adopt and allowAdoptChanges: second is Blocked, naming first, and
// changes nothing. Once first is deleted (its objects left running, the
// cluster profile's Orphan), nothing holds them, and second, woken by the
// removal, adopts them.
func TestAnotherAddonsObjectsAreNotTaken(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "shared", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\ndata:\n  from: {{ .Values.from | default \"first\" | quote }}\n",
	}})
	same := func(s *capstanv1.AddonSpec) { s.ReleaseName = "same" }
	first := create(t, newAddon(controllerNS, "first-"+ns, url, withTarget(ns), withSpec(same)))
	waitPhase(t, first, capstanv1.PhaseSynced)

	second := create(t, newAddon(controllerNS, "second-"+ns, url, withTarget(ns), withValues("from: second"), withSpec(func(s *capstanv1.AddonSpec) {
		same(s)
		s.Adopt, s.AllowAdoptChanges = true, true
	})))
	got := waitPhase(t, second, capstanv1.PhaseBlocked)
	ready := condition(got, capstanv1.ConditionReady)
	if ready.Reason != plan.ReasonOtherAddon || !strings.Contains(ready.Message, "Addon "+controllerNS+"/first-"+ns) {
		t.Fatalf("second should be Blocked naming first; Ready is %s: %s", ready.Reason, ready.Message)
	}
	if o := got.Status.Plan.Objects; len(o) == 0 || o[0].ManagedBy != controllerNS+"/first-"+ns {
		t.Errorf("the plan should name first on the object: %+v", o)
	}
	if _, err := addons.Approve(ctx, admin, client.ObjectKeyFromObject(second), ""); !errors.Is(err, addons.ErrPlanBlocked) {
		t.Errorf("approving second's plan: %v; want it refused as blocked", err)
	}
	cm := &corev1.ConfigMap{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "same-cm"}, cm); err != nil || cm.Data["from"] != "first" {
		t.Fatalf("first's ConfigMap changed while second was blocked: %v %v", cm.Data, err)
	}

	if err := admin.Delete(ctx, getAddon(t, first)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "first to be gone", func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(first), &capstanv1.Addon{}))
	})
	// Nothing changes second: first's removal wakes it, and it finds the
	// objects free. Its resync is 20 s after it was Blocked, well after
	// the bound below.
	gone := time.Now()
	waitPhase(t, second, capstanv1.PhaseSynced)
	if took := time.Since(gone); took > 12*time.Second {
		t.Errorf("second took %s to adopt the objects after first was gone; want it woken, not resynced", took.Round(time.Second))
	}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "same-cm"}, cm); err != nil || cm.Data["from"] != "second" {
		t.Fatalf("second should have adopted the ConfigMap: %v %v", cm.Data, err)
	}
}

// TestPruneLeavesAnotherAddonsObjects: two add-ons created at
// once can both have applied an object, which then carries the labels of
// the one that applied it last. A prune and an uninstall of the other
// leave such an object running, and say so, instead of deleting what the
// first runs.
func TestPruneLeavesAnotherAddonsObjects(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url1, _ := charts.publish(t, releaseConfigMaps("held", "1.0.0", "a1", "a2", "a3", "a4", "shared", "taken"))
	url2, _ := charts.publish(t, releaseConfigMaps("held", "2.0.0", "a1", "a2", "a3", "a4"))
	first := create(t, newAddon(controllerNS, "first-"+ns, url1, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.ReleaseName, s.Prune, s.DeletionPolicy = "same", true, capstanv1.DeletionDelete
	})))
	waitPhase(t, first, capstanv1.PhaseSynced)
	second := create(t, newAddon(controllerNS, "second-"+ns, url1, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.ReleaseName, s.Suspend = "same", true
	})))
	waitPhase(t, second, capstanv1.PhaseSuspended)

	// As the race leaves them: the objects carry second's labels, and
	// second's inventory holds them. first is suspended meanwhile, so that
	// it does not take them back.
	update(t, first, func(cur *capstanv1.Addon) { cur.Spec.Suspend = true })
	waitPhase(t, first, capstanv1.PhaseSuspended)
	giveToSecond := func(names ...string) {
		t.Helper()
		for _, n := range names {
			cm := &corev1.ConfigMap{}
			if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "same-" + n}, cm); err != nil {
				t.Fatal(err)
			}
			cm.Labels[capstanv1.AddonLabel] = second.Name
			if err := admin.Update(ctx, cm); err != nil {
				t.Fatal(err)
			}
		}
		updateStatus(t, second, func(cur *capstanv1.Addon) {
			for _, n := range names {
				cur.Status.Inventory = append(cur.Status.Inventory, capstanv1.ObjectID{ObjectRef: capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "same-" + n}})
			}
		})
	}
	giveToSecond("shared", "taken")

	// The prune: first's new version drops both.
	update(t, first, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL, cur.Spec.Suspend = url2, false })
	got := waitFor(t, first, 90*time.Second, "first's upgrade", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.Version == "2.0.0"
	})
	for _, n := range []string{"shared", "taken"} {
		if live(t, "v1", "ConfigMap", ns, "same-"+n) == nil {
			t.Errorf("first's prune deleted same-%s, which second holds", n)
		}
		for _, ref := range got.Status.Inventory {
			if ref.Name == "same-"+n {
				t.Errorf("first's inventory still holds same-%s after leaving it to second", n)
			}
		}
	}

	// The uninstall: one of first's own objects is second's too by now.
	update(t, first, func(cur *capstanv1.Addon) { cur.Spec.Suspend = true })
	waitPhase(t, first, capstanv1.PhaseSuspended)
	giveToSecond("a1")
	if err := admin.Delete(ctx, getAddon(t, first)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "first to be gone", func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(first), &capstanv1.Addon{}))
	})
	if live(t, "v1", "ConfigMap", ns, "same-a1") == nil {
		t.Error("first's uninstall deleted same-a1, which second holds")
	}
	for _, n := range []string{"a2", "a3", "a4"} {
		if live(t, "v1", "ConfigMap", ns, "same-"+n) != nil {
			t.Errorf("first's uninstall left same-%s, its own", n)
		}
	}
	var events eventsv1.EventList
	if err := admin.List(ctx, &events, client.InNamespace(controllerNS)); err != nil {
		t.Fatal(err)
	}
	var notes strings.Builder
	for _, e := range events.Items {
		if e.Regarding.Name == first.Name && e.Reason == "LeftToAnotherAddon" {
			notes.WriteString(e.Action + ": " + e.Note + "\n")
		}
	}
	for _, want := range []string{"Prune: ", "same-shared (Addon " + controllerNS + "/" + second.Name + ")", "same-taken", "Uninstall: ", "same-a1"} {
		if !strings.Contains(notes.String(), want) {
			t.Errorf("the LeftToAnotherAddon events do not say %q:\n%s", want, notes.String())
		}
	}
}

// TestABlockedAddonWakesWhenTheOtherLetsGo: second is Blocked by an object
// first holds; first's new version no longer renders it and prunes it.
// first's sync (its Ready condition changes) wakes second, which creates
// the object: no edit of second, and no wait for its resync.
func TestABlockedAddonWakesWhenTheOtherLetsGo(t *testing.T) {
	ns := newNamespace(t)
	url1, _ := charts.publish(t, releaseConfigMaps("letgo", "1.0.0", "a", "b", "c", "shared"))
	url2, _ := charts.publish(t, releaseConfigMaps("letgo", "2.0.0", "a", "b", "c"))
	shared, _ := charts.publish(t, releaseConfigMaps("letgo", "1.0.0-shared", "shared"))
	first := create(t, newAddon(controllerNS, "first-"+ns, url1, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.ReleaseName, s.Prune = "same", true
	})))
	waitPhase(t, first, capstanv1.PhaseSynced)
	second := create(t, newAddon(controllerNS, "second-"+ns, shared, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.ReleaseName, s.Adopt, s.AllowAdoptChanges = "same", true, true
	})))
	if got := waitPhase(t, second, capstanv1.PhaseBlocked); condition(got, capstanv1.ConditionReady).Reason != plan.ReasonOtherAddon {
		t.Fatalf("second should be Blocked by first's object: %+v", condition(got, capstanv1.ConditionReady))
	}

	update(t, first, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url2 })
	waitFor(t, first, 90*time.Second, "first's upgrade", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.Version == "2.0.0"
	})
	let := time.Now()
	got := waitPhase(t, second, capstanv1.PhaseSynced)
	if took := time.Since(let); took > 12*time.Second {
		t.Errorf("second took %s to go on after first let the object go; want it woken, not resynced", took.Round(time.Second))
	}
	if cm := live(t, "v1", "ConfigMap", ns, "same-shared"); cm == nil || cm.GetLabels()[capstanv1.AddonLabel] != second.Name {
		t.Errorf("same-shared should be second's now: %v", cm)
	}
	if len(got.Status.Inventory) != 1 {
		t.Errorf("second's inventory = %v; want same-shared alone", got.Status.Inventory)
	}
}

// releaseConfigMaps is a chart of one ConfigMap per name, each named after
// the release: "<release>-<name>".
func releaseConfigMaps(name, version string, names ...string) chart {
	files := map[string]string{}
	for _, n := range names {
		files["templates/"+n+".yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-" + n + "\n"
	}
	return chart{name: name, version: version, files: files}
}

// TestHookLeavesAnotherAddonsObject installs Addon first, whose chart
// renders a ConfigMap db-credentials, then, in the same namespace, Addon
// second, whose chart has a pre-install hook ConfigMap of that name. The
// hook neither deletes first's ConfigMap (its before-hook-creation
// policy) nor applies over it: second fails, Stalled, naming first and
// what to do, and first's ConfigMap is the one it applied. Before, second's
// hook deleted it and made its own.
func TestHookLeavesAnotherAddonsObject(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	firstURL, _ := charts.publish(t, chart{name: "billing", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: db-credentials\ndata:\n  from: billing\n",
	}})
	secondURL, _ := charts.publish(t, chart{name: "reports", version: "1.0.0", files: map[string]string{
		"templates/hook.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: db-credentials\n  annotations:\n    helm.sh/hook: pre-install\ndata:\n  from: reports\n",
		"templates/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: reports\ndata:\n  from: reports\n",
	}})
	first := create(t, newAddon(controllerNS, "first-"+ns, firstURL, withTarget(ns)))
	waitPhase(t, first, capstanv1.PhaseSynced)
	before := &corev1.ConfigMap{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-credentials"}, before); err != nil {
		t.Fatal(err)
	}

	second := create(t, newAddon(controllerNS, "second-"+ns, secondURL, withTarget(ns)))
	got := waitPhase(t, second, capstanv1.PhaseFailed)
	ready := condition(got, capstanv1.ConditionReady)
	if !isStalled(got) || !strings.Contains(ready.Message, "Addon "+controllerNS+"/first-"+ns+" holds it") {
		t.Errorf("second should be Stalled naming first; Ready is %s: %s", ready.Reason, ready.Message)
	}
	cm := &corev1.ConfigMap{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-credentials"}, cm); err != nil || cm.UID != before.UID || cm.Data["from"] != "billing" {
		t.Fatalf("first's ConfigMap is %s %v (%v); want the one first applied (%s), as it was", cm.UID, cm.Data, err, before.UID)
	}
}
