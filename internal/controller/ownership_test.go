package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/plan"
)

// eventNotes are the notes of the events of one reason about an Addon,
// each after its action.
func eventNotes(t *testing.T, a *capstanv1.Addon, reason string) string {
	t.Helper()
	var events eventsv1.EventList
	if err := admin.List(context.Background(), &events, client.InNamespace(a.Namespace)); err != nil {
		t.Fatal(err)
	}
	var notes strings.Builder
	for _, e := range events.Items {
		if e.Regarding.Name == a.Name && e.Reason == reason {
			notes.WriteString(e.Action + ": " + e.Note + "\n")
		}
	}
	return notes.String()
}

// TestAnInventoryEntryIsNoProofOfOwnership: an install whose pre-install
// hook fails has saved its inventory, every rendered name in it, and
// created nothing. Someone else then creates an object of one of those
// names. The next sync does not apply over it: it is an object to adopt,
// Blocked without spec.adopt. The uninstall does not delete it: it leaves
// it running and says so.
func TestAnInventoryEntryIsNoProofOfOwnership(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	a := dbapp(t, ns, `{hooks: {initdb: {fail: true}}}`, withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = capstanv1.DeletionDelete }))
	got := failedWith(t, a, "the pre-install hook failed, so nothing was applied")
	held := false
	for _, ref := range capstanv1.RefsOf(got.Status.Inventory) {
		held = held || ref.Kind == "ConfigMap" && ref.Name == "db-config"
	}
	if !held || live(t, "v1", "ConfigMap", ns, "db-config") != nil {
		t.Fatalf("want db-config in the inventory and not created; inventory %v", got.Status.Inventory)
	}

	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-config"}, Data: map[string]string{"owner": "someone else"}}
	if err := admin.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`appVersion: "1.0"`) })
	got = waitFor(t, a, 90*time.Second, "Blocked by the object to adopt", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == cur.Generation && cur.Status.Phase == capstanv1.PhaseBlocked
	})
	if r := condition(got, capstanv1.ConditionReady); r.Reason != plan.ReasonExists || !strings.Contains(r.Message, "ConfigMap "+ns+"/db-config") {
		t.Errorf("Ready is %s: %s; want %s naming db-config", r.Reason, r.Message, plan.ReasonExists)
	}

	if err := admin.Delete(ctx, getAddon(t, a)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "the Addon to go", func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(a), &capstanv1.Addon{}))
	})
	cm := &corev1.ConfigMap{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(theirs), cm); err != nil || cm.UID != theirs.UID || cm.Data["owner"] != "someone else" {
		t.Fatalf("the uninstall deleted or changed db-config, which it never created: %v %v", cm.Data, err)
	}
	if notes := eventNotes(t, a, "LeftNotOwned"); !strings.Contains(notes, "Uninstall: ") || !strings.Contains(notes, "ConfigMap "+ns+"/db-config") {
		t.Errorf("no LeftNotOwned event names db-config:\n%s", notes)
	}
}

// TestAdoptionMarksTheObjectAsTheAddonsOwn: a ConfigMap that runs without
// Capstan's labels, which two add-ons render exactly as it is. The first
// adopts it with nothing changed but its owner labels, written by a field
// manager of their own (and who owns the fields it renders); the second is
// Blocked as another add-on's. The
// first's uninstall deletes what it adopted, and the second, woken, then
// creates it.
func TestAdoptionMarksTheObjectAsTheAddonsOwn(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	shared := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared", Labels: map[string]string{"team": "ops"}},
		Data: map[string]string{"greeting": "hello"}}
	if err := admin.Create(ctx, shared); err != nil {
		t.Fatal(err)
	}
	url, _ := charts.publish(t, chart{name: "shared", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n  labels:\n    team: ops\ndata:\n  greeting: hello\n",
	}})
	adopt := withSpec(func(s *capstanv1.AddonSpec) { s.Adopt, s.DeletionPolicy = true, capstanv1.DeletionDelete })
	one := create(t, newAddon(controllerNS, "one-"+ns, url, withTarget(ns), adopt))
	waitPhase(t, one, capstanv1.PhaseSynced)

	cm := &corev1.ConfigMap{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(shared), cm); err != nil {
		t.Fatal(err)
	}
	if !getAddon(t, one).LabelledFor(cm.Labels) || cm.Labels["team"] != "ops" || cm.Labels[capstanv1.ManagedByLabel] != "" || cm.Data["greeting"] != "hello" || len(cm.Data) != 1 {
		t.Fatalf("the adopted ConfigMap has labels %v and data %v; want one's owner labels added, and nothing else changed", cm.Labels, cm.Data)
	}
	for _, f := range cm.ManagedFields {
		switch f.Manager {
		case capstanv1.FieldManager:
			// The fields the chart renders are Capstan's, as an apply of
			// them would make them, but not its labels: it applied nothing.
			if raw := f.FieldsV1.GetRawString(); !strings.Contains(raw, "f:greeting") || strings.Contains(raw, capstanv1.AddonLabel) || strings.Contains(raw, capstanv1.ManagedByLabel) {
				t.Errorf("Capstan's field manager owns %s; want the rendered fields, not Capstan's labels", raw)
			}
		case capstanv1.OwnerLabelsManager:
			if raw := f.FieldsV1.GetRawString(); strings.Contains(raw, "f:data") || strings.Contains(raw, `"f:team"`) || !strings.Contains(raw, capstanv1.AddonLabel) {
				t.Errorf("%s owns %s; want Capstan's owner labels alone", f.Manager, raw)
			}
		}
	}
	marked := cm.ResourceVersion

	two := create(t, newAddon(controllerNS, "two-"+ns, url, withTarget(ns), adopt))
	got := waitPhase(t, two, capstanv1.PhaseBlocked)
	if r := condition(got, capstanv1.ConditionReady); r.Reason != plan.ReasonOtherAddon || !strings.Contains(r.Message, controllerNS+"/"+one.Name) {
		t.Fatalf("two should be Blocked naming one; Ready is %s: %s", r.Reason, r.Message)
	}
	if rv := live(t, "v1", "ConfigMap", ns, "shared").GetResourceVersion(); rv != marked {
		t.Errorf("the ConfigMap changed after its adoption: resourceVersion %s -> %s", marked, rv)
	}

	if err := admin.Delete(ctx, getAddon(t, one)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "one to go, with what it adopted", func() bool {
		c := live(t, "v1", "ConfigMap", ns, "shared")
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(one), &capstanv1.Addon{})) && (c == nil || c.GetUID() != shared.UID)
	})
	waitPhase(t, two, capstanv1.PhaseSynced)
	if c := live(t, "v1", "ConfigMap", ns, "shared"); c == nil || !getAddon(t, two).LabelledFor(c.GetLabels()) {
		t.Fatalf("two should have created the ConfigMap once one was gone: %v", c)
	}
}

// TestLabelOwnerIsBoundToTheObject: the labels of an adoption are applied
// to the object the plan saw, never to one created since under its name,
// and never create one that is gone.
func TestLabelOwnerIsBoundToTheObject(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	a := &apply.Applier{Client: admin}
	owner := map[string]string{capstanv1.AddonLabel: "x", capstanv1.AddonNamespaceLabel: controllerNS}
	ref := capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "gone"}
	err := a.LabelOwner(ctx, ref, "0b0e8a2c-0000-4000-8000-000000000000", owner)
	if !apierrors.IsConflict(err) {
		t.Errorf("labelling a missing object: %v; want a conflict", err)
	}
	if live(t, "v1", "ConfigMap", ns, "gone") != nil {
		t.Fatal("labelling a missing object created it")
	}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "anew"}, Data: map[string]string{"k": "v"}}
	if err := admin.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	ref.Name = "anew"
	if err := a.LabelOwner(ctx, ref, "0b0e8a2c-0000-4000-8000-000000000000", owner); err == nil {
		t.Error("labelling an object of another UID succeeded")
	}
	if err := a.LabelOwner(ctx, ref, cm.UID, owner); err != nil {
		t.Fatal(err)
	}
	got := &corev1.ConfigMap{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(cm), got); err != nil || got.Labels[capstanv1.AddonLabel] != "x" || got.Data["k"] != "v" {
		t.Errorf("after the labels: %v %v %v", got.Labels, got.Data, err)
	}
}

// TestThePlanListsNoPruneOfAnotherOwnersObject: an object of the
// inventory that the render no longer holds, but that someone else made
// anew under its name (no owner labels, no field Capstan applied), is not
// a delete in the plan: a notice says the prune leaves it running and
// drops it from the inventory. The prune then does just that.
func TestThePlanListsNoPruneOfAnotherOwnersObject(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url1, _ := charts.publish(t, releaseConfigMaps("foreign", "1.0.0", "a1", "a2", "a3", "gone"))
	url2, _ := charts.publish(t, releaseConfigMaps("foreign", "2.0.0", "a1", "a2", "a3"))
	a := create(t, newAddon(controllerNS, "foreign-"+ns[len(ns)-5:], url1, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.ReleaseName, s.Prune = "r", true
	})))
	waitPhase(t, a, capstanv1.PhaseSynced)
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Suspend = true })
	waitPhase(t, a, capstanv1.PhaseSuspended)

	// Someone else deletes r-gone and makes a ConfigMap of their own under
	// its name, which the inventory still holds.
	if err := admin.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r-gone"}}); err != nil {
		t.Fatal(err)
	}
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r-gone"}, Data: map[string]string{"owner": "someone else"}}
	if err := admin.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}

	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url2 })
	got := waitFor(t, a, 90*time.Second, "the plan of 2.0.0", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == cur.Generation && cur.Status.Phase == capstanv1.PhaseSuspended && cur.Status.Plan != nil
	})
	p := got.Status.Plan
	for _, o := range p.Objects {
		if o.Name == "r-gone" && o.Action == capstanv1.ActionDelete {
			t.Errorf("the plan deletes r-gone, which the prune leaves: someone else made it")
		}
	}
	if p.Summary.Delete != 0 {
		t.Errorf("the plan counts %d delete(s); want none", p.Summary.Delete)
	}
	noticed := false
	for _, n := range p.Notices {
		noticed = noticed || strings.Contains(n.Message, "not this add-on's") && strings.Contains(n.Message, "ConfigMap "+ns+"/r-gone")
	}
	if !noticed {
		t.Errorf("no notice says r-gone is left running and dropped from the inventory: %+v", p.Notices)
	}

	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Suspend = false })
	got = waitFor(t, a, 90*time.Second, "2.0.0 synced", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == cur.Generation && cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.Version == "2.0.0"
	})
	cm := &corev1.ConfigMap{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(theirs), cm); err != nil || cm.UID != theirs.UID || cm.Data["owner"] != "someone else" {
		t.Fatalf("the prune deleted or changed r-gone, which it never created: %v %v", cm.Data, err)
	}
	for _, ref := range capstanv1.RefsOf(got.Status.Inventory) {
		if ref.Name == "r-gone" {
			t.Errorf("the inventory still holds r-gone after the prune left it")
		}
	}
	if h := got.Status.History; len(h) == 0 || h[0].Changes.Delete != 0 {
		t.Errorf("the revision of 2.0.0 records deletes: %+v", h)
	}
	if notes := eventNotes(t, a, "LeftNotOwned"); !strings.Contains(notes, "Prune: ") || !strings.Contains(notes, "ConfigMap "+ns+"/r-gone") {
		t.Errorf("no LeftNotOwned event of the prune names r-gone:\n%s", notes)
	}
}

// sharedNames are the names of a test's shared Namespace and of its two
// Addons, from the suffix of its namespace ns and a tag of the test's own.
func sharedNames(ns, tag string) (shared, one, two string) {
	suffix := ns[strings.LastIndex(ns, "-")+1:]
	return "shared-" + tag + "-" + suffix, tag + "-one-" + suffix, tag + "-two-" + suffix
}

// sharedNamespaceChart publishes a chart that renders a Namespace named
// shared, labelled with the value team (a by default), and a ConfigMap
// with the value x: two add-ons of it share the Namespace, a kind an
// uninstall never deletes.
func sharedNamespaceChart(t *testing.T, name, shared string) string {
	t.Helper()
	url, _ := charts.publish(t, chart{name: name, version: "1.0.0", files: map[string]string{
		"templates/ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + shared + "\n  labels:\n    team: {{ .Values.team | default \"a\" | quote }}\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  x: {{ .Values.x | default \"a\" | quote }}\n",
	}})
	return url
}

// stableFor reads the shared Namespace once a second, polls times, and
// fails when its resourceVersion moves: neither add-on writes it again.
func stableFor(t *testing.T, shared string, polls int) {
	t.Helper()
	first := live(t, "v1", "Namespace", "", shared)
	changes := 0
	last := first.GetResourceVersion()
	for range polls {
		time.Sleep(time.Second)
		if rv := live(t, "v1", "Namespace", "", shared).GetResourceVersion(); rv != last {
			changes, last = changes+1, rv
		}
	}
	if changes > 0 {
		t.Errorf("the shared Namespace was written %d time(s) in %d s once both add-ons had settled (resourceVersion %s -> %s, labels now %v)",
			changes, polls, first.GetResourceVersion(), last, live(t, "v1", "Namespace", "", shared).GetLabels())
	}
}

// TestANeverDeleteKindStaysSharedAfterAnAdoption: one add-on creates a
// Namespace, and a second, with spec.adopt, renders it as it is. The
// second adopts it without writing its owner labels over the first's,
// and the first, which still holds it in its inventory, stays Synced
// through a change of its values instead of finding it to adopt again.
func TestANeverDeleteKindStaysSharedAfterAnAdoption(t *testing.T) {
	ns1, ns2 := newNamespace(t), newNamespace(t)
	shared, oneName, twoName := sharedNames(ns1, "adopted")
	url := sharedNamespaceChart(t, "sharedns", shared)
	one := create(t, newAddon(controllerNS, oneName, url, withTarget(ns1)))
	waitPhase(t, one, capstanv1.PhaseSynced)

	two := create(t, newAddon(controllerNS, twoName, url, withTarget(ns2), withSpec(func(s *capstanv1.AddonSpec) { s.Adopt = true })))
	waitPhase(t, two, capstanv1.PhaseSynced)
	if l := live(t, "v1", "Namespace", "", shared).GetLabels(); !getAddon(t, one).LabelledFor(l) {
		t.Errorf("two's adoption wrote its owner labels over one's on the shared Namespace: %v", l)
	}

	update(t, one, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`x: b`) })
	got := waitFor(t, one, 90*time.Second, "one to settle", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == cur.Generation && (cur.Status.Phase == capstanv1.PhaseBlocked || cur.Status.Phase == capstanv1.PhaseSynced)
	})
	if r := condition(got, capstanv1.ConditionReady); got.Status.Phase != capstanv1.PhaseSynced {
		t.Errorf("one, which created the shared Namespace, is %s after two adopted it: %s: %s", got.Status.Phase, r.Reason, r.Message)
	}
	if cm := live(t, "v1", "ConfigMap", ns1, "cm"); cm == nil || cm.Object["data"].(map[string]any)["x"] != "b" {
		t.Errorf("one's change was not applied: %v", cm)
	}
}

// TestAddonsSharingANeverDeleteKindDoNotFight: two add-ons, both with
// spec.adopt, render one Namespace. Once both are Synced, neither writes
// it again: no owner labels taken back and forth on every sync.
func TestAddonsSharingANeverDeleteKindDoNotFight(t *testing.T) {
	ns1, ns2 := newNamespace(t), newNamespace(t)
	shared, oneName, twoName := sharedNames(ns1, "nofight")
	url := sharedNamespaceChart(t, "sharedns2", shared)
	adopt := withSpec(func(s *capstanv1.AddonSpec) { s.Adopt = true })
	one := create(t, newAddon(controllerNS, oneName, url, withTarget(ns1), adopt))
	waitPhase(t, one, capstanv1.PhaseSynced)
	two := create(t, newAddon(controllerNS, twoName, url, withTarget(ns2), adopt))
	waitPhase(t, two, capstanv1.PhaseSynced)
	update(t, one, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`x: b`) })
	waitPhase(t, one, capstanv1.PhaseSynced)
	waitPhase(t, two, capstanv1.PhaseSynced)
	stableFor(t, shared, 30)
	if a, b := getAddon(t, one), getAddon(t, two); a.Status.Phase != capstanv1.PhaseSynced || b.Status.Phase != capstanv1.PhaseSynced {
		t.Errorf("one is %s and two is %s; want both Synced", a.Status.Phase, b.Status.Phase)
	}
}

// TestAddonsSharingANeverDeleteKindShowTheirConflict: two add-ons render
// one Namespace with different values of one label, both allowed to adopt
// with changes. Both apply with Capstan's one field manager, so each
// would undo the other's value on every sync. The second is Blocked
// (ManagedByAnotherAddon) naming the first, which keeps its value, and
// nothing writes the Namespace again.
func TestAddonsSharingANeverDeleteKindShowTheirConflict(t *testing.T) {
	ns1, ns2 := newNamespace(t), newNamespace(t)
	shared, oneName, twoName := sharedNames(ns1, "conflict")
	url := sharedNamespaceChart(t, "sharedns3", shared)
	adopt := func(team string) addonOpt {
		return withSpec(func(s *capstanv1.AddonSpec) {
			s.Adopt, s.AllowAdoptChanges, s.Values = true, true, jsonValues(`team: `+team)
		})
	}
	one := create(t, newAddon(controllerNS, oneName, url, withTarget(ns1), adopt("a")))
	waitPhase(t, one, capstanv1.PhaseSynced)
	two := create(t, newAddon(controllerNS, twoName, url, withTarget(ns2), adopt("b")))
	got := waitFor(t, two, 90*time.Second, "two to settle", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == cur.Generation && (cur.Status.Phase == capstanv1.PhaseBlocked || cur.Status.Phase == capstanv1.PhaseSynced)
	})
	if r := condition(got, capstanv1.ConditionReady); got.Status.Phase != capstanv1.PhaseBlocked || r.Reason != plan.ReasonOtherAddon ||
		!strings.Contains(r.Message, controllerNS+"/"+one.Name) || !strings.Contains(r.Message, "Namespace "+shared) {
		t.Errorf("two is %s: %s: %s; want Blocked %s naming one and the Namespace", got.Status.Phase, r.Reason, r.Message, plan.ReasonOtherAddon)
	}
	stableFor(t, shared, 20)
	if l := live(t, "v1", "Namespace", "", shared).GetLabels(); l["team"] != "a" || !getAddon(t, one).LabelledFor(l) {
		t.Errorf("the shared Namespace has labels %v; want one's, with team a", l)
	}
	if a := getAddon(t, one); a.Status.Phase != capstanv1.PhaseSynced {
		t.Errorf("one is %s; want Synced", a.Status.Phase)
	}
}

// movableNamespaceChart publishes a chart that renders a Namespace named
// shared, labelled with the value team (a by default), unless the value
// noNamespace is set, and a ConfigMap.
func movableNamespaceChart(t *testing.T, name, shared string) string {
	t.Helper()
	url, _ := charts.publish(t, chart{name: name, version: "1.0.0", files: map[string]string{
		"templates/ns.yaml": "{{ if not .Values.noNamespace }}apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + shared + "\n  labels:\n    team: {{ .Values.team | default \"a\" | quote }}\n{{ end }}\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  x: \"a\"\n",
	}})
	return url
}

// TestANeverDeleteKindMovedToAnotherAddonIsLetGo: one add-on creates a
// Namespace, then its render drops it (a CRD moved into an add-on of its
// own): the sync leaves it running and drops it from the inventory. A
// second add-on, with spec.adopt, renders it and adopts it, and its next
// change of it is applied, not Blocked by the first, which no longer
// renders it. The Namespace is never deleted.
func TestANeverDeleteKindMovedToAnotherAddonIsLetGo(t *testing.T) {
	ns1, ns2 := newNamespace(t), newNamespace(t)
	shared, oneName, twoName := sharedNames(ns1, "moved")
	url := movableNamespaceChart(t, "movedns", shared)
	one := create(t, newAddon(controllerNS, oneName, url, withTarget(ns1)))
	waitPhase(t, one, capstanv1.PhaseSynced)
	first := live(t, "v1", "Namespace", "", shared)
	if first == nil {
		t.Fatalf("one did not create the Namespace %s", shared)
	}

	update(t, one, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`noNamespace: true`) })
	got := waitFor(t, one, 90*time.Second, "one to sync without the Namespace", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == cur.Generation && cur.Status.Phase == capstanv1.PhaseSynced
	})
	for _, ref := range capstanv1.RefsOf(got.Status.Inventory) {
		if ref.Kind == "Namespace" && ref.Name == shared {
			t.Errorf("one's inventory still holds the Namespace %s, which its render no longer has", shared)
		}
	}

	two := create(t, newAddon(controllerNS, twoName, url, withTarget(ns2), withSpec(func(s *capstanv1.AddonSpec) { s.Adopt = true })))
	waitPhase(t, two, capstanv1.PhaseSynced)
	update(t, two, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`team: b`) })
	got = waitFor(t, two, 90*time.Second, "two to settle", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == cur.Generation && (cur.Status.Phase == capstanv1.PhaseBlocked || cur.Status.Phase == capstanv1.PhaseSynced)
	})
	if r := condition(got, capstanv1.ConditionReady); got.Status.Phase != capstanv1.PhaseSynced {
		t.Fatalf("two's change of the Namespace it adopted is %s: %s: %s; want it applied", got.Status.Phase, r.Reason, r.Message)
	}
	now := live(t, "v1", "Namespace", "", shared)
	if now == nil || now.GetUID() != first.GetUID() {
		t.Fatalf("the Namespace was deleted or made anew: %v", now)
	}
	if l := now.GetLabels(); l["team"] != "b" || !getAddon(t, two).LabelledFor(l) {
		t.Errorf("the Namespace has labels %v; want two's, with team b", l)
	}
	if a := getAddon(t, one); a.Status.Phase != capstanv1.PhaseSynced {
		t.Errorf("one is %s; want Synced", a.Status.Phase)
	}
}

// TestASharedNeverDeleteKindIsFreedWhenTheHolderDropsIt: two add-ons
// share a Namespace, the second having adopted it as it is; the second's
// change of it is Blocked while the first holds it. Once the first's
// render drops it and syncs, the second applies its change, with its
// own labels, and the Namespace is never deleted.
func TestASharedNeverDeleteKindIsFreedWhenTheHolderDropsIt(t *testing.T) {
	ns1, ns2 := newNamespace(t), newNamespace(t)
	shared, oneName, twoName := sharedNames(ns1, "freed")
	url := movableNamespaceChart(t, "freedns", shared)
	one := create(t, newAddon(controllerNS, oneName, url, withTarget(ns1)))
	waitPhase(t, one, capstanv1.PhaseSynced)
	first := live(t, "v1", "Namespace", "", shared)
	two := create(t, newAddon(controllerNS, twoName, url, withTarget(ns2), withSpec(func(s *capstanv1.AddonSpec) { s.Adopt = true })))
	waitPhase(t, two, capstanv1.PhaseSynced)
	update(t, two, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`team: b`) })
	got := waitFor(t, two, 90*time.Second, "two to settle", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == cur.Generation && (cur.Status.Phase == capstanv1.PhaseBlocked || cur.Status.Phase == capstanv1.PhaseSynced)
	})
	if r := condition(got, capstanv1.ConditionReady); got.Status.Phase != capstanv1.PhaseBlocked || r.Reason != plan.ReasonOtherAddon {
		t.Fatalf("two's change of the Namespace one holds is %s: %s: %s; want Blocked %s", got.Status.Phase, r.Reason, r.Message, plan.ReasonOtherAddon)
	}

	update(t, one, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`noNamespace: true`) })
	waitFor(t, two, 90*time.Second, "two to apply its change once one let the Namespace go", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced
	})
	now := live(t, "v1", "Namespace", "", shared)
	if now == nil || now.GetUID() != first.GetUID() {
		t.Fatalf("the Namespace was deleted or made anew: %v", now)
	}
	if l := now.GetLabels(); l["team"] != "b" || !getAddon(t, two).LabelledFor(l) {
		t.Errorf("the Namespace has labels %v; want two's, with team b", l)
	}
	for _, ref := range capstanv1.RefsOf(getAddon(t, one).Status.Inventory) {
		if ref.Kind == "Namespace" && ref.Name == shared {
			t.Errorf("one's inventory still holds the Namespace %s, which its render no longer has", shared)
		}
	}
}

// TestTheCreatedNamespaceStaysInTheInventory: the Namespace that
// spec.createNamespace adds is not part of the render, but the add-on
// asks for it: a sync of a new render keeps it in the inventory, as a
// Namespace the render no longer has would not be.
func TestTheCreatedNamespaceStaysInTheInventory(t *testing.T) {
	home := newNamespace(t)
	target := home + "-app"
	url, _ := charts.publish(t, chart{name: "creatednsapp", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  x: {{ .Values.x | default \"a\" | quote }}\n",
	}})
	a := create(t, newAddon(controllerNS, "createdns-"+home[len(home)-5:], url, withTarget(target), withSpec(func(s *capstanv1.AddonSpec) { s.CreateNamespace = true })))
	waitPhase(t, a, capstanv1.PhaseSynced)
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`x: b`) })
	got := waitFor(t, a, 90*time.Second, "the change synced", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == cur.Generation && cur.Status.Phase == capstanv1.PhaseSynced
	})
	if cm := live(t, "v1", "ConfigMap", target, "cm"); cm == nil || cm.Object["data"].(map[string]any)["x"] != "b" {
		t.Fatalf("the change was not applied: %v", cm)
	}
	held := false
	for _, ref := range capstanv1.RefsOf(got.Status.Inventory) {
		held = held || ref.Kind == "Namespace" && ref.Name == target
	}
	if !held {
		t.Errorf("the inventory lost the Namespace spec.createNamespace adds: %v", got.Status.Inventory)
	}
	if p := got.Status.Plan; p != nil {
		for _, n := range p.Notices {
			if strings.Contains(n.Message, "never deletes") && strings.Contains(n.Message, target) {
				t.Errorf("the plan says the created Namespace leaves the inventory: %s", n.Message)
			}
		}
	}
}
