package controller_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/hooks"
)

// TestRunningHooksHoldNoWorker installs five add-ons whose pre-install
// Job waits for a node label, one more than the suite controller's four
// workers. Each reconcile ends while its hook runs, saying so, so a sixth
// add-on installs while all five still wait; within a reconcile each
// would hold a worker until its hook's timeout of one minute. A change to
// one of them, and the deletion of another, wait for the running hook
// rather than replace it while it runs. Once the node has the label, the
// changed one runs its pre-install hooks for the new render and applies
// it, the deleted one is uninstalled, and the others go on from the Job
// they started and are Synced.
func TestRunningHooksHoldNoWorker(t *testing.T) {
	label := "capstan.dev/" + newNamespace(t)
	var waiting []*capstanv1.Addon
	var nss []string
	for range 5 {
		ns := newNamespace(t)
		nss = append(nss, ns)
		waiting = append(waiting, dbapp(t, ns, `{hooks: {initdb: {nodeLabel: "`+label+`"}}}`, longHooks))
	}
	shows := func(ns string) func(*capstanv1.Addon) bool {
		return func(cur *capstanv1.Addon) bool {
			h := cur.Status.Hook
			return h != nil && h.Event == "pre-install" && h.Name == "db-initdb" && h.Run != "" &&
				cur.Status.Phase == capstanv1.PhaseProgressing && readyReason(cur) == "WaitingForHook" &&
				strings.Contains(readyMessage(cur), "waiting for the pre-install hook Job "+ns+"/db-initdb to finish")
		}
	}
	for i, a := range waiting {
		waitFor(t, a, 60*time.Second, "the reconcile to end while the pre-install hook runs", shows(nss[i]))
	}
	first := job(t, nss[0], "db-initdb")

	plainNS := newNamespace(t)
	plain := dbapp(t, plainNS, "")
	synced(t, plain)
	for i, a := range waiting {
		if cur := getAddon(t, a); !shows(nss[i])(cur) {
			t.Fatalf("%s no longer waits for its hook once the sixth add-on is Synced: %s", a.Name, describeStatus(cur))
		}
	}

	// A change waits for the hook that runs.
	changed := update(t, waiting[0], func(cur *capstanv1.Addon) {
		cur.Spec.Values = jsonValues(`{appVersion: "2.0", hooks: {initdb: {nodeLabel: "` + label + `"}}}`)
	})
	waitFor(t, changed, 30*time.Second, "the change to wait for the hook, not yet observed", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration < cur.Generation && strings.Contains(readyMessage(cur), "the change to the Addon is taken up once it has finished")
	})
	// So does a deletion.
	gone := update(t, waiting[1], func(cur *capstanv1.Addon) { cur.Spec.DeletionPolicy = capstanv1.DeletionDelete })
	if err := admin.Delete(context.Background(), gone); err != nil {
		t.Fatal(err)
	}
	waitFor(t, gone, 30*time.Second, "the deletion to wait for the hook", func(cur *capstanv1.Addon) bool {
		msg := readyMessage(cur)
		return cur.Status.Phase == capstanv1.PhaseDeleting && strings.Contains(msg, "Uninstalling: waiting for the pre-install hook Job "+nss[1]+"/db-initdb to finish") &&
			strings.Contains(msg, "the Addon's deletion goes on once it has finished")
	})
	if j := job(t, nss[0], "db-initdb"); j == nil || j.UID != first.UID {
		t.Fatalf("the change replaced the running hook (%s)", jobString(j))
	}

	labelNode(t, label)
	got := synced(t, changed)
	if d := configData(t, nss[0]); d["appVersion"] != "2.0" {
		t.Errorf("after the hook: db-config %v; want the change applied", d)
	}
	if got.Status.Hook != nil {
		t.Errorf("status.hook = %+v once Synced", got.Status.Hook)
	}
	if j := job(t, nss[0], "db-initdb"); j == nil || j.Status.Succeeded != 1 {
		t.Errorf("initdb %s; want it succeeded for the changed render", jobString(j))
	}
	eventually(t, 90*time.Second, "the deleted add-on to be uninstalled once its hook has finished", func() bool {
		return apierrors.IsNotFound(admin.Get(context.Background(), client.ObjectKeyFromObject(gone), &capstanv1.Addon{}))
	})
	for _, a := range waiting[2:] {
		synced(t, a)
	}
}

// TestChangeWhileAHookRunsRunsItsHooksAnew upgrades an add-on whose
// pre-upgrade hooks are a dump Job (weight -10, hook-succeeded only) and
// the migrate Job, which waits for a node label. The dump Job succeeds
// and stays until the event ends, and the migration is left running;
// status.preHooksDone names the dump Job with its run. A change (another
// appVersion) waits for the migration, and then renders another run: the
// dump Job the first run left is deleted before that run's hooks, which
// make it anew and run it. Before, the run applied over the first run's
// Job and read its old success as its own, and the dump never ran for the
// change.
func TestChangeWhileAHookRunsRunsItsHooksAnew(t *testing.T) {
	ns := newNamespace(t)
	rec := recordEvents(t, ns)
	label := "capstan.dev/" + ns
	values := func(version string) *apiextensionsv1.JSON {
		return jsonValues(`{appVersion: "` + version + `", hooks: {migrate: {nodeLabel: "` + label + `"}}, ` +
			`extraHooks: [{name: dump, kind: Job, events: pre-upgrade, weight: "-10", deletePolicy: hook-succeeded}]}`)
	}
	a := dbapp(t, ns, "", longHooks, withSpec(func(s *capstanv1.AddonSpec) { s.Values = values("1.0") }))
	synced(t, a)

	a = update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = values("2.0") })
	got := waitFor(t, a, 60*time.Second, "the upgrade to leave its migration running", func(cur *capstanv1.Addon) bool {
		h := cur.Status.Hook
		return h != nil && h.Event == "pre-upgrade" && h.Name == "db-migrate" && readyReason(cur) == "WaitingForHook"
	})
	dump := job(t, ns, "db-dump")
	if dump == nil || dump.Status.Succeeded != 1 {
		t.Fatalf("dump %s; want the Job that succeeded before the migration", jobString(dump))
	}
	run := dump.Annotations[hooks.RunAnnotation]
	if d := got.Status.PreHooksDone; d == nil || !slices.ContainsFunc(d.Objects, func(o capstanv1.HookObject) bool { return o.Name == "db-dump" && o.Run == run }) {
		t.Errorf("status.preHooksDone = %+v; want it to name the dump Job with its run %s", d, run)
	}

	a = update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = values("3.0") })
	waitFor(t, a, 30*time.Second, "the change to wait for the migration", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration < cur.Generation && strings.Contains(readyMessage(cur), "the change to the Addon is taken up once it has finished")
	})
	labelNode(t, label)
	got = synced(t, a)
	if d := configData(t, ns); d["appVersion"] != "3.0" {
		t.Errorf("db-config %v; want the change applied", d)
	}
	if n := rec.count("Job/db-dump", watch.Added); n != 2 {
		t.Errorf("the dump Job was created %d times; want twice, once by each run", n)
	}
	eventually(t, 30*time.Second, "the second run's dump Job deleted by its policy", func() bool { return job(t, ns, "db-dump") == nil })
	if d := got.Status.PreHooksDone; d != nil && len(d.Objects) > 0 {
		t.Errorf("status.preHooksDone = %+v; want no object left to delete", d)
	}
}

// longHooks gives an add-on's hooks five minutes, so that a test's waits
// on a busy machine never meet the suite's one-minute hook timeout.
var longHooks = withSpec(func(s *capstanv1.AddonSpec) { s.HookTimeout = &metav1.Duration{Duration: 5 * time.Minute} })

// TestApprovedSyncGoesOnFromItsHooks approves the install of an add-on with
// manualSync whose pre-install and post-install Jobs each wait for a node
// label. Each wait ends the reconcile; the looks that go on from them pass
// the gates as the sync that began, with no second approval, although the
// install applied the target namespace before its pre-install hook (so the
// plan is not the one approved any more), and the post hook's look plans
// its hooks again. Drift undone before the post hook is read leaves it the
// same run. The Addon is Synced with the request handled, and each hook
// ran once.
func TestApprovedSyncGoesOnFromItsHooks(t *testing.T) {
	home := newNamespace(t)
	ns := home + "-app" // created by the install, before its pre-install hook
	pre, post := "capstan.dev/"+home+"-pre", "capstan.dev/"+home+"-post"
	a := dbapp(t, home, `{hooks: {initdb: {nodeLabel: "`+pre+`"}, seed: {nodeLabel: "`+post+`"}}}`, longHooks, withTarget(ns),
		withSpec(func(s *capstanv1.AddonSpec) { s.ManualSync = true; s.CreateNamespace = true }))
	got := waitPhase(t, a, capstanv1.PhaseOutOfSync)
	approved := update(t, got, func(cur *capstanv1.Addon) {
		cur.Spec.ApprovedPlan = cur.Status.Plan.Hash
		cur.Spec.SyncRequest++
	})
	waiting := func(event, name string) func(*capstanv1.Addon) bool {
		return func(cur *capstanv1.Addon) bool {
			h := cur.Status.Hook
			// NOTE: the message, not status.hook, says the reconcile
			// ended: a checkpoint shows the hook while the look still
			// waits for it.
			return h != nil && h.Event == event && h.Name == name && readyReason(cur) == "WaitingForHook" &&
				strings.Contains(readyMessage(cur), "waiting for the "+event+" hook Job "+ns+"/"+name)
		}
	}
	waitFor(t, a, 60*time.Second, "the approved install to wait for its pre-install hook", waiting("pre-install", "db-initdb"))
	initdb := job(t, ns, "db-initdb")
	labelNode(t, pre)
	waitFor(t, a, 60*time.Second, "the install to go on, unheld by the gates, to its post-install hook", waiting("post-install", "db-seed"))
	seed := job(t, ns, "db-seed")
	// Drift while the post hook runs: the look that goes on undoes it
	// first, and its post hooks are still the same run.
	cm := &corev1.ConfigMap{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "db-config"}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["appVersion"] = "tampered"
	if err := admin.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	labelNode(t, post)
	done := synced(t, a)
	if done.Status.LastSyncRequest != approved.Spec.SyncRequest {
		t.Errorf("status.lastSyncRequest = %d; want the approved request %d handled", done.Status.LastSyncRequest, approved.Spec.SyncRequest)
	}
	if j := job(t, ns, "db-initdb"); j == nil || j.UID != initdb.UID || j.Status.Succeeded != 1 {
		t.Errorf("initdb %s; want the Job the approved sync started, succeeded once", jobString(j))
	}
	if j := job(t, ns, "db-seed"); j == nil || seed == nil || j.UID != seed.UID || j.Status.Succeeded != 1 {
		t.Errorf("seed %s; want the Job the install started, succeeded once, though the drift was undone before it was read", jobString(j))
	}
	if d := configData(t, ns); d["appVersion"] != "1.0" {
		t.Errorf("db-config %v; want the drift undone", d)
	}
}

// TestLongTestsHoldNoWorker runs a chart's test Job that waits for a node
// label. With spec.test.enable, the install's run holds the add-on
// Progressing until it passes, and its start is the test's. A run only
// asked for (the capstan.dev/test annotation) leaves a Synced add-on
// Synced while it runs.
func TestLongTestsHoldNoWorker(t *testing.T) {
	ns := newNamespace(t)
	label := "capstan.dev/" + ns
	url, _ := charts.publish(t, chart{name: "slowtest", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata: {v: \"1\"}\n",
		"templates/tests/check.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: check\n  annotations:\n    helm.sh/hook: test\n" +
			"spec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      nodeSelector: {\"" + label + "\": \"true\"}\n" +
			"      containers:\n        - name: check\n          image: registry.example/tools:1.0\n",
	}})
	a := create(t, newAddon(controllerNS, "slowtest-"+ns[len(ns)-5:], url, withTarget(ns), longHooks,
		withSpec(func(s *capstanv1.AddonSpec) { s.Test = &capstanv1.TestPolicy{Enable: true} })))
	inTest := func(cur *capstanv1.Addon) bool {
		h := cur.Status.Hook
		return h != nil && h.Event == "test" && h.Name == "check"
	}
	held := waitFor(t, a, 60*time.Second, "the install's tests to hold the add-on while they run", func(cur *capstanv1.Addon) bool {
		return inTest(cur) && cur.Status.Phase == capstanv1.PhaseProgressing && readyReason(cur) == "WaitingForHook"
	})
	since := held.Status.Hook.Since
	node := setNodeLabel(t, label)
	got := synced(t, a)
	if lt := got.Status.LastTest; lt == nil || lt.Result != capstanv1.TestSucceeded || !lt.StartedAt.Equal(&since) {
		t.Fatalf("status.lastTest = %+v; want it passed, started at %s", lt, since)
	}

	node(false)
	update(t, a, func(cur *capstanv1.Addon) {
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[capstanv1.TestAnnotation] = "again"
	})
	waitFor(t, a, 60*time.Second, "the requested tests to run", inTest)
	// NOTE: past the hook wait, the reconcile that started them has
	// ended and written its status.
	time.Sleep(3 * time.Second)
	if running := getAddon(t, a); !inTest(running) || running.Status.Phase != capstanv1.PhaseSynced || readyReason(running) != "Synced" {
		t.Errorf("while requested tests run: %s; want the add-on still Synced", describeStatus(running))
	}
	node(true)
	waitFor(t, a, 60*time.Second, "the requested run to pass", func(cur *capstanv1.Addon) bool {
		lt := cur.Status.LastTest
		return lt != nil && lt.Request == "again" && lt.Result == capstanv1.TestSucceeded && cur.Status.Phase == capstanv1.PhaseSynced
	})
}

// setNodeLabel puts label: "true" on one of the cluster's nodes and returns
// a function that puts it on (true) or takes it off (false); it is taken off
// when the test ends.
func setNodeLabel(t *testing.T, label string) func(on bool) {
	t.Helper()
	ctx := context.Background()
	nodes := &corev1.NodeList{}
	if err := admin.List(ctx, nodes); err != nil || len(nodes.Items) == 0 {
		t.Fatalf("listing nodes: %v (%d)", err, len(nodes.Items))
	}
	name := nodes.Items[0].Name
	set := func(on bool) {
		var value any
		if on {
			value = "true"
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{label: value}}})
		if err := admin.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Errorf("setting the node label %s to %v: %v", label, on, err)
		}
	}
	set(true)
	t.Cleanup(func() { set(false) })
	return set
}

// TestHookDeletedWhileItRunsFails deletes a pre-install Job that a
// reconcile left running, as a person cuts a long migration short: the
// UID status.hook recorded for it tells the next look that the Job the
// run made is gone, so the hook fails with the reason Deleted, nothing is
// applied, and the Job is not made again.
func TestHookDeletedWhileItRunsFails(t *testing.T) {
	ns := newNamespace(t)
	rec := recordEvents(t, ns)
	a := dbapp(t, ns, `{hooks: {initdb: {nodeLabel: "capstan.dev/`+ns+`"}}}`, longHooks)
	got := waitFor(t, a, 60*time.Second, "status.hook to record the running initdb Job's UID", func(cur *capstanv1.Addon) bool {
		h := cur.Status.Hook
		return h != nil && h.Name == "db-initdb" && h.UID != ""
	})
	first := job(t, ns, "db-initdb")
	if first == nil || first.UID != got.Status.Hook.UID {
		t.Fatalf("status.hook = %+v; want the UID of the running Job %s", got.Status.Hook, jobString(first))
	}
	if err := admin.Delete(context.Background(), first, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	failedWith(t, a, "the pre-install hook failed, so nothing was applied", "Job "+ns+"/db-initdb", "was deleted before Capstan read how it ended")
	if n := rec.count("Job/db-initdb", watch.Added); n != 1 {
		t.Errorf("the initdb Job was created %d times; want once, not again after it was deleted", n)
	}
	if live(t, "v1", "ConfigMap", ns, "db-config") != nil {
		t.Error("an object was applied though the pre-install hook was deleted")
	}
}
