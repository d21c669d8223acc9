package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
)

func readyReason(a *capstanv1.Addon) string {
	if c := apimeta.FindStatusCondition(a.Status.Conditions, capstanv1.ConditionReady); c != nil && c.ObservedGeneration == a.Generation {
		return c.Reason
	}
	return ""
}

func dependsOn(names ...string) addonOpt {
	return withSpec(func(s *capstanv1.AddonSpec) {
		for _, n := range names {
			s.DependsOn = append(s.DependsOn, capstanv1.DependencyReference{Name: n})
		}
	})
}

// TestDependsOn installs an app that depends on a database add-on: the
// app plans, applies nothing, and says what it waits for, until the
// database is Ready; then it installs at once. A removal of the database
// with uninstall waits until the app is gone.
func TestDependsOn(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	db := create(t, newAddon(ns, "db", url, withSpec(func(s *capstanv1.AddonSpec) { s.Suspend = true })))
	app := create(t, newAddon(ns, "app", url, dependsOn("db")))
	got := waitFor(t, app, 90*time.Second, "the app to wait for db", func(cur *capstanv1.Addon) bool {
		return readyReason(cur) == "DependencyNotReady"
	})
	if got.Status.Phase != capstanv1.PhaseProgressing || !strings.Contains(readyMessage(got), ns+"/db") {
		t.Errorf("phase %s, message %q; want Progressing, naming %s/db", got.Status.Phase, readyMessage(got), ns)
	}
	if live(t, "v1", "ConfigMap", ns, "app-config") != nil {
		t.Fatal("the app applied its objects before its dependency was Ready")
	}
	if p := got.Status.Plan; p == nil || !hasNotice(p, "spec.dependsOn") {
		t.Errorf("the plan does not say what the app waits for: %+v", p)
	}

	began := time.Now()
	update(t, db, func(cur *capstanv1.Addon) { cur.Spec.Suspend = false })
	waitPhase(t, db, capstanv1.PhaseSynced)
	waitPhase(t, app, capstanv1.PhaseSynced)
	// Woken by the dependency's change, not by the 30 s recheck.
	if took := time.Since(began); took > 25*time.Second {
		t.Errorf("the app took %s to install after db was Ready", took)
	}
	if live(t, "v1", "ConfigMap", ns, "app-config") == nil {
		t.Fatal("the app's objects were not applied")
	}

	// Removing db with uninstall waits for its dependent.
	for _, a := range []*capstanv1.Addon{db, app} {
		// NOTE: update retries on a conflict with the controller's status
		// writes, which go on for a moment after Synced.
		update(t, a, func(cur *capstanv1.Addon) { cur.Spec.DeletionPolicy = capstanv1.DeletionDelete })
	}
	if err := admin.Delete(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	got = waitFor(t, db, 60*time.Second, "db to wait for its dependent", func(cur *capstanv1.Addon) bool {
		return readyReason(cur) == "WaitingForDependents"
	})
	if !strings.Contains(readyMessage(got), ns+"/app") || live(t, "v1", "ConfigMap", ns, "db-config") == nil {
		t.Errorf("message %q; db's objects must stay while %s/app depends on it", readyMessage(got), ns)
	}
	deleteAddon(t, app)
	eventually(t, 60*time.Second, "db to go once app is gone", func() bool {
		return admin.Get(context.Background(), client.ObjectKeyFromObject(db), &capstanv1.Addon{}) != nil
	})
	if live(t, "v1", "ConfigMap", ns, "db-config") != nil {
		t.Error("db's uninstall left its ConfigMap")
	}
}

// TestDependsOnAHeldDependency: a dependency that a gate holds once its
// latest change is applied and Healthy (here suspended after its install)
// lets its dependents go; one whose latest change the gate holds (its
// values changed while suspended) holds them, saying so.
func TestDependsOnAHeldDependency(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	db := create(t, newAddon(ns, "db", url))
	waitPhase(t, db, capstanv1.PhaseSynced)
	update(t, db, func(cur *capstanv1.Addon) { cur.Spec.Suspend = true })
	waitFor(t, db, 60*time.Second, "db suspended, its render applied and Healthy", func(cur *capstanv1.Addon) bool {
		h := condition(cur, capstanv1.ConditionHealthy)
		return cur.Status.Phase == capstanv1.PhaseSuspended && cur.Status.ObservedGeneration == cur.Generation &&
			cur.Status.AppliedGeneration == cur.Generation && h != nil && h.Status == metav1.ConditionTrue && h.ObservedGeneration == cur.Generation
	})
	app := create(t, newAddon(ns, "app", url, dependsOn("db")))
	waitPhase(t, app, capstanv1.PhaseSynced)

	update(t, db, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("greeting: changed") })
	waitFor(t, db, 60*time.Second, "db suspended with a change not applied", func(cur *capstanv1.Addon) bool {
		return readyReason(cur) == "Suspended"
	})
	late := create(t, newAddon(ns, "late", url, dependsOn("db")))
	got := waitFor(t, late, 90*time.Second, "late to wait for db", func(cur *capstanv1.Addon) bool {
		return readyReason(cur) == "DependencyNotReady"
	})
	if msg := readyMessage(got); !strings.Contains(msg, "with its latest change not applied yet") {
		t.Errorf("message %q; want it to say db's latest change is not applied yet", msg)
	}
	if live(t, "v1", "ConfigMap", ns, "late-config") != nil {
		t.Error("late applied its objects while its dependency's latest change was held")
	}
}

// TestDependsOnAPausedDependency: a dependency paused after its install
// keeps running as it was applied, and a new dependent installs; the
// pause freezes the one add-on, not every add-on below it.
func TestDependsOnAPausedDependency(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	db := create(t, newAddon(ns, "db", url))
	waitPhase(t, db, capstanv1.PhaseSynced)
	update(t, db, func(cur *capstanv1.Addon) {
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[capstanv1.PausedAnnotation] = "true"
	})
	waitPhase(t, db, capstanv1.PhasePaused)
	app := create(t, newAddon(ns, "app", url, dependsOn("db")))
	waitPhase(t, app, capstanv1.PhaseSynced)
}

// TestDependsOnAHeldValuesChange: a suspended dependency whose values come
// from a ConfigMap renders anew when the ConfigMap is edited, with no new
// generation. That render is held by its suspension, so its latest change
// is not applied and a new dependent waits, applying nothing, until the
// dependency resumes and applies it.
func TestDependsOnAHeldValuesChange(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	// NOTE: named and labelled as a restricted add-on's own values object.
	in := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-values-greeting", Labels: map[string]string{capstanv1.AddonLabel: "db"}},
		Data: map[string]string{"greeting": "first"}}
	if err := admin.Create(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	db := create(t, newAddon(ns, "db", url, withSpec(func(s *capstanv1.AddonSpec) {
		s.ValuesFrom = []capstanv1.ValuesReference{{Kind: "ConfigMap", Name: in.Name, ValuesKey: "greeting", TargetPath: "greeting"}}
	})))
	waitPhase(t, db, capstanv1.PhaseSynced)
	update(t, db, func(cur *capstanv1.Addon) { cur.Spec.Suspend = true })
	held := waitFor(t, db, 60*time.Second, "db suspended, its render applied and Healthy", func(cur *capstanv1.Addon) bool {
		h := condition(cur, capstanv1.ConditionHealthy)
		return cur.Status.Phase == capstanv1.PhaseSuspended && cur.Status.ObservedGeneration == cur.Generation &&
			cur.Status.AppliedGeneration == cur.Generation && h != nil && h.Status == metav1.ConditionTrue && h.ObservedGeneration == cur.Generation
	})

	eventually(t, 10*time.Second, "editing the values ConfigMap", func() bool {
		cur := &corev1.ConfigMap{}
		if err := admin.Get(context.Background(), client.ObjectKeyFromObject(in), cur); err != nil {
			return false
		}
		cur.Data["greeting"] = "second"
		return admin.Update(context.Background(), cur) == nil
	})
	waitFor(t, db, 60*time.Second, "db's plan to hold the edited values", func(cur *capstanv1.Addon) bool {
		if cur.Generation != held.Generation || cur.Status.Plan == nil {
			return false
		}
		for _, o := range cur.Status.Plan.Objects {
			if o.Kind == "ConfigMap" && o.Name == "db-config" && o.Action == capstanv1.ActionUpdate {
				return true
			}
		}
		return false
	})
	late := create(t, newAddon(ns, "late", url, dependsOn("db")))
	got := waitFor(t, late, 90*time.Second, "late to wait for db, or to go", func(cur *capstanv1.Addon) bool {
		return readyReason(cur) == "DependencyNotReady" || cur.Status.Phase == capstanv1.PhaseSynced
	})
	if readyReason(got) != "DependencyNotReady" || !strings.Contains(readyMessage(got), "with its latest change not applied yet") {
		t.Fatalf("late is %s (%s: %q); want it to wait for db, whose latest change is not applied yet", got.Status.Phase, readyReason(got), readyMessage(got))
	}
	if live(t, "v1", "ConfigMap", ns, "late-config") != nil {
		t.Error("late applied its objects while its dependency's latest change was held")
	}

	update(t, db, func(cur *capstanv1.Addon) { cur.Spec.Suspend = false })
	waitPhase(t, late, capstanv1.PhaseSynced)
	if cm := live(t, "v1", "ConfigMap", ns, "db-config"); cm == nil || cm.Object["data"].(map[string]any)["greeting"] != "second" {
		t.Errorf("db-config = %v; want the edited greeting applied before late went", cm)
	}
}

// TestDependsOnAHeldUnusedValue: a suspended chart dependency whose
// valuesFrom ConfigMap is edited where the chart reads nothing (a shared
// key it ignores) renders anew with no new generation, but that render
// changes none of its objects and runs no hook: its latest change is
// applied, so a new dependent goes and one already Synced stays Synced.
func TestDependsOnAHeldUnusedValue(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	// NOTE: named and labelled as a restricted add-on's own values object.
	in := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-values-shared", Labels: map[string]string{capstanv1.AddonLabel: "db"}},
		Data: map[string]string{"region": "first"}}
	if err := admin.Create(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	db := create(t, newAddon(ns, "db", url, withSpec(func(s *capstanv1.AddonSpec) {
		s.ValuesFrom = []capstanv1.ValuesReference{{Kind: "ConfigMap", Name: in.Name, ValuesKey: "region", TargetPath: "shared.region"}}
	})))
	waitPhase(t, db, capstanv1.PhaseSynced)
	early := create(t, newAddon(ns, "early", url, dependsOn("db")))
	waitPhase(t, early, capstanv1.PhaseSynced)
	update(t, db, func(cur *capstanv1.Addon) { cur.Spec.Suspend = true })
	held := waitFor(t, db, 60*time.Second, "db suspended, its render applied and Healthy", func(cur *capstanv1.Addon) bool {
		h := condition(cur, capstanv1.ConditionHealthy)
		return cur.Status.Phase == capstanv1.PhaseSuspended && cur.Status.ObservedGeneration == cur.Generation &&
			cur.Status.AppliedGeneration == cur.Generation && h != nil && h.Status == metav1.ConditionTrue && h.ObservedGeneration == cur.Generation
	})

	eventually(t, 10*time.Second, "editing the values ConfigMap", func() bool {
		cur := &corev1.ConfigMap{}
		if err := admin.Get(context.Background(), client.ObjectKeyFromObject(in), cur); err != nil {
			return false
		}
		cur.Data["region"] = "second"
		return admin.Update(context.Background(), cur) == nil
	})
	// NOTE: values are read from the API server, so a reconcile that takes
	// up a refresh requested after the edit renders the edited values.
	patchAnnotation(t, db, capstanv1.RefreshAnnotation, "after-edit")
	got := waitFor(t, db, 60*time.Second, "db's reconcile after the edit", func(cur *capstanv1.Addon) bool {
		return cur.Status.LastHandledRefresh == "after-edit"
	})
	if got.Generation != held.Generation || got.Status.AppliedHash != held.Status.AppliedHash {
		t.Fatalf("db's generation %d, applied hash %q; want %d and %q: the edit made a new spec, or was applied", got.Generation, got.Status.AppliedHash, held.Generation, held.Status.AppliedHash)
	}
	if got.Status.AppliedGeneration != got.Generation {
		t.Errorf("db's appliedGeneration = %d after an edit of a value its chart does not read; want %d, its generation", got.Status.AppliedGeneration, got.Generation)
	}
	late := create(t, newAddon(ns, "late", url, dependsOn("db")))
	got = waitFor(t, late, 90*time.Second, "late to go, or to wait for db", func(cur *capstanv1.Addon) bool {
		return readyReason(cur) == "DependencyNotReady" || cur.Status.Phase == capstanv1.PhaseSynced
	})
	if got.Status.Phase != capstanv1.PhaseSynced {
		t.Errorf("late is %s (%s: %q); want it Synced: the edit changes none of db's objects", got.Status.Phase, readyReason(got), readyMessage(got))
	}
	// A reconcile of early after the edit reads db again.
	patchAnnotation(t, early, capstanv1.RefreshAnnotation, "after-edit")
	got = waitFor(t, early, 60*time.Second, "early's reconcile after the edit", func(cur *capstanv1.Addon) bool {
		return cur.Status.LastHandledRefresh == "after-edit"
	})
	if got.Status.Phase != capstanv1.PhaseSynced {
		t.Errorf("early is %s (%s: %q); want it still Synced", got.Status.Phase, readyReason(got), readyMessage(got))
	}
}

// TestDependsOnAHeldFolder: a suspended git-folder dependency whose
// repository gets a commit outside its folder still lets its dependents
// go: the commit changes its render hash, but not one of its objects, so
// its latest change is applied. A commit that edits one of its objects
// holds a new dependent until it resumes and applies it.
func TestDependsOnAHeldFolder(t *testing.T) {
	ns := newNamespace(t)
	suffix := ns[len(ns)-5:]
	settings := func(v string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata: {greeting: " + v + "}\n"
	}
	repo := newFolderRepo(t)
	repo.commit(map[string]string{"app/settings.yaml": settings("first"), "README.md": "one\n"})
	db := create(t, &capstanv1.Addon{
		ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: "folder-db-" + suffix},
		Spec: capstanv1.AddonSpec{
			Git:             &capstanv1.GitSource{URL: repo.url(), Path: "app"},
			TargetNamespace: ns, Prune: true, DeletionPolicy: capstanv1.DeletionDelete,
		},
	})
	waitPhase(t, db, capstanv1.PhaseSynced)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	dependent := func(name string) *capstanv1.Addon {
		return create(t, newAddon(controllerNS, name+"-"+suffix, url, withTarget(ns), dependsOn(db.Name)))
	}
	early := dependent("early")
	waitPhase(t, early, capstanv1.PhaseSynced)
	update(t, db, func(cur *capstanv1.Addon) { cur.Spec.Suspend = true })
	waitFor(t, db, 60*time.Second, "db suspended, its render applied and Healthy", func(cur *capstanv1.Addon) bool {
		h := condition(cur, capstanv1.ConditionHealthy)
		return cur.Status.Phase == capstanv1.PhaseSuspended && cur.Status.ObservedGeneration == cur.Generation &&
			cur.Status.AppliedGeneration == cur.Generation && h != nil && h.Status == metav1.ConditionTrue && h.ObservedGeneration == cur.Generation
	})
	planned := func(commit string) *capstanv1.Addon {
		t.Helper()
		patchAnnotation(t, db, capstanv1.RefreshAnnotation, commit)
		return waitFor(t, db, 60*time.Second, "db's plan of commit "+commit, func(cur *capstanv1.Addon) bool {
			return cur.Status.Plan != nil && cur.Status.Plan.Source.Commit == commit && cur.Status.LastHandledRefresh == commit
		})
	}

	elsewhere := repo.commit(map[string]string{"README.md": "two\n"})
	got := planned(elsewhere)
	if got.Status.AppliedHash == "" || got.Status.AppliedGeneration != got.Generation {
		t.Errorf("db's appliedGeneration = %d after a commit outside its folder; want %d, its generation", got.Status.AppliedGeneration, got.Generation)
	}
	late := dependent("late")
	got = waitFor(t, late, 90*time.Second, "late to go, or to wait for db", func(cur *capstanv1.Addon) bool {
		return readyReason(cur) == "DependencyNotReady" || cur.Status.Phase == capstanv1.PhaseSynced
	})
	if got.Status.Phase != capstanv1.PhaseSynced {
		t.Fatalf("late is %s (%s: %q); want it Synced: a commit outside db's folder changes none of its objects", got.Status.Phase, readyReason(got), readyMessage(got))
	}
	if cur := getAddon(t, early); cur.Status.Phase != capstanv1.PhaseSynced {
		t.Errorf("early is %s (%s: %q); want it still Synced", cur.Status.Phase, readyReason(cur), readyMessage(cur))
	}

	edited := repo.commit(map[string]string{"app/settings.yaml": settings("second")})
	got = planned(edited)
	if got.Status.AppliedGeneration == got.Generation {
		t.Errorf("db's appliedGeneration = %d after a commit that edits its objects; want it cleared", got.Status.AppliedGeneration)
	}
	later := dependent("later")
	got = waitFor(t, later, 90*time.Second, "later to wait for db, or to go", func(cur *capstanv1.Addon) bool {
		return readyReason(cur) == "DependencyNotReady" || cur.Status.Phase == capstanv1.PhaseSynced
	})
	if readyReason(got) != "DependencyNotReady" || !strings.Contains(readyMessage(got), "with its latest change not applied yet") {
		t.Fatalf("later is %s (%s: %q); want it to wait for db, whose latest change is not applied yet", got.Status.Phase, readyReason(got), readyMessage(got))
	}
	update(t, db, func(cur *capstanv1.Addon) { cur.Spec.Suspend = false })
	waitPhase(t, later, capstanv1.PhaseSynced)
	if cm := live(t, "v1", "ConfigMap", ns, "settings"); cm == nil || cm.Object["data"].(map[string]any)["greeting"] != "second" {
		t.Errorf("settings = %v; want the edited greeting applied before later went", cm)
	}
}

// TestDependsOnBadInput checks a missing dependency and a cycle: each is
// Blocked with a condition that says what to fix, and nothing is applied.
func TestDependsOnBadInput(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	lonely := create(t, newAddon(ns, "lonely", url, dependsOn("ghost")))
	got := waitFor(t, lonely, 90*time.Second, "a missing dependency", func(cur *capstanv1.Addon) bool {
		return readyReason(cur) == "DependencyNotFound"
	})
	if got.Status.Phase != capstanv1.PhaseBlocked || !strings.Contains(readyMessage(got), ns+"/ghost") {
		t.Errorf("phase %s, message %q", got.Status.Phase, readyMessage(got))
	}
	ping := create(t, newAddon(ns, "ping", url, dependsOn("pong")))
	create(t, newAddon(ns, "pong", url, dependsOn("ping")))
	got = waitFor(t, ping, 90*time.Second, "a cycle", func(cur *capstanv1.Addon) bool {
		return readyReason(cur) == "DependencyCycle"
	})
	if msg := readyMessage(got); !strings.Contains(msg, ns+"/ping → "+ns+"/pong → "+ns+"/ping") {
		t.Errorf("the cycle's message %q does not show the cycle", msg)
	}
	for _, name := range []string{"lonely-config", "ping-config", "pong-config"} {
		if live(t, "v1", "ConfigMap", ns, name) != nil {
			t.Errorf("%s was applied", name)
		}
	}
}

func hasNotice(p *capstanv1.Plan, path string) bool {
	for _, n := range p.Notices {
		if n.Path == path {
			return true
		}
	}
	return false
}

// TestDependsOnTenantNamespace: a tenant's Addon that names
// add-ons of the platform's namespace, one that runs suspended and one that
// does not exist, is Blocked by the guardrail dependency-namespace. Its
// status says nothing of either (no phase, no DependencyNotFound, no plan
// notice), and the platform add-on's removal with uninstall does not wait
// for it.
func TestDependsOnTenantNamespace(t *testing.T) {
	ns := newNamespace(t)
	target := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	platform := create(t, newAddon(controllerNS, "platform-"+ns, url, withTarget(target),
		withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = capstanv1.DeletionDelete })))
	waitPhase(t, platform, capstanv1.PhaseSynced)
	update(t, platform, func(cur *capstanv1.Addon) { cur.Spec.Suspend = true })
	waitPhase(t, platform, capstanv1.PhaseSuspended)

	on := func(name string) addonOpt {
		return withSpec(func(s *capstanv1.AddonSpec) {
			s.DependsOn = append(s.DependsOn, capstanv1.DependencyReference{Name: name, Namespace: controllerNS})
		})
	}
	nosy := create(t, newAddon(ns, "nosy", url, on(platform.Name)))
	prober := create(t, newAddon(ns, "prober", url, on("ghost-"+ns)))
	for _, a := range []*capstanv1.Addon{nosy, prober} {
		got := waitFor(t, a, 60*time.Second, a.Name+" to be Blocked by the guardrail", func(cur *capstanv1.Addon) bool {
			return readyReason(cur) != ""
		})
		msg := readyMessage(got)
		if got.Status.Phase != capstanv1.PhaseBlocked || readyReason(got) != "GuardrailViolations" || !strings.Contains(msg, "dependency-namespace") {
			t.Errorf("%s: phase %s, reason %s, message %q; want Blocked by dependency-namespace", a.Name, got.Status.Phase, readyReason(got), msg)
		}
		if p := got.Status.Plan; p == nil || hasNotice(p, "spec.dependsOn") {
			t.Errorf("%s: the plan reports on the platform's add-on: %+v", a.Name, p)
		}
		for _, leak := range []string{"Suspended", "not exist", controllerNS + "/"} {
			if strings.Contains(msg, leak) {
				t.Errorf("%s: the message %q tells the tenant of another namespace's add-on (%q)", a.Name, msg, leak)
			}
		}
		if live(t, "v1", "ConfigMap", ns, a.Name+"-config") != nil {
			t.Errorf("%s applied its objects", a.Name)
		}
	}

	// The platform add-on's uninstall goes while the tenant's Addon still
	// names it.
	if err := admin.Delete(context.Background(), platform); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the platform add-on to uninstall", func() bool {
		cur := &capstanv1.Addon{}
		if err := admin.Get(context.Background(), client.ObjectKeyFromObject(platform), cur); err != nil {
			return true
		}
		if readyReason(cur) == "WaitingForDependents" {
			t.Fatalf("the platform add-on's uninstall waits for a tenant: %s", readyMessage(cur))
		}
		return false
	})
	if live(t, "v1", "ConfigMap", target, platform.Name+"-config") != nil {
		t.Error("the platform add-on's uninstall left its ConfigMap")
	}
	if getAddon(t, nosy).DeletionTimestamp != nil {
		t.Error("the tenant's Addon was removed with the platform add-on")
	}
}

// TestDependsOnRemovalCycle: a removal with uninstall is not held by the
// Addon itself, when its spec.dependsOn names it with its namespace, nor
// by a cycle of add-ons removed together, which would otherwise each wait
// for the others for ever. Each goes, and its objects with it.
func TestDependsOnRemovalCycle(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	uninstall := withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = capstanv1.DeletionDelete })
	on := func(name string) addonOpt {
		return withSpec(func(s *capstanv1.AddonSpec) {
			s.DependsOn = append(s.DependsOn, capstanv1.DependencyReference{Name: name, Namespace: ns})
		})
	}
	gone := func(a *capstanv1.Addon) {
		t.Helper()
		eventually(t, 60*time.Second, a.Name+" to go", func() bool {
			cur := &capstanv1.Addon{}
			if err := admin.Get(context.Background(), client.ObjectKeyFromObject(a), cur); err != nil {
				return true
			}
			if c := apimeta.FindStatusCondition(cur.Status.Conditions, capstanv1.ConditionReady); c != nil && c.Reason == "WaitingForDependents" && strings.Contains(c.Message, ns+"/"+a.Name) {
				t.Fatalf("%s waits for itself: %s", a.Name, c.Message)
			}
			return false
		})
	}

	// Itself, named with its namespace: Blocked as a cycle, and removed.
	self := create(t, newAddon(ns, "self", url, on("self"), uninstall))
	waitFor(t, self, 90*time.Second, "the one-add-on cycle", func(cur *capstanv1.Addon) bool {
		return readyReason(cur) == "DependencyCycle"
	})
	if err := admin.Delete(context.Background(), self); err != nil {
		t.Fatal(err)
	}
	gone(self)

	// ping and pong, installed, then made a cycle and removed together.
	ping := create(t, newAddon(ns, "ping", url, uninstall))
	pong := create(t, newAddon(ns, "pong", url, on("ping"), uninstall))
	waitPhase(t, ping, capstanv1.PhaseSynced)
	waitPhase(t, pong, capstanv1.PhaseSynced)
	update(t, ping, func(cur *capstanv1.Addon) { cur.Spec.DependsOn = []capstanv1.DependencyReference{{Name: "pong"}} })
	waitFor(t, ping, 90*time.Second, "the cycle", func(cur *capstanv1.Addon) bool {
		return readyReason(cur) == "DependencyCycle"
	})
	for _, a := range []*capstanv1.Addon{pong, ping} {
		if err := admin.Delete(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range []*capstanv1.Addon{ping, pong} {
		eventually(t, 60*time.Second, a.Name+" to go", func() bool {
			return admin.Get(context.Background(), client.ObjectKeyFromObject(a), &capstanv1.Addon{}) != nil
		})
		if live(t, "v1", "ConfigMap", ns, a.Name+"-config") != nil {
			t.Errorf("%s's uninstall left its ConfigMap", a.Name)
		}
	}
}

// shardCache reads as a shard's label-filtered cache does: an Addon its
// selector does not match is not found.
type shardCache struct {
	client.Client
	selector labels.Selector
}

func (c shardCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if a, ok := obj.(*capstanv1.Addon); ok && !c.selector.Matches(labels.Set(a.Labels)) {
		return apierrors.NewNotFound(capstanv1.GroupVersion.WithResource("addons").GroupResource(), key.Name)
	}
	return nil
}

// TestDependsOnAnotherShard: a controller shard's cache does not hold an
// Addon of another shard, so a dependency on one is read from the API
// server and reported as another shard's, saying what to do, not as one
// that does not exist; one that the API server does not know either is
// still DependencyNotFound.
func TestDependsOnAnotherShard(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	create(t, newAddon(ns, "db", url))
	shardA := labels.SelectorFromSet(labels.Set{"capstan.dev/shard": "a"})
	shard := &controller.AddonReconciler{Client: shardCache{Client: admin, selector: shardA}, APIReader: admin,
		Config: controller.Config{Namespace: controllerNS, Selector: shardA}}
	for _, tc := range []struct {
		dependency, reason, says string
	}{
		{"db", "DependencyInAnotherShard", "belong to another controller shard (this controller's --watch-label-selector capstan.dev/shard=a does not select them): " + ns + "/db"},
		{"ghost", "DependencyNotFound", "do not exist: " + ns + "/ghost"},
	} {
		app := newAddon(ns, "app", url, dependsOn(tc.dependency))
		app.Labels = map[string]string{"capstan.dev/shard": "a"}
		reason, message, blocked, err := shard.DependencyHold(context.Background(), app)
		if err != nil || reason != tc.reason || !blocked || !strings.Contains(message, tc.says) {
			t.Errorf("depending on %s: %s %q, blocked %v, %v; want %s, saying %q", tc.dependency, reason, message, blocked, err, tc.reason, tc.says)
		}
	}
}

// TestRemovalWaitsForAStuckDependent removes a database add-on and the app
// that depends on it, both with uninstall, and the app's pre-delete backup
// fails: the app's removal is Stalled, waiting for a person, and so is the
// database's, which waits for the app, with a message that names it as
// stuck; `capstan addon remove` ends its wait there rather than wait for
// ever. Before, the database's removal waited for the app as for one that
// leaves on its own, not Stalled. Once the backup is fixed, both go.
func TestRemovalWaitsForAStuckDependent(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	uninstall := withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = capstanv1.DeletionDelete })
	base := create(t, newAddon(controllerNS, "base-"+ns, url, withTarget(ns), uninstall))
	waitPhase(t, base, capstanv1.PhaseSynced)
	app := dbapp(t, ns, `{hooks: {backup: {fail: true}}}`, uninstall, dependsOn(base.Name))
	synced(t, app)

	for _, a := range []*capstanv1.Addon{app, base} {
		if err := admin.Delete(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
	failedWith(t, app, "the pre-delete hook failed")
	if !isStalled(getAddon(t, app)) {
		t.Fatalf("the app's removal is not Stalled: %s", readyMessage(getAddon(t, app)))
	}
	got := waitFor(t, base, 90*time.Second, "the database's removal to be Stalled on the stuck app", func(cur *capstanv1.Addon) bool {
		return readyReason(cur) == "WaitingForDependents" && isStalled(cur)
	})
	if msg := readyMessage(got); !strings.Contains(msg, "the removal of "+controllerNS+"/"+app.Name+" is stuck") {
		t.Errorf("message %q; want it to name the app's removal as stuck", msg)
	}
	if live(t, "v1", "ConfigMap", ns, base.Name+"-config") == nil {
		t.Fatal("the database's objects were deleted while the app depends on it")
	}

	update(t, app, func(cur *capstanv1.Addon) { cur.Spec.Values = nil })
	for _, a := range []*capstanv1.Addon{app, base} {
		eventually(t, 120*time.Second, a.Name+" to go once the backup succeeds", func() bool {
			return apierrors.IsNotFound(admin.Get(context.Background(), client.ObjectKeyFromObject(a), &capstanv1.Addon{}))
		})
	}
}
