package controller_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

func cmChart(version string, names ...string) chart {
	files := map[string]string{}
	for _, n := range names {
		files["templates/"+n+".yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + n + "\n"
	}
	return chart{name: "cms", version: version, files: files}
}

// TestCrashBetweenApplyStepsOrphansNothing stops a reconcile after the new
// objects are applied and before the prune, as a crash would, then lets the
// controller go on: nothing is orphaned and the inventory ends up exact.
func TestCrashBetweenApplyStepsOrphansNothing(t *testing.T) {
	ns := newNamespace(t)
	url1, _ := charts.publish(t, cmChart("1.0.0", "alpha", "beta"))
	a := create(t, newAddon(controllerNS, "crash-"+ns, url1, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) { s.Prune = true })))
	waitPhase(t, a, capstanv1.PhaseSynced)

	crashes := stopOnceAt(t, a.Namespace+"/"+a.Name, "prune")

	url2, _ := charts.publish(t, cmChart("2.0.0", "beta", "gamma"))
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url2 })
	waitFor(t, a, 60*time.Second, "the crash", func(cur *capstanv1.Addon) bool { return crashes.Load() > 0 })
	if crashes.Load() == 0 {
		t.Fatal("the reconcile never reached the prune step")
	}
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	if live(t, "v1", "ConfigMap", ns, "alpha") != nil {
		t.Fatal("the object dropped before the crash was not pruned after it")
	}
	var names []string
	for _, r := range got.Status.Inventory {
		names = append(names, r.Name)
	}
	sort.Strings(names)
	if len(names) != 2 || names[0] != "beta" || names[1] != "gamma" {
		t.Fatalf("inventory = %v, want [beta gamma]", names)
	}
	// No orphan: every object labelled for the add-on is in the inventory.
	var cms corev1.ConfigMapList
	if err := admin.List(context.Background(), &cms, client.InNamespace(ns), client.MatchingLabels{capstanv1.AddonLabel: a.Name}); err != nil {
		t.Fatal(err)
	}
	if len(cms.Items) != 2 {
		t.Fatalf("%d labelled ConfigMaps, want 2", len(cms.Items))
	}
}

// TestInventoryWrittenBeforeApply stops a reconcile before anything is
// applied and finds the new objects already in the inventory.
func TestInventoryWrittenBeforeApply(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, cmChart("3.0.0", "delta"))
	name := "early-" + ns
	stepHooks.Store(controllerNS+"/"+name, func(step string) error {
		if step == "apply" {
			return errors.New("simulated crash before apply")
		}
		return nil
	})
	a := create(t, newAddon(controllerNS, name, url, withTarget(ns)))
	got := waitFor(t, a, 60*time.Second, "the inventory", func(cur *capstanv1.Addon) bool { return len(cur.Status.Inventory) == 1 })
	if got.Status.Inventory[0].Name != "delta" || live(t, "v1", "ConfigMap", ns, "delta") != nil {
		t.Fatalf("inventory %v; the object must not exist yet", got.Status.Inventory)
	}
	stepHooks.Delete(controllerNS + "/" + name)
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Title = "go on" })
	waitPhase(t, a, capstanv1.PhaseSynced)
	if live(t, "v1", "ConfigMap", ns, "delta") == nil {
		t.Fatal("the object was not applied after the restart")
	}
}

// TestStopAfterPreHooksRunsThemOnce stops an install once its pre-install
// hooks have run, before its main apply, as a controller killed there
// would: the next sync applies the objects without running the pre-install
// hook again.
func TestStopAfterPreHooksRunsThemOnce(t *testing.T) {
	ns := newNamespace(t)
	rec := recordEvents(t, ns)
	stops := stopOnceAt(t, controllerNS+"/hooks-"+ns, "apply")
	a := dbapp(t, ns, "")
	got := synced(t, a)
	if stops.Load() == 0 {
		t.Fatal("the sync was never stopped")
	}
	if n := rec.count("Job/db-initdb", watch.Added); n != 1 {
		t.Errorf("the pre-install Job was created %d times; want once, before the stop", n)
	}
	if got.Status.PreHooksDone != nil {
		t.Errorf("status.preHooksDone = %+v after the apply was recorded", got.Status.PreHooksDone)
	}
}

// TestStopBeforePreHooksRecorded stops an install once its
// pre-install hooks have succeeded, before the sync records that
// (status.preHooksDone), as a controller killed there would: status.hook
// still names the last hook, so the next sync goes on from that run, finds
// the initdb Job of this render succeeded, and does not create it again.
// Before, it ran every pre-install hook anew: a migration killed mid-way
// by its own before-hook-creation policy and started again.
func TestStopBeforePreHooksRecorded(t *testing.T) {
	ns := newNamespace(t)
	rec := recordEvents(t, ns)
	stops := stopOnceAt(t, controllerNS+"/hooks-"+ns, "pre-install succeeded")
	a := dbapp(t, ns, "")
	got := synced(t, a)
	if stops.Load() == 0 {
		t.Fatal("the sync was never stopped")
	}
	if n := rec.count("Job/db-initdb", watch.Added); n != 1 {
		t.Errorf("the pre-install Job was created %d times; want once: it had succeeded before the stop", n)
	}
	if got.Status.Hook != nil || got.Status.PreHooksDone != nil {
		t.Errorf("status: hook %+v, preHooksDone %+v; want both cleared once the apply was recorded", got.Status.Hook, got.Status.PreHooksDone)
	}
}

// TestStopBeforePreHooksDoneWritten stops an install once its pre-install
// hooks have succeeded and it is about to write status.preHooksDone, and
// then its uninstall once its pre-delete hooks have succeeded, as a
// controller killed there would. Each time status.hook must still name the
// last hook: before, the sync wrote it cleared first, so the stop left
// neither, and the next sync ran the initdb and backup Jobs again.
func TestStopBeforePreHooksDoneWritten(t *testing.T) {
	ns := newNamespace(t)
	rec := recordEvents(t, ns)
	key := controllerNS + "/hooks-" + ns
	stopped := map[string]*atomic.Bool{"record pre-install": {}, "record pre-delete": {}}
	stepHooks.Store(key, func(step string) error {
		if s := stopped[step]; s != nil && s.CompareAndSwap(false, true) {
			return errors.New("simulated stop at " + step)
		}
		return nil
	})
	t.Cleanup(func() { stepHooks.Delete(key) })
	a := dbapp(t, ns, "", withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = capstanv1.DeletionDelete }))
	got := synced(t, a)
	if !stopped["record pre-install"].Load() {
		t.Fatal("the install was never stopped")
	}
	if n := rec.count("Job/db-initdb", watch.Added); n != 1 {
		t.Errorf("the pre-install Job was created %d times; want once: it had succeeded before the stop", n)
	}
	if got.Status.Hook != nil || got.Status.PreHooksDone != nil {
		t.Errorf("status: hook %+v, preHooksDone %+v; want both cleared once the apply was recorded", got.Status.Hook, got.Status.PreHooksDone)
	}
	deleteAddon(t, a)
	if !stopped["record pre-delete"].Load() {
		t.Fatal("the uninstall was never stopped")
	}
	if n := rec.count("Job/db-backup", watch.Added); n != 1 {
		t.Errorf("the pre-delete Job was created %d times; want once: it had succeeded before the stop", n)
	}
}

// TestStopBeforeHookCleanUp gives every hook of the dbapp chart
// hook-succeeded, and stops the controller at each event of an install,
// an upgrade and an uninstall once the event's end is recorded and before
// its hook-succeeded Jobs are deleted, as a controller killed there would.
// Each Job is created once: the record names the run whose objects are
// left, and the next look deletes them. Before, the Jobs were deleted
// first, and a stop before the record left nothing that said the event
// had run: the next sync ran every hook of it again.
func TestStopBeforeHookCleanUp(t *testing.T) {
	ns := newNamespace(t)
	rec := recordEvents(t, ns)
	key := controllerNS + "/hooks-" + ns
	jobs := map[string]string{"pre-install": "db-initdb", "post-install": "db-seed", "pre-upgrade": "db-migrate",
		"post-upgrade": "db-notify", "pre-delete": "db-backup", "post-delete": "db-farewell"}
	type stop struct {
		stopped, left atomic.Bool
		record        atomic.Value // the status.preHooksDone stored at the stop
	}
	stops := map[string]*stop{}
	for event := range jobs {
		stops[event+" clean-up"] = &stop{}
	}
	stepHooks.Store(key, func(addon *capstanv1.Addon, step string) error {
		st := stops[step]
		if st == nil || !st.stopped.CompareAndSwap(false, true) {
			return nil
		}
		ctx := context.Background()
		event := strings.TrimSuffix(step, " clean-up")
		var j batchv1.Job
		st.left.Store(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs[event]}, &j) == nil)
		var stored capstanv1.Addon
		if err := admin.Get(ctx, client.ObjectKeyFromObject(addon), &stored); err == nil && stored.Status.PreHooksDone != nil {
			st.record.Store(*stored.Status.PreHooksDone)
		}
		return errors.New("simulated stop at " + step)
	})
	t.Cleanup(func() { stepHooks.Delete(key) })
	values := func(version string) string {
		return `{appVersion: "` + version + `", hooks: {initdb: {deletePolicy: "before-hook-creation,hook-succeeded"},
migrate: {deletePolicy: "before-hook-creation,hook-succeeded"}, seed: {deletePolicy: hook-succeeded}, backup: {deletePolicy: hook-succeeded}},
extraHooks: [{name: notify, kind: Job, events: post-upgrade, deletePolicy: hook-succeeded},
{name: farewell, kind: Job, events: post-delete, deletePolicy: hook-succeeded}]}`
	}
	a := dbapp(t, ns, values("1.0"), withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = capstanv1.DeletionDelete }))
	got := synced(t, a)
	if got.Status.Hook != nil || got.Status.PreHooksDone != nil || got.Status.PendingHook != nil {
		t.Errorf("install: status: hook %+v, preHooksDone %+v, pendingHook %+v; want all cleared", got.Status.Hook, got.Status.PreHooksDone, got.Status.PendingHook)
	}
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(values("2.0")) })
	got = synced(t, a)
	if got.Status.Hook != nil || got.Status.PreHooksDone != nil || got.Status.PendingHook != nil {
		t.Errorf("upgrade: status: hook %+v, preHooksDone %+v, pendingHook %+v; want all cleared", got.Status.Hook, got.Status.PreHooksDone, got.Status.PendingHook)
	}
	deleteAddon(t, a)
	for event, name := range jobs {
		st := stops[event+" clean-up"]
		if !st.stopped.Load() {
			t.Errorf("%s: never stopped between its record and its clean-up", event)
			continue
		}
		if !st.left.Load() {
			t.Errorf("%s: the Job %s was gone at the stop; want it left for the next look", event, name)
		}
		if d, _ := st.record.Load().(capstanv1.PendingHook); d.Event != event || !strings.HasPrefix(d.Run, event+"/") {
			t.Errorf("%s: status.preHooksDone stored at the stop = %+v; want the event with its run", event, d)
		}
		if n := rec.count("Job/"+name, watch.Added); n != 1 {
			t.Errorf("%s: the Job %s was created %d times; want once: it had succeeded before the stop", event, name, n)
		}
		if n := rec.count("Job/"+name, watch.Deleted); n != 1 {
			t.Errorf("%s: the Job %s was deleted %d times; want once, by the look after the stop", event, name, n)
		}
	}
}

// TestHookCleanUpAfterTheHookIsGone stops an upgrade once its post-upgrade
// end is recorded and before its hook-succeeded notify Job is deleted, and
// changes the values at the stop so that no notify hook renders any more.
// The next look deletes the Job all the same: the record names the
// objects to delete, not the hooks of a render that may have changed.
// Before, the clean-up read the hooks of the new render, found none, and
// dropped the run, and the Job was left for ever.
func TestHookCleanUpAfterTheHookIsGone(t *testing.T) {
	ns := newNamespace(t)
	key := controllerNS + "/hooks-" + ns
	values := func(version, extra string) string {
		return `{appVersion: "` + version + `", extraHooks: [` + extra + `]}`
	}
	notify := `{name: notify, kind: Job, events: post-upgrade, deletePolicy: hook-succeeded}`
	var stopped atomic.Bool
	var changed atomic.Value
	stepHooks.Store(key, func(addon *capstanv1.Addon, step string) error {
		if step != "post-upgrade clean-up" || !stopped.CompareAndSwap(false, true) {
			return nil
		}
		ctx := context.Background()
		var err error
		for range 20 {
			var cur capstanv1.Addon
			if err = admin.Get(ctx, client.ObjectKeyFromObject(addon), &cur); err != nil {
				continue
			}
			cur.Spec.Values = jsonValues(values("3.0", ""))
			if err = admin.Update(ctx, &cur); err == nil {
				break
			}
		}
		changed.Store(fmt.Sprint(err))
		return errors.New("simulated stop at " + step)
	})
	t.Cleanup(func() { stepHooks.Delete(key) })
	a := dbapp(t, ns, values("1.0", notify))
	synced(t, a)
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(values("2.0", notify)) })
	eventually(t, 90*time.Second, "the stop at the post-upgrade clean-up", func() bool { return changed.Load() != nil })
	if err := changed.Load().(string); err != "<nil>" {
		t.Fatalf("changing the values at the stop: %s", err)
	}
	got := synced(t, a)
	if d := got.Status.PreHooksDone; d != nil {
		t.Errorf("status.preHooksDone = %+v; want none once the clean-up is over", d)
	}
	var j batchv1.Job
	err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "db-notify"}, &j)
	if !apierrors.IsNotFound(err) {
		t.Errorf("the notify Job of the recorded run: %v (deleting %v); want it deleted though no hook renders it any more", err, j.DeletionTimestamp)
	}
}

// TestStopAfterMainApplyThenNewValues stops an install after its main
// apply, before the apply is recorded, as a controller killed there would,
// and changes the values before the next sync. The objects are live, so
// the next sync is an upgrade: the pre-install hook never runs again after
// its main apply, and the pre-upgrade migration runs once.
func TestStopAfterMainApplyThenNewValues(t *testing.T) {
	ns := newNamespace(t)
	rec := recordEvents(t, ns)
	key := controllerNS + "/hooks-" + ns
	var stopped atomic.Bool
	// NOTE: every sync of the first generation stops before the prune, so
	// the install is never recorded; the second generation goes through.
	stepHooks.Store(key, func(addon *capstanv1.Addon, step string) error {
		if step == "prune" && addon.Generation == 1 {
			stopped.Store(true)
			return errors.New("simulated stop after the main apply")
		}
		return nil
	})
	defer stepHooks.Delete(key)
	a := dbapp(t, ns, "")
	waitFor(t, a, 90*time.Second, "the stop after the main apply", func(*capstanv1.Addon) bool { return stopped.Load() })
	if live(t, "v1", "ConfigMap", ns, "db-config") == nil {
		t.Fatal("the main apply did not create the ConfigMap before the stop")
	}
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`{"appVersion": "2.0"}`) })
	upgradedOnce(t, rec, synced(t, a))
}

// upgradedOnce checks that an install stopped before its apply was
// recorded ended as an upgrade: the pre-install and pre-upgrade Jobs each
// created once, and the upgrade recorded.
func upgradedOnce(t *testing.T, rec *eventLog, got *capstanv1.Addon) {
	t.Helper()
	if n := rec.count("Job/db-initdb", watch.Added); n != 1 {
		t.Errorf("the pre-install Job was created %d times; want once, before the main apply", n)
	}
	if n := rec.count("Job/db-migrate", watch.Added); n != 1 {
		t.Errorf("the pre-upgrade Job was created %d times; want once", n)
	}
	if !got.Status.AppliedAsUpgrade || got.Status.PreHooksDone != nil {
		t.Errorf("status: appliedAsUpgrade %v, preHooksDone %+v; want an upgrade recorded", got.Status.AppliedAsUpgrade, got.Status.PreHooksDone)
	}
}

// TestStopAfterPreUpgradeOfABegunInstall stops an install after its main
// apply, before the apply is recorded; then, with new values, stops the
// upgrade that follows once its pre-upgrade hooks have run. The next sync
// finishes that upgrade: the pre-install hook never runs again after its
// main apply, though the pre-upgrade checkpoint replaced the pre-install
// one, and the pre-upgrade migration is not run twice.
func TestStopAfterPreUpgradeOfABegunInstall(t *testing.T) {
	ns := newNamespace(t)
	rec := recordEvents(t, ns)
	key := controllerNS + "/hooks-" + ns
	var installStopped, upgradeStopped atomic.Bool
	stepHooks.Store(key, func(addon *capstanv1.Addon, step string) error {
		switch {
		case step == "prune" && addon.Generation == 1:
			installStopped.Store(true)
			return errors.New("simulated stop after the main apply")
		case step == "apply" && addon.Generation == 2 && !upgradeStopped.Load():
			upgradeStopped.Store(true)
			return errors.New("simulated stop after the pre-upgrade hooks")
		}
		return nil
	})
	defer stepHooks.Delete(key)
	a := dbapp(t, ns, "")
	waitFor(t, a, 90*time.Second, "the stop after the main apply", func(*capstanv1.Addon) bool { return installStopped.Load() })
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`{"appVersion": "2.0"}`) })
	waitFor(t, a, 90*time.Second, "the stop after the pre-upgrade hooks", func(*capstanv1.Addon) bool { return upgradeStopped.Load() })
	upgradedOnce(t, rec, synced(t, a))
}

// stopOnceAt makes the first reconcile of the Addon key (namespace/name)
// that reaches step fail there, as a controller killed at that point would
// stop, and counts the stops; the step hook goes when the test ends.
func stopOnceAt(t *testing.T, key, step string) *atomic.Int32 {
	t.Helper()
	var stops atomic.Int32
	stepHooks.Store(key, func(at string) error {
		if at == step && stops.CompareAndSwap(0, 1) {
			return errors.New("simulated stop at " + step)
		}
		return nil
	})
	t.Cleanup(func() { stepHooks.Delete(key) })
	return &stops
}

// approvePlan waits for the plan of the Addon's current generation to wait
// for approval, and approves it as the page and the CLI do: its hash in
// spec.approvedPlan and spec.syncRequest raised. It returns the hash.
func approvePlan(t *testing.T, a *capstanv1.Addon) string {
	t.Helper()
	gen := getAddon(t, a).Generation
	planned := waitFor(t, a, 90*time.Second, "a plan waiting for approval", func(cur *capstanv1.Addon) bool {
		return cur.Generation >= gen && cur.Status.ObservedGeneration == cur.Generation && cur.Status.Plan != nil &&
			readyReason(cur) == "AwaitingApproval"
	})
	hash := planned.Status.Plan.Hash
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.ApprovedPlan = hash; cur.Spec.SyncRequest++ })
	return hash
}

// syncedWithoutAnotherApproval waits until the approved sync of the
// Addon's current generation is Synced, and fails as soon as it waits for
// an approval again.
func syncedWithoutAnotherApproval(t *testing.T, a *capstanv1.Addon) *capstanv1.Addon {
	t.Helper()
	gen := getAddon(t, a).Generation
	return waitFor(t, a, 90*time.Second, "the approved sync to finish", func(cur *capstanv1.Addon) bool {
		if cur.Generation == gen && cur.Status.ObservedGeneration == gen && cur.Status.Phase == capstanv1.PhaseOutOfSync {
			t.Fatalf("the approved sync waits for another approval after its stop: %s", describeStatus(cur))
		}
		return cur.Generation >= gen && cur.Status.ObservedGeneration == cur.Generation && cur.Status.Phase == capstanv1.PhaseSynced
	})
}

// TestApprovalSurvivesStop stops an approved sync of a
// manualSync add-on after its main apply, before its prune, as a
// controller killed there would. Its retry plans only the prune, a plan
// whose hash is not the one approved, and must finish the sync that
// began, not hold it as ApprovalStale: the software would otherwise stay
// half-upgraded until someone approved again a change Capstan itself made.
func TestApprovalSurvivesStop(t *testing.T) {
	ns := newNamespace(t)
	url1, _ := charts.publish(t, cmChart("4.0.0", "alpha", "beta", "delta"))
	a := create(t, newAddon(controllerNS, "appr-"+ns, url1, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Prune, s.ManualSync = true, true
	})))
	approvePlan(t, a)
	synced(t, a)

	stops := stopOnceAt(t, a.Namespace+"/"+a.Name, "prune")
	url2, _ := charts.publish(t, cmChart("5.0.0", "beta", "delta", "gamma"))
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url2 })
	approved := approvePlan(t, a)
	got := syncedWithoutAnotherApproval(t, a)
	if stops.Load() == 0 {
		t.Fatal("the approved sync was never stopped at its prune")
	}
	if live(t, "v1", "ConfigMap", ns, "gamma") == nil || live(t, "v1", "ConfigMap", ns, "alpha") != nil {
		t.Fatal("the approved sync did not both apply gamma and prune alpha")
	}
	if got.Status.LastApprovedPlan != approved || got.Status.SyncInProgress != nil {
		t.Errorf("status: lastApprovedPlan %q (want %s), syncInProgress %+v (want none once applied)", got.Status.LastApprovedPlan, approved, got.Status.SyncInProgress)
	}
}

// TestApprovalSurvivesStopAfterPreHooks stops an approved upgrade
// of a manualSync add-on once its pre-upgrade hooks have run, before its
// main apply: the retry plans no pre-upgrade hook, so its hash is not the
// one approved, and must still apply the upgrade, without running the
// migration again and without another approval.
func TestApprovalSurvivesStopAfterPreHooks(t *testing.T) {
	ns := newNamespace(t)
	rec := recordEvents(t, ns)
	a := dbapp(t, ns, "", withSpec(func(s *capstanv1.AddonSpec) { s.ManualSync = true }))
	approvePlan(t, a)
	synced(t, a)

	stops := stopOnceAt(t, a.Namespace+"/"+a.Name, "apply")
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`{appVersion: "2.0"}`) })
	approvePlan(t, a)
	got := syncedWithoutAnotherApproval(t, a)
	if stops.Load() == 0 {
		t.Fatal("the approved upgrade was never stopped before its apply")
	}
	if n := rec.count("Job/db-migrate", watch.Added); n != 1 {
		t.Errorf("the pre-upgrade Job was created %d times; want once, before the stop", n)
	}
	if got.Status.PreHooksDone != nil || got.Status.SyncInProgress != nil {
		t.Errorf("status: preHooksDone %+v, syncInProgress %+v; want both cleared once the apply was recorded", got.Status.PreHooksDone, got.Status.SyncInProgress)
	}
}

// TestApprovalStaleAfterStopAndChange stops an approved sync after
// its main apply and changes the spec before it goes on: the sync that
// follows is another one, and the approval of the first does not apply
// it; nothing more is applied (alpha is not pruned) until a person
// approves the new plan.
func TestApprovalStaleAfterStopAndChange(t *testing.T) {
	ns := newNamespace(t)
	url1, _ := charts.publish(t, cmChart("6.0.0", "alpha", "beta", "delta"))
	a := create(t, newAddon(controllerNS, "chg-"+ns, url1, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Prune, s.ManualSync = true, true
	})))
	approvePlan(t, a)
	synced(t, a)

	key := a.Namespace + "/" + a.Name
	var stopped atomic.Bool
	stepHooks.Store(key, func(addon *capstanv1.Addon, step string) error {
		if step != "prune" || !stopped.CompareAndSwap(false, true) {
			return nil
		}
		// The spec changes while the sync is stopped.
		update(t, addon, func(cur *capstanv1.Addon) { cur.Spec.Title = "changed" })
		return errors.New("simulated stop at " + step)
	})
	t.Cleanup(func() { stepHooks.Delete(key) })
	url2, _ := charts.publish(t, cmChart("7.0.0", "beta", "delta", "gamma"))
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url2 })
	approvePlan(t, a)
	got := waitFor(t, a, 90*time.Second, "the approval held stale", func(cur *capstanv1.Addon) bool {
		return stopped.Load() && cur.Status.ObservedGeneration == cur.Generation && readyReason(cur) == "ApprovalStale"
	})
	if live(t, "v1", "ConfigMap", ns, "alpha") == nil {
		t.Fatal("the prune ran for a spec changed since its approval")
	}
	if got.Status.SyncInProgress != nil {
		t.Errorf("status.syncInProgress = %+v; want it cleared once the spec changed", got.Status.SyncInProgress)
	}
}

// dataChart is a chart of ConfigMaps named names, each holding value
// under the key "v".
func dataChart(version, value string, names ...string) chart {
	files := map[string]string{}
	for _, n := range names {
		files["templates/"+n+".yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + n + "\ndata:\n  v: " + value + "\n"
	}
	return chart{name: "cms", version: version, files: files}
}

// TestApprovalDoesNotCoverDriftAfterStop stops an approved sync of a
// manualSync add-on after its main apply, and someone changes by hand an
// object the approved plan left as it was (an incident's mitigation). The
// retry's plan would revert that change, which no one approved: it waits
// for an approval, and neither the change is reverted nor the approved
// prune run.
func TestApprovalDoesNotCoverDriftAfterStop(t *testing.T) {
	ns := newNamespace(t)
	url1, _ := charts.publish(t, dataChart("8.0.0", "one", "alpha", "beta", "delta"))
	a := create(t, newAddon(controllerNS, "drift-"+ns, url1, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Prune, s.ManualSync = true, true
	})))
	approvePlan(t, a)
	synced(t, a)

	key := a.Namespace + "/" + a.Name
	var stopped atomic.Bool
	var editErr atomic.Value
	stepHooks.Store(key, func(step string) error {
		if step != "prune" || !stopped.CompareAndSwap(false, true) {
			return nil
		}
		// Someone edits delta, which the approved plan leaves alone.
		cm := &corev1.ConfigMap{}
		err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "delta"}, cm)
		if err == nil {
			cm.Data["v"] = "by-hand"
			err = admin.Update(context.Background(), cm)
		}
		if err != nil {
			editErr.Store(err.Error())
		}
		return errors.New("simulated stop at " + step)
	})
	t.Cleanup(func() { stepHooks.Delete(key) })
	url2, _ := charts.publish(t, dataChart("9.0.0", "one", "beta", "delta", "gamma"))
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url2 })
	approvePlan(t, a)
	got := waitFor(t, a, 90*time.Second, "the retry to wait for an approval", func(cur *capstanv1.Addon) bool {
		return stopped.Load() && cur.Status.ObservedGeneration == cur.Generation && readyReason(cur) == "ApprovalStale"
	})
	if e := editErr.Load(); e != nil {
		t.Fatalf("editing delta by hand: %v", e)
	}
	if v, _, _ := unstructured.NestedString(live(t, "v1", "ConfigMap", ns, "delta").Object, "data", "v"); v != "by-hand" {
		t.Errorf("delta's data.v = %q; the retry reverted a change no one approved", v)
	}
	if live(t, "v1", "ConfigMap", ns, "alpha") == nil {
		t.Error("the retry pruned alpha under a plan no one approved")
	}
	if got.Status.SyncInProgress != nil {
		t.Errorf("status.syncInProgress = %+v; want it cleared once the plan changed", got.Status.SyncInProgress)
	}
}

// TestSyncInProgressIsStoredBeforeTheApply: a controller killed during an
// approved sync writes no status of its own at the end; only the
// checkpoints are stored. The record of the sync must be among them before
// anything is applied, also for an upgrade whose inventory does not grow
// (no inventory checkpoint), so that the next controller goes on from it.
func TestSyncInProgressIsStoredBeforeTheApply(t *testing.T) {
	ns := newNamespace(t)
	url1, _ := charts.publish(t, dataChart("10.0.0", "one", "alpha"))
	a := create(t, newAddon(controllerNS, "ckpt-"+ns, url1, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.ManualSync = true
	})))
	approvePlan(t, a)
	synced(t, a)

	key := a.Namespace + "/" + a.Name
	var stored atomic.Pointer[capstanv1.SyncInProgress]
	var looked atomic.Bool
	stepHooks.Store(key, func(step string) error {
		if step != "apply" || !looked.CompareAndSwap(false, true) {
			return nil
		}
		// What a killed controller leaves: the Addon as stored now.
		cur := &capstanv1.Addon{}
		if err := admin.Get(context.Background(), client.ObjectKey{Namespace: a.Namespace, Name: a.Name}, cur); err == nil && cur.Status.SyncInProgress != nil {
			stored.Store(cur.Status.SyncInProgress.DeepCopy())
		}
		return errors.New("simulated stop at " + step)
	})
	t.Cleanup(func() { stepHooks.Delete(key) })
	url2, _ := charts.publish(t, dataChart("11.0.0", "two", "alpha"))
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url2 })
	approved := approvePlan(t, a)
	got := syncedWithoutAnotherApproval(t, a)
	if !looked.Load() {
		t.Fatal("the approved upgrade never reached its apply")
	}
	rec := stored.Load()
	if rec == nil {
		t.Fatal("status.syncInProgress was not stored before the apply: a controller killed there would leave the retry to another approval")
	}
	if rec.Plan != approved || len(rec.Changes) == 0 {
		t.Errorf("stored record %+v; want the approved plan %s and its changes", rec, approved)
	}
	if v, _, _ := unstructured.NestedString(live(t, "v1", "ConfigMap", ns, "alpha").Object, "data", "v"); v != "two" || got.Status.SyncInProgress != nil {
		t.Errorf("alpha's data.v = %q, syncInProgress %+v; want the upgrade applied and its record cleared", v, got.Status.SyncInProgress)
	}
}

// TestApprovalDoesNotCoverANewRenderAfterStop: an approved install of a
// manualSync chart that renders a custom resource only once the cluster
// serves its API (.Capabilities) keeps stopping after its main apply, and
// meanwhile another product installs that API. The retry's render, with
// the same inputs, holds the custom resource, which no one approved: it
// waits for an approval, and the custom resource is not created.
func TestApprovalDoesNotCoverANewRenderAfterStop(t *testing.T) {
	ns := newNamespace(t)
	group := ns + ".example.com"
	url, _ := charts.publish(t, chart{name: "widgets", version: "1.0.0", files: map[string]string{
		"templates/alpha.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: alpha\n",
		"templates/widget.yaml": "{{ if .Capabilities.APIVersions.Has \"" + group + "/v1\" }}\napiVersion: " + group + "/v1\nkind: Widget\nmetadata:\n  name: main\n{{ end }}\n",
	}})
	a := newAddon(controllerNS, "caps-"+ns[strings.LastIndexByte(ns, '-')+1:], url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) { s.Prune, s.ManualSync = true, true }))
	var stops atomic.Int32
	var release atomic.Bool
	var crdErr atomic.Value
	stepHooks.Store(a.Namespace+"/"+a.Name, func(step string) error {
		if step != "prune" || release.Load() {
			return nil
		}
		if stops.Add(1) == 1 {
			// Another product installs the API the chart looks for.
			crd := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets."+group+"\nspec:\n  group: "+group+
				"\n  names: {kind: Widget, plural: widgets}\n  scope: Namespaced\n  versions:\n    - name: v1\n      served: true\n      storage: true\n"+
				"      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}\n"), &crd.Object); err != nil {
				crdErr.Store(err.Error())
			} else if err := admin.Create(context.Background(), crd); err != nil {
				crdErr.Store(err.Error())
			}
		}
		return errors.New("simulated stop at " + step)
	})
	t.Cleanup(func() { stepHooks.Delete(a.Namespace + "/" + a.Name) })
	a = create(t, a)
	approvePlan(t, a)
	// NOTE: the controller reads the cluster's APIs again at most a minute
	// after it last did, so the sync keeps stopping until then.
	got := waitFor(t, a, 150*time.Second, "the retry to wait for an approval", func(cur *capstanv1.Addon) bool {
		return stops.Load() > 0 && cur.Status.ObservedGeneration == cur.Generation && readyReason(cur) == "ApprovalStale"
	})
	release.Store(true)
	if e := crdErr.Load(); e != nil {
		t.Fatalf("installing the Widget CRD: %v", e)
	}
	if got.Status.SyncInProgress != nil {
		t.Errorf("status.syncInProgress = %+v; want it cleared once the render changed", got.Status.SyncInProgress)
	}
	time.Sleep(2 * time.Second)
	if live(t, group+"/v1", "Widget", ns, "main") != nil {
		t.Error("the retry created a Widget no one approved")
	}
}

// TestApprovalSurvivesARecreateStoppedHalfWay: an approved sync deletes
// a RoleBinding to create it anew (its roleRef cannot change in place),
// and the create fails once (a policy refuses it, as a controller killed
// while the delete was waited for would leave it undone). The retry
// plans the RoleBinding as a Create, which is the change approved: it
// goes on without another approval, and the RoleBinding exists again.
func TestApprovalSurvivesARecreateStoppedHalfWay(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "recreatestop", version: "1.0.0", files: map[string]string{"templates/rbac.yaml": recreateChart["templates/rbac.yaml"]}})
	a := create(t, newAddon(controllerNS, "rcs-"+ns[len(ns)-5:], url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.ManualSync, s.Recreate = true, true
		s.Values = jsonValues("role: reader")
	})))
	approvePlan(t, a)
	synced(t, a)

	// A policy that refuses, but lets dry runs through, a RoleBinding to
	// writer created in the namespace.
	name := "no-writer-" + ns
	policy := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: `+name+`
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [rbac.authorization.k8s.io]
        apiVersions: [v1]
        operations: [CREATE]
        resources: [rolebindings]
  validations:
    - expression: "request.dryRun == true || object.roleRef.name != 'writer'"
      message: no binding to writer for now
`), &policy.Object); err != nil {
		t.Fatal(err)
	}
	binding := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: `+name+`
spec:
  policyName: `+name+`
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: `+ns+`
`), &binding.Object); err != nil {
		t.Fatal(err)
	}
	for _, o := range []*unstructured.Unstructured{policy, binding} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), o) })
	}
	// probe creates a RoleBinding to writer for real, and reports whether
	// the policy refused it.
	probe := func() bool {
		t.Helper()
		rb := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
			"metadata": map[string]any{"name": "probe", "namespace": ns},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "writer"},
		}}
		err := admin.Create(ctx, rb)
		if err == nil {
			if err := admin.Delete(ctx, rb); err != nil {
				t.Errorf("deleting the probe: %v", err)
			}
			return false
		}
		return apierrors.IsForbidden(err) || apierrors.IsInvalid(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !probe() {
		if time.Now().After(deadline) {
			t.Fatal("the policy never took effect")
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The second apply, the retry's, comes once the create has failed:
	// the policy goes before it.
	var applies atomic.Int32
	var dropErr atomic.Value
	key := a.Namespace + "/" + a.Name
	stepHooks.Store(key, func(step string) error {
		if step != "apply" || applies.Add(1) != 2 {
			return nil
		}
		if err := admin.Delete(context.Background(), binding); err != nil {
			dropErr.Store(err.Error())
			return nil
		}
		for end := time.Now().Add(30 * time.Second); probe() && time.Now().Before(end); {
			time.Sleep(200 * time.Millisecond)
		}
		return nil
	})
	t.Cleanup(func() { stepHooks.Delete(key) })
	old := live(t, "rbac.authorization.k8s.io/v1", "RoleBinding", ns, "binding").GetUID()
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("role: writer") })
	approvePlan(t, a)
	got := syncedWithoutAnotherApproval(t, a)
	if e := dropErr.Load(); e != nil {
		t.Fatalf("dropping the policy: %v", e)
	}
	if applies.Load() < 2 {
		t.Fatalf("the approved sync applied %d times; want its create refused once, then a retry", applies.Load())
	}
	rb := live(t, "rbac.authorization.k8s.io/v1", "RoleBinding", ns, "binding")
	if rb == nil || rb.GetUID() == old {
		t.Fatalf("the RoleBinding was not created anew: %v", rb)
	}
	if ref, _, _ := unstructured.NestedString(rb.Object, "roleRef", "name"); ref != "writer" {
		t.Errorf("roleRef %q; want writer", ref)
	}
	if got.Status.SyncInProgress != nil {
		t.Errorf("status.syncInProgress = %+v; want it cleared once applied", got.Status.SyncInProgress)
	}
}
