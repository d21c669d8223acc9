package controller_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/hooks"
)

// NOTE: init runs before TestMain, so the suite's controller starts with
// the real hook runner.
func init() { HookRunner = &hooks.Runner{Poll: 200 * time.Millisecond} }

// dbappChart is internal/hooks' test chart: an app with an initdb
// pre-install Job (weight -10), a migrate pre-upgrade Job (weight -5), a
// seed post-install Job and a backup pre-delete Job. Values make any of
// them fail or hang; see its values.yaml.
func dbappChart(t *testing.T, version string) string {
	t.Helper()
	dir := filepath.Join("..", "hooks", "testdata", "charts", "dbapp")
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "Chart.yaml" {
			return nil // publish writes it, with this version
		}
		data, err := os.ReadFile(p)
		files[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	url, _ := charts.publish(t, chart{name: "dbapp", version: version, files: files})
	return url
}

// dbapp creates a cluster-profile Addon of the dbapp chart, release "db",
// installing into ns.
func dbapp(t *testing.T, ns, values string, opts ...addonOpt) *capstanv1.Addon {
	t.Helper()
	opts = append([]addonOpt{withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) { s.ReleaseName = "db" })}, opts...)
	if values != "" {
		opts = append(opts, withValues(values))
	}
	return create(t, newAddon(controllerNS, "hooks-"+ns, dbappChart(t, "1.0.0"), opts...))
}

// job reads a Job, or nil when it does not exist.
func job(t *testing.T, ns, name string) *batchv1.Job {
	t.Helper()
	u := live(t, "batch/v1", "Job", ns, name)
	if u == nil {
		return nil
	}
	j := &batchv1.Job{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, j); err != nil {
		t.Fatal(err)
	}
	return j
}

func configData(t *testing.T, ns string) map[string]string {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "db-config"}, cm); err != nil {
		t.Fatalf("reading db-config: %v", err)
	}
	return cm.Data
}

// readyMessage is the Ready condition's message.
func readyMessage(a *capstanv1.Addon) string {
	if c := condition(a, capstanv1.ConditionReady); c != nil {
		return c.Message
	}
	return ""
}

// synced waits until the Addon is Synced for its current generation.
func synced(t *testing.T, a *capstanv1.Addon) *capstanv1.Addon {
	t.Helper()
	gen := getAddon(t, a).Generation
	return waitFor(t, a, 90*time.Second, "Synced", func(cur *capstanv1.Addon) bool {
		return cur.Generation >= gen && cur.Status.ObservedGeneration == cur.Generation && cur.Status.Phase == capstanv1.PhaseSynced
	})
}

// failedWith waits until the Addon's current generation failed with a
// Ready message that holds every part of want.
func failedWith(t *testing.T, a *capstanv1.Addon, want ...string) *capstanv1.Addon {
	t.Helper()
	gen := getAddon(t, a).Generation
	return waitFor(t, a, 90*time.Second, "a failure that says "+strings.Join(want, " … "), func(cur *capstanv1.Addon) bool {
		if cur.Generation < gen || cur.Status.ObservedGeneration != cur.Generation || cur.Status.Phase != capstanv1.PhaseFailed {
			return false
		}
		msg := readyMessage(cur)
		for _, w := range want {
			if !strings.Contains(msg, w) {
				return false
			}
		}
		return true
	})
}

// TestHookLifecycle drives one add-on through install, a resync with
// nothing new, an upgrade and an uninstall, and observes from the API
// server's resourceVersions that each hook ran at its place.
func TestHookLifecycle(t *testing.T) {
	ns := newNamespace(t)
	rec := recordEvents(t, ns)
	a := dbapp(t, ns, "", withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = capstanv1.DeletionDelete }))

	// Install: pre-install, apply, post-install.
	got := synced(t, a)
	initdb, seed := job(t, ns, "db-initdb"), job(t, ns, "db-seed")
	if initdb == nil || seed == nil || initdb.Status.Succeeded != 1 || seed.Status.Succeeded != 1 {
		t.Fatalf("install: initdb %s, seed %s; want both run", jobString(initdb), jobString(seed))
	}
	rec.before(t, rec.finished("db-initdb", initdb.UID), rec.added("ConfigMap/db-config"), "the pre-install Job finished", "the objects were applied")
	rec.before(t, rec.added("Deployment/db-app"), rec.added("Job/db-seed"), "the objects were applied", "the post-install Job was created")
	if job(t, ns, "db-migrate") != nil || job(t, ns, "db-backup") != nil {
		t.Error("install ran an upgrade or delete hook")
	}
	rec.before(t, rec.where("ConfigMap/db-config", watch.Added, func(o client.Object) bool { return o.(*corev1.ConfigMap).Data["installedBy"] == "install" }),
		rec.added("Job/db-seed"), "db-config was created rendered for an install (.Release.IsInstall)", "the post-install Job was created")
	if got.Status.Hook != nil {
		t.Errorf("status.hook = %+v after the hooks finished", got.Status.Hook)
	}
	// The checkpoint before the post hooks recorded them as pending; the
	// end of the sync must clear that, or the next sync runs them again.
	if n := rec.count("Job/db-seed", watch.Added); n != 1 {
		t.Errorf("the post-install Job was created %d times by the install; want once", n)
	}

	// A resync with nothing new runs no hook.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.SyncRequest++ })
	synced(t, a)
	if j := job(t, ns, "db-initdb"); j == nil || j.UID != initdb.UID {
		t.Error("the resync ran the pre-install hook again")
	}
	if j := job(t, ns, "db-seed"); j == nil || j.UID != seed.UID {
		t.Error("the resync ran the post-install hook again")
	}
	if job(t, ns, "db-migrate") != nil {
		t.Error("the resync ran the pre-upgrade hook")
	}
	if rv := rec.where("ConfigMap/db-config", watch.Modified, nil)(); rv != "" {
		t.Errorf("db-config was changed (resourceVersion %s) though nothing new was synced; a resync must render the chart as the last apply did", rv)
	}

	// Upgrade: the migration runs before the new version is applied.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`appVersion: "2.0"`) })
	synced(t, a)
	migrate := job(t, ns, "db-migrate")
	if migrate == nil || migrate.Status.Succeeded != 1 || !slices.Equal(migrate.Spec.Template.Spec.Containers[0].Args, []string{"migrate", "--to", "2.0"}) {
		t.Fatalf("upgrade: migrate %s; want it run for 2.0", jobString(migrate))
	}
	rec.before(t, rec.finished("db-migrate", migrate.UID),
		rec.where("ConfigMap/db-config", watch.Modified, func(o client.Object) bool { return o.(*corev1.ConfigMap).Data["appVersion"] == "2.0" }),
		"the pre-upgrade Job finished", "db-config was updated to 2.0")
	if d := configData(t, ns); d["installedBy"] != "upgrade" {
		t.Errorf("db-config installedBy = %q; .Release.IsUpgrade must hold on upgrade", d["installedBy"])
	}
	if j := job(t, ns, "db-initdb"); j == nil || j.UID != initdb.UID {
		t.Error("the upgrade ran the pre-install hook")
	}
	if j := job(t, ns, "db-seed"); j == nil || j.UID != seed.UID {
		t.Error("the upgrade ran the post-install hook")
	}

	// Uninstall: the backup runs before anything is deleted.
	deleteAddon(t, a)
	backup := job(t, ns, "db-backup")
	if backup == nil || backup.Status.Succeeded != 1 {
		t.Fatalf("uninstall: backup %s; want it run and kept (before-hook-creation, as Helm)", jobString(backup))
	}
	rec.before(t, rec.finished("db-backup", backup.UID), rec.where("ConfigMap/db-config", watch.Deleted, nil), "the pre-delete Job finished", "db-config was deleted")
	if live(t, "apps/v1", "Deployment", ns, "db-app") != nil {
		t.Error("the uninstall left the Deployment")
	}
}

// TestFailedPreUpgradeAppliesNothing fails the migration: nothing of the
// new version is applied, status names the hook, its Job's failure reason
// and how to retry, and fixing the values lets the upgrade through.
func TestFailedPreUpgradeAppliesNothing(t *testing.T) {
	ns := newNamespace(t)
	a := dbapp(t, ns, "")
	before := synced(t, a).Status.AppliedHash

	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.Values = jsonValues(`{appVersion: "2.0", hooks: {migrate: {fail: true, exitCode: 4}}}`)
	})
	got := failedWith(t, a, "the pre-upgrade hook failed, so nothing was applied",
		"pre-upgrade hook Job "+ns+"/db-migrate (weight -5", "BackoffLimitExceeded", "container migrate exited with code 4", "The next sync runs the hook again")
	if d := configData(t, ns); d["appVersion"] != "1.0" {
		t.Errorf("db-config appVersion = %q after a failed pre-upgrade hook; nothing may be applied", d["appVersion"])
	}
	dep := &appsv1.Deployment{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "db-app"}, dep); err != nil || dep.Spec.Template.Spec.Containers[0].Image != "registry.example/dbapp:1.0" {
		t.Errorf("Deployment image = %s (%v); want 1.0 still", dep.Spec.Template.Spec.Containers[0].Image, err)
	}
	if got.Status.AppliedHash != before {
		t.Errorf("appliedHash changed from %s to %s though nothing was applied", before, got.Status.AppliedHash)
	}

	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`appVersion: "2.0"`) })
	synced(t, a)
	if d := configData(t, ns); d["appVersion"] != "2.0" {
		t.Errorf("after the fix db-config appVersion = %q, want 2.0", d["appVersion"])
	}
}

// TestFailedPostInstallIsRetried makes the seed Job wait for a node that
// does not exist yet, past spec.hookTimeout: the objects stay applied,
// status records the post-install event as pending, and once a node
// appears the next sync (a resync, nobody asks) retries only the seed
// hook: not the pre-install hook, and not an upgrade. The Job that timed
// out runs too once the node is there; if it succeeded before the retry,
// the retry does not run it again.
func TestFailedPostInstallIsRetried(t *testing.T) {
	ns := newNamespace(t)
	rec := recordEvents(t, ns)
	label := "capstan.dev/" + ns
	a := dbapp(t, ns, `{hooks: {seed: {nodeLabel: "`+label+`"}}}`,
		withSpec(func(s *capstanv1.AddonSpec) { s.HookTimeout = &metav1.Duration{Duration: 5 * time.Second} }))
	// While the hook runs, the apply is already recorded, with the hook
	// pending: a controller that stops now runs only the hook next time.
	running := waitFor(t, a, 60*time.Second, "status.hook to show the seed hook", func(cur *capstanv1.Addon) bool {
		return cur.Status.Hook != nil && cur.Status.Hook.Event == "post-install"
	})
	if p := running.Status.PendingHook; p == nil || p.Event != "post-install" || running.Status.AppliedHash == "" || p.Hash != running.Status.AppliedHash {
		t.Errorf("while the post-install hook runs: pendingHook %+v, appliedHash %q; want both recorded", p, running.Status.AppliedHash)
	}
	got := failedWith(t, a, "the post-install hook failed; the objects are applied, and the next sync runs the post-install hooks again",
		"Job "+ns+"/db-seed", "did not finish within the hook timeout of 5s")
	if live(t, "v1", "ConfigMap", ns, "db-config") == nil || live(t, "apps/v1", "Deployment", ns, "db-app") == nil {
		t.Fatal("a failed post-install hook must leave the objects applied")
	}
	if p := got.Status.PendingHook; p == nil || p.Event != "post-install" || p.Hash != got.Status.AppliedHash || p.Hash == "" {
		t.Fatalf("status.pendingHook = %+v, appliedHash %q; want post-install for the applied render", p, got.Status.AppliedHash)
	}
	if !isStalled(got) {
		t.Error("a failed hook must stall the add-on until the next sync, not retry at once")
	}
	initdb, first := job(t, ns, "db-initdb"), job(t, ns, "db-seed")
	if initdb == nil || first == nil {
		t.Fatalf("initdb %s, seed %s; want both", jobString(initdb), jobString(first))
	}

	labelNode(t, label)
	got = synced(t, a)
	seed := job(t, ns, "db-seed")
	if seed == nil || seed.Status.Succeeded != 1 {
		t.Errorf("after the node appeared, seed %s; want a Job that succeeded", jobString(seed))
	}
	if n := rec.rerunsAfterSuccess("db-seed"); n > 0 {
		t.Errorf("the seed Job was created again %d times after one had succeeded", n)
	}
	if j := job(t, ns, "db-initdb"); j == nil || j.UID != initdb.UID {
		t.Error("the retry ran the pre-install hook again")
	}
	if job(t, ns, "db-migrate") != nil {
		t.Error("the retry ran the pre-upgrade hook")
	}
	if got.Status.PendingHook != nil {
		t.Errorf("status.pendingHook = %+v after the retry succeeded", got.Status.PendingHook)
	}
	if d := configData(t, ns); d["installedBy"] != "install" {
		t.Errorf("db-config installedBy = %q; the retry must render as the install did", d["installedBy"])
	}
}

// TestFailedPostInstallKeepsWhatSucceeded fails a post-install event at a
// Job of weight 1 that waits for a node past spec.hookTimeout, after the
// seed Job, with hook-succeeded, has succeeded: the seed Job is left, and
// status.pendingHook names it with its run. Each retry goes on from that
// run and does not run the seed Job again; once the node is there the
// event succeeds, and the seed Job is deleted then.
func TestFailedPostInstallKeepsWhatSucceeded(t *testing.T) {
	ns := newNamespace(t)
	rec := recordEvents(t, ns)
	label := "capstan.dev/" + ns
	a := dbapp(t, ns, `{hooks: {seed: {deletePolicy: hook-succeeded}}, extraHooks: [{name: second, kind: Job, events: post-install, weight: "1", nodeLabel: "`+label+`"}]}`,
		withSpec(func(s *capstanv1.AddonSpec) { s.HookTimeout = &metav1.Duration{Duration: 5 * time.Second} }))
	got := failedWith(t, a, "the post-install hook failed", "Job "+ns+"/db-second", "did not finish within the hook timeout of 5s")
	seed := job(t, ns, "db-seed")
	if seed == nil || seed.Status.Succeeded != 1 {
		t.Errorf("seed %s; want the Job that succeeded left for the retry", jobString(seed))
	} else if p := got.Status.PendingHook; p == nil || len(p.Objects) != 1 || p.Objects[0].Name != "db-seed" || p.Objects[0].Run != seed.Annotations[hooks.RunAnnotation] {
		t.Errorf("status.pendingHook = %+v; want it to name the seed Job with its run", p)
	}
	// NOTE: the resync (20 s) retries the event at least once while the
	// Job still waits for the node.
	time.Sleep(25 * time.Second)
	labelNode(t, label)
	got = synced(t, a)
	if n := rec.rerunsAfterSuccess("db-seed"); n > 0 {
		t.Errorf("the seed Job was created again %d times after it had succeeded", n)
	}
	eventually(t, 30*time.Second, "the seed Job to be deleted by its policy", func() bool { return job(t, ns, "db-seed") == nil })
	if got.Status.PendingHook != nil {
		t.Errorf("status.pendingHook = %+v after the retry succeeded", got.Status.PendingHook)
	}
	if d := got.Status.PreHooksDone; d != nil && len(d.Objects) > 0 {
		t.Errorf("status.preHooksDone = %+v; want no object left to delete", d)
	}
}

// TestRetrySkipsHooksBeforeTheFailure fails a post-install event
// at a Job of weight 1 that waits for a node past spec.hookTimeout, after
// the seed Job, with only the default policy, has succeeded; the seed Job
// is then deleted, as the TTL controller deletes a Job whose chart sets
// ttlSecondsAfterFinished (raised to five minutes, the resync that
// retries). status.pendingHook names the Job at which the run ended, with
// the run, and the retry that goes on from it does not make the seed Job
// again. Before, it ran the seed Job a second time.
func TestRetrySkipsHooksBeforeTheFailure(t *testing.T) {
	ns := newNamespace(t)
	rec := recordEvents(t, ns)
	label := "capstan.dev/" + ns
	a := dbapp(t, ns, `{extraHooks: [{name: second, kind: Job, events: post-install, weight: "1", nodeLabel: "`+label+`"}]}`,
		withSpec(func(s *capstanv1.AddonSpec) { s.HookTimeout = &metav1.Duration{Duration: 5 * time.Second} }))
	got := failedWith(t, a, "the post-install hook failed", "Job "+ns+"/db-second", "did not finish within the hook timeout of 5s")
	seed := job(t, ns, "db-seed")
	if seed == nil || seed.Status.Succeeded != 1 {
		t.Fatalf("seed %s; want the Job that succeeded", jobString(seed))
	}
	if p := got.Status.PendingHook; p == nil || p.Failed == nil || p.Failed.Name != "db-second" || p.Failed.Run != seed.Annotations[hooks.RunAnnotation] {
		t.Errorf("status.pendingHook = %+v; want it to name the second Job, at which the run ended, with the run", p)
	}
	if err := admin.Delete(context.Background(), seed, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the seed Job gone", func() bool { return job(t, ns, "db-seed") == nil })
	labelNode(t, label)
	synced(t, a)
	if n := rec.count("Job/db-seed", watch.Added); n != 1 {
		t.Errorf("the seed Job was created %d times; want once, by the run the retry went on from", n)
	}
}

func isStalled(a *capstanv1.Addon) bool {
	c := condition(a, capstanv1.ConditionStalled)
	return c != nil && c.Status == metav1.ConditionTrue
}

// labelNode puts label: "true" on one of the cluster's nodes until the test
// ends, so pods that select it can be scheduled.
func labelNode(t *testing.T, label string) {
	t.Helper()
	setNodeLabel(t, label)
}

// TestFailedPreDeleteStopsRemoval fails the backup: the uninstall stops,
// the software keeps running, and fixing the hook lets the removal finish.
func TestFailedPreDeleteStopsRemoval(t *testing.T) {
	ns := newNamespace(t)
	a := dbapp(t, ns, `{hooks: {backup: {fail: true}}}`, withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = capstanv1.DeletionDelete }))
	synced(t, a)
	if err := admin.Delete(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	got := failedWith(t, a, "the pre-delete hook failed, so the uninstall stopped and everything still runs", "Job "+ns+"/db-backup", "BackoffLimitExceeded")
	if got.DeletionTimestamp == nil {
		t.Fatal("the Addon is not being deleted")
	}
	time.Sleep(2 * time.Second)
	if live(t, "v1", "ConfigMap", ns, "db-config") == nil || live(t, "apps/v1", "Deployment", ns, "db-app") == nil {
		t.Fatal("a failed pre-delete hook must stop the uninstall, but objects were deleted")
	}

	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = nil })
	eventually(t, 90*time.Second, "the Addon to go once the backup succeeds", func() bool {
		return apierrors.IsNotFound(admin.Get(context.Background(), client.ObjectKeyFromObject(a), &capstanv1.Addon{}))
	})
	if live(t, "apps/v1", "Deployment", ns, "db-app") != nil {
		t.Error("the uninstall left the Deployment")
	}
}

// TestFailedPostDeleteRetriesOnlyItself fails a post-delete hook: the
// inventory is deleted already, and the retry runs only the post-delete
// hook, not the pre-delete backup again.
func TestFailedPostDeleteRetriesOnlyItself(t *testing.T) {
	ns := newNamespace(t)
	a := dbapp(t, ns, `{extraHooks: [{name: cleanup, kind: Job, events: post-delete, fail: true}]}`,
		withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = capstanv1.DeletionDelete }))
	synced(t, a)
	if err := admin.Delete(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	got := failedWith(t, a, "the post-delete hook failed; everything else is deleted, and the next sync runs only the post-delete hooks again", "Job "+ns+"/db-cleanup")
	if p := got.Status.PendingHook; p == nil || p.Event != "post-delete" {
		t.Fatalf("status.pendingHook = %+v, want post-delete", p)
	}
	if live(t, "apps/v1", "Deployment", ns, "db-app") != nil {
		t.Fatal("the inventory was not deleted before the post-delete hook")
	}
	backup := job(t, ns, "db-backup")
	if backup == nil {
		t.Fatal("the pre-delete backup did not run")
	}

	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = nil })
	eventually(t, 90*time.Second, "the Addon to go once the cleanup succeeds", func() bool {
		return apierrors.IsNotFound(admin.Get(context.Background(), client.ObjectKeyFromObject(a), &capstanv1.Addon{}))
	})
	if j := job(t, ns, "db-backup"); j == nil || j.UID != backup.UID {
		t.Error("the retry ran the pre-delete backup again")
	}
}

// TestHookTimeoutShowsProgress runs a pre-install Job that never finishes:
// status shows the hook while it runs, the sync fails at spec.hookTimeout
// with nothing applied, and the next sync, with the chart fixed, succeeds.
func TestHookTimeoutShowsProgress(t *testing.T) {
	ns := newNamespace(t)
	a := dbapp(t, ns, `{hooks: {initdb: {hang: true}}}`, withSpec(func(s *capstanv1.AddonSpec) { s.HookTimeout = &metav1.Duration{Duration: 6 * time.Second} }))
	got := waitFor(t, a, 60*time.Second, "status.hook to show the running hook", func(cur *capstanv1.Addon) bool {
		return cur.Status.Hook != nil
	})
	h := got.Status.Hook
	if h.Kind != "Job" || h.Name != "db-initdb" || h.Namespace != ns || h.Event != "pre-install" || h.Since.IsZero() || time.Since(h.Since.Time) > time.Minute {
		t.Errorf("status.hook = %+v; want the pre-install Job db-initdb and when it started", h)
	}
	failedWith(t, a, "the pre-install hook failed, so nothing was applied", "pre-install hook Job "+ns+"/db-initdb (weight -10", "did not finish within the hook timeout of 6s", "raise spec.hookTimeout")
	if live(t, "v1", "ConfigMap", ns, "db-config") != nil {
		t.Error("an object was applied though the pre-install hook timed out")
	}
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = nil })
	synced(t, a)
	if j := job(t, ns, "db-initdb"); j == nil || j.Status.Succeeded != 1 {
		t.Errorf("after the fix: %s; want it run", jobString(j))
	}
}

// TestPlainJobs checks the rules for Jobs that are not hooks: the TTL is
// removed, so a finished Job stays and is not run again by a resync; a
// changed template deletes the Job and creates it anew.
func TestPlainJobs(t *testing.T) {
	ns := newNamespace(t)
	a := dbapp(t, ns, `{job: {enabled: true, ttl: 2}}`)
	synced(t, a)
	var first *batchv1.Job
	eventually(t, 60*time.Second, "the reindex Job to complete", func() bool {
		first = job(t, ns, "db-reindex")
		return first != nil && first.Status.Succeeded == 1
	})
	if first.Spec.TTLSecondsAfterFinished != nil {
		t.Fatalf("ttlSecondsAfterFinished = %d; it must be removed from Jobs that are not hooks", *first.Spec.TTLSecondsAfterFinished)
	}
	time.Sleep(4 * time.Second) // twice the TTL the chart asked for
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.SyncRequest++ })
	synced(t, a)
	if j := job(t, ns, "db-reindex"); j == nil || j.UID != first.UID {
		t.Fatalf("after the TTL and a resync: %s; want the same Job %s, not run again", jobString(j), first.UID)
	}
	pods := &corev1.PodList{}
	if err := admin.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{batchv1.JobNameLabel: "db-reindex"}); err != nil || len(pods.Items) != 1 {
		t.Errorf("the Job has %d pods (%v); want 1: it must not run again", len(pods.Items), err)
	}

	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.Values = jsonValues(`{job: {enabled: true, ttl: 2, version: "2"}}`)
	})
	synced(t, a)
	var second *batchv1.Job
	eventually(t, 60*time.Second, "the new reindex Job to complete", func() bool {
		second = job(t, ns, "db-reindex")
		return second != nil && second.UID != first.UID && second.Status.Succeeded == 1
	})
	if args := second.Spec.Template.Spec.Containers[0].Args; !slices.Equal(args, []string{"reindex", "--version", "2"}) {
		t.Errorf("new Job args = %v", args)
	}
}

// TestUnknownHookEventIsReportedAndNotRun gives a hook the event
// "pre-instal": as in Helm, it never runs, and the plan reports it as a
// notice that blocks nothing.
func TestUnknownHookEventIsReportedAndNotRun(t *testing.T) {
	ns := newNamespace(t)
	a := dbapp(t, ns, `{extraHooks: [{name: typo, kind: ConfigMap, events: pre-instal}]}`)
	got := synced(t, a)
	found := false
	for _, n := range got.Status.Plan.Notices {
		found = found || (n.Path == "hooks/ConfigMap/db-typo" && strings.Contains(n.Message, "pre-instal") && strings.Contains(n.Message, "never runs"))
	}
	if !found {
		t.Errorf("the plan does not report the unknown hook event: %+v", got.Status.Plan.Notices)
	}
	if live(t, "v1", "ConfigMap", ns, "db-typo") != nil {
		t.Error("the hook with an unknown event ran")
	}
}

// TestPlanListsHooks checks that a manual-sync plan lists the hooks the
// sync would run in the order they run (event, then weight, kind and name),
// with their weights, and counts them as pending changes.
func TestPlanListsHooks(t *testing.T) {
	ns := newNamespace(t)
	a := dbapp(t, ns, `{extraHooks: [{name: late, kind: ConfigMap, events: pre-install, weight: "5"}, {name: b-early, kind: ConfigMap, events: pre-install, weight: "-10"}]}`,
		withSpec(func(s *capstanv1.AddonSpec) { s.ManualSync = true }))
	got := waitPhase(t, a, capstanv1.PhaseOutOfSync)
	p := got.Status.Plan
	var listed []string
	for _, h := range p.Hooks {
		listed = append(listed, strings.Join(h.Events, ",")+" "+h.Kind+"/"+h.Name+" "+strconv.Itoa(h.Weight))
	}
	want := []string{"pre-install ConfigMap/db-b-early -10", "pre-install Job/db-initdb -10", "pre-install ConfigMap/db-late 5", "post-install Job/db-seed 0"}
	if !slices.Equal(listed, want) || p.Summary.Hooks != 4 {
		t.Errorf("plan hooks = %v (count %d), want %v", listed, p.Summary.Hooks, want)
	}
	if job(t, ns, "db-initdb") != nil {
		t.Error("a hook ran before the plan was approved")
	}
}

// TestRestrictedHooks runs the hooks of a restricted add-on: they are
// hardened like its other pods, and the uninstall runs the pre-delete hook.
func TestRestrictedHooks(t *testing.T) {
	ns := newNamespace(t)
	a := create(t, newAddon(ns, "db", dbappChart(t, "1.0.0")))
	got := synced(t, a)
	if got.Status.Profile != capstanv1.ProfileRestricted {
		t.Fatalf("profile %s", got.Status.Profile)
	}
	initdb := job(t, ns, "db-initdb")
	if initdb == nil || initdb.Status.Succeeded != 1 {
		t.Fatalf("initdb: %s; want it run", jobString(initdb))
	}
	if sc := initdb.Spec.Template.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("the hook's pod is not hardened: %+v", sc)
	}
	// The Addon owns a restricted add-on's hook Jobs, so the garbage
	// collector may remove the pre-delete Job as soon as the Addon is
	// gone: its run is read from a watch, not afterwards.
	ran := watchCompleteJobs(t, ns, a.UID)
	deleteAddon(t, a)
	eventually(t, 10*time.Second, "the restricted uninstall to have run the pre-delete hook db-backup to completion", func() bool {
		return ran("db-backup")
	})
}

// --- observing order ------------------------------------------------------

// event is one change a watch saw.
type event struct {
	typ watch.EventType
	key string // Kind/name
	uid types.UID
	rv  string
	obj client.Object
}

// eventLog watches ConfigMaps, Jobs and Deployments in a namespace and
// keeps every change, with the resourceVersion the API server gave it.
type eventLog struct {
	mu     sync.Mutex
	events []event
}

func recordEvents(t *testing.T, ns string) *eventLog {
	t.Helper()
	wc, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	l := &eventLog{}
	for _, list := range []client.ObjectList{&corev1.ConfigMapList{}, &batchv1.JobList{}, &appsv1.DeploymentList{}} {
		w, err := wc.Watch(context.Background(), list, client.InNamespace(ns))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		go func() {
			for ev := range w.ResultChan() {
				obj, ok := ev.Object.(client.Object)
				if !ok {
					continue
				}
				l.mu.Lock()
				l.events = append(l.events, event{typ: ev.Type, key: typeName(obj) + "/" + obj.GetName(), uid: obj.GetUID(), rv: obj.GetResourceVersion(), obj: obj})
				l.mu.Unlock()
			}
		}()
	}
	return l
}

func typeName(obj client.Object) string {
	switch obj.(type) {
	case *corev1.ConfigMap:
		return "ConfigMap"
	case *batchv1.Job:
		return "Job"
	case *appsv1.Deployment:
		return "Deployment"
	}
	return "Unknown"
}

// where returns a lookup of the first event of key and type that match
// holds for (nil matches any).
func (l *eventLog) where(key string, typ watch.EventType, match func(client.Object) bool) func() string {
	return func() string {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, e := range l.events {
			if e.key == key && e.typ == typ && (match == nil || match(e.obj)) {
				return e.rv
			}
		}
		return ""
	}
}

// count returns how many events of key and type the watch has seen.
func (l *eventLog) count(key string, typ watch.EventType) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e.key == key && e.typ == typ {
			n++
		}
	}
	return n
}

// added returns a lookup of an object's creation.
func (l *eventLog) added(key string) func() string { return l.where(key, watch.Added, nil) }

// finished returns a lookup of when one Job, by UID, became Complete or
// Failed.
func (l *eventLog) finished(name string, uid types.UID) func() string {
	return l.where("Job/"+name, watch.Modified, func(o client.Object) bool {
		if o.GetUID() != uid {
			return false
		}
		for _, c := range o.(*batchv1.Job).Status.Conditions {
			if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
}

// before checks that the change first happened before the change then,
// waiting briefly for the watch to deliver both.
func (l *eventLog) before(t *testing.T, first, then func() string, firstWhat, thenWhat string) {
	t.Helper()
	var a, b string
	eventually(t, 10*time.Second, "the watch to see that "+firstWhat+" and "+thenWhat, func() bool {
		a, b = first(), then()
		return a != "" && b != ""
	})
	n, err := resourceversion.CompareResourceVersion(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if n >= 0 {
		t.Errorf("%s (resourceVersion %s) did not happen before %s (resourceVersion %s)", firstWhat, a, thenWhat, b)
	}
}

// jobString describes a Job in one line for a failure message.
func jobString(j *batchv1.Job) string {
	if j == nil {
		return "absent"
	}
	conds := []string{}
	for _, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			conds = append(conds, string(c.Type)+"/"+c.Reason)
		}
	}
	return fmt.Sprintf("Job %s (uid %s): active %d, succeeded %d, failed %d, conditions %v", j.Name, j.UID, j.Status.Active, j.Status.Succeeded, j.Status.Failed, conds)
}

// TestAdoptNamesSkippedHooks: a first sync with spec.adopt that adopts
// one object that already runs (db-config, created apart exactly as the
// chart renders it) and creates the rest is an adoption, which runs no
// hooks: a pre-install initdb must never run over a database that already
// runs. Its install hooks then never run, since the syncs after it are
// upgrades. The plan that waits for spec.adopt says so, naming them and
// what to do, and the adoption runs none of them.
func TestAdoptNamesSkippedHooks(t *testing.T) {
	ns := newNamespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-config"}, Data: map[string]string{"appVersion": "1.0", "installedBy": "install"}}
	if err := admin.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	a := dbapp(t, ns, "")
	adoptNotice := func(a *capstanv1.Addon) *capstanv1.Notice {
		if a.Status.Plan == nil {
			return nil
		}
		for i, n := range a.Status.Plan.Notices {
			if n.Path == "spec.adopt" {
				return &a.Status.Plan.Notices[i]
			}
		}
		return nil
	}
	got := waitPhase(t, a, capstanv1.PhaseBlocked)
	notice := adoptNotice(got)
	if notice == nil {
		t.Fatalf("the plan that waits for spec.adopt has no notice on it; notices %+v", got.Status.Plan.Notices)
	}
	for _, want := range []string{"adopts 1 object(s) that already run (ConfigMap " + ns + "/db-config) and creates 1", "runs no hooks",
		"pre-install Job " + ns + "/db-initdb", "post-install Job " + ns + "/db-seed", "sync with spec.adopt false"} {
		if !strings.Contains(notice.Message, want) {
			t.Errorf("notice %q lacks %q", notice.Message, want)
		}
	}
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Adopt = true })
	got = synced(t, a)
	if j := job(t, ns, "db-initdb"); j != nil {
		t.Errorf("the adoption ran the pre-install hook: %s", jobString(j))
	}
	if j := job(t, ns, "db-seed"); j != nil {
		t.Errorf("the adoption ran the post-install hook: %s", jobString(j))
	}
	if n := adoptNotice(got); n != nil {
		t.Errorf("the plan after the adoption still has %q", n.Message)
	}
}
