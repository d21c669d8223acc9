package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestPruneAndUninstallGoInReverseWaves: what a prune or an uninstall
// deletes goes highest wave first, and a wave goes only once what the
// waves after it deleted is gone. A ConfigMap with a finalizer stands for
// a custom resource that its operator, a wave before it, must finalize:
// the operator is not deleted while it is being deleted. The prune shows
// the wait in status.wave and goes on once the finalizer is done; the
// uninstall's wait times out at spec.healthTimeout with the operator still
// running, and the uninstall ends by itself once the finalizer is done. A
// change to the Addon during the prune's wait, and a retry of the stalled
// uninstall, delete no lower wave early, and the retry runs no pre-delete
// hook again; the uninstall of an add-on whose prune stalled runs it.
func TestPruneAndUninstallGoInReverseWaves(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	configMap := func(name, wave string, hold bool) string {
		out := "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"
		if wave != "" {
			out += "  annotations:\n    capstan.dev/sync-wave: \"" + wave + "\"\n"
		}
		if hold {
			out += "  finalizers: [example.com/hold]\n"
		}
		return out + "data: {a: b}\n"
	}
	url, _ := charts.publish(t, chart{name: "gonewaves", version: "1.0.0", files: map[string]string{
		"templates/all.yaml": configMap("operator", "", false) + configMap("cr", "1", true) +
			configMap("one", "", false) + configMap("two", "", false) + configMap("three", "", false),
		"templates/old.yaml": "{{ if .Values.old }}" + configMap("old-operator", "0", false) + configMap("old-cr", "1", true) + "{{ end }}",
		"templates/backup.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: backup\n  annotations:\n    helm.sh/hook: pre-delete\n" +
			"spec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: backup\n          image: registry.example/tools:1.0\n",
	}})
	a := create(t, newAddon(controllerNS, "gw-"+ns[len(ns)-5:], url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Prune = true
		s.DeletionPolicy = capstanv1.DeletionDelete
		s.Values = jsonValues("old: true")
	})))
	synced := waitPhase(t, a, capstanv1.PhaseSynced)
	cm := func(name string) bool { return live(t, "v1", "ConfigMap", ns, name) != nil }
	release := func(name string) {
		t.Helper()
		obj := live(t, "v1", "ConfigMap", ns, name)
		if obj == nil {
			t.Fatalf("%s is gone before its finalizer was done", name)
		}
		if err := admin.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); err != nil {
			t.Fatal(err)
		}
	}

	// The prune deletes old-cr, and keeps old-operator until it is gone.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("old: false") })
	waiting := waitFor(t, a, 60*time.Second, "the prune's wave 0 waiting", func(cur *capstanv1.Addon) bool {
		return cur.Status.Wave != nil && cur.Status.Wave.Deleting && cur.Status.Wave.Wave == 0
	})
	if w := waiting.Status.Wave.Waiting; !strings.Contains(w, "ConfigMap "+ns+"/old-cr is being deleted (finalizers: example.com/hold)") {
		t.Errorf("status.wave.waiting = %q; want it to name old-cr and its finalizer", w)
	}
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if !cm("old-operator") {
			t.Fatal("the prune deleted wave 0 while wave 1 was still being deleted")
		}
	}
	// A change to the Addon ends the wait; old-cr, not gone yet, stays in
	// the inventory, so the next sync waits for it again.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.HealthTimeout = &metav1.Duration{Duration: time.Minute} })
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if !cm("old-operator") {
			t.Fatal("the sync after the change deleted wave 0 while wave 1 was still being deleted")
		}
	}
	cur := &capstanv1.Addon{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(a), cur); err != nil {
		t.Fatal(err)
	}
	held := map[string]bool{}
	for _, ref := range capstanv1.RefsOf(cur.Status.Inventory) {
		held[ref.Name] = true
	}
	if !held["old-cr"] || !held["old-operator"] {
		t.Fatalf("the inventory lost what is not deleted yet: %v", cur.Status.Inventory)
	}
	release("old-cr")
	pruned := waitFor(t, a, 60*time.Second, "the prune done", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.AppliedHash != synced.Status.AppliedHash && cur.Status.ObservedGeneration == cur.Generation
	})
	eventually(t, 30*time.Second, "old-operator pruned", func() bool { return !cm("old-operator") && !cm("old-cr") })
	if pruned.Status.Wave != nil {
		t.Errorf("status.wave = %+v after the prune", pruned.Status.Wave)
	}
	if len(pruned.Status.Inventory) != 5 {
		t.Errorf("inventory %v; want the five rendered objects", pruned.Status.Inventory)
	}

	// A prune that stalls: old-cr is not gone within spec.healthTimeout.
	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.HealthTimeout = &metav1.Duration{Duration: 3 * time.Second}
		cur.Spec.Values = jsonValues("old: true")
	})
	waitPhase(t, a, capstanv1.PhaseSynced)
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("old: false") })
	waitFor(t, a, 60*time.Second, "the prune stalled", func(cur *capstanv1.Addon) bool {
		return cur.Status.Wave != nil && cur.Status.Wave.Deleting && strings.Contains(describeStatus(cur), "is not gone after")
	})
	if !cm("old-operator") {
		t.Fatal("the stalled prune deleted wave 0")
	}

	// The uninstall of the stalled add-on runs its pre-delete hook; its
	// wave 0 waits for cr and old-cr, times out, and goes on by itself
	// once they are gone.
	if err := admin.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	stuck := waitFor(t, a, 60*time.Second, "the uninstall's wait timed out", func(cur *capstanv1.Addon) bool {
		return cur.Status.Wave != nil && cur.Status.Wave.Deleting && strings.Contains(describeStatus(cur), "DeleteFailed") &&
			strings.Contains(describeStatus(cur), "is not gone after")
	})
	if !strings.Contains(describeStatus(stuck), "ConfigMap "+ns+"/cr is being deleted (finalizers: example.com/hold)") {
		t.Errorf("the uninstall's error should name cr and its finalizer: %s", describeStatus(stuck))
	}
	backup := job(t, ns, "backup")
	if backup == nil {
		t.Fatal("the pre-delete hook did not run")
	}
	// A retry of the stalled uninstall does not run the pre-delete hook
	// again: part of the add-on is deleted already.
	update(t, a, func(cur *capstanv1.Addon) { cur.SetAnnotations(map[string]string{"example.com/poke": "1"}) })
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for _, name := range []string{"operator", "one", "two", "three", "old-operator"} {
			if !cm(name) {
				t.Fatalf("the uninstall deleted %s, of wave 0, while wave 1 was still being deleted", name)
			}
		}
		if j := job(t, ns, "backup"); j == nil || j.UID != backup.UID {
			t.Fatal("the retry of the uninstall ran the pre-delete hook again")
		}
	}
	release("cr")
	release("old-cr")
	eventually(t, 60*time.Second, "the Addon uninstalled", func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(a), &capstanv1.Addon{}))
	})
	for _, name := range []string{"operator", "cr", "one", "two", "three", "old-operator", "old-cr"} {
		if cm(name) {
			t.Errorf("the uninstall left %s", name)
		}
	}
}

// TestUninstallWaitsForAWaveWithoutAWorker: an uninstall whose wave 0
// waits for what wave 1 deleted (a custom resource its operator must
// finalize, here a ConfigMap with a finalizer) ends its reconcile and
// waits by requeueing, holding no worker: the Addon says what it waits
// for, the operator keeps running, and the controller's workers go idle.
// Once the finalizer is done, the object's deletion wakes the uninstall,
// which deletes the operator and lets the Addon go. The first look
// records that the pre-delete stage is over, so that the later ones render
// nothing and run no pre-delete hook. Over all its looks,
// each object's delete is counted once: settings, of wave 2, is found
// gone by every look after the first, and cr being deleted.
func TestUninstallWaitsForAWaveWithoutAWorker(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "uninstallwait", version: "1.0.0", files: map[string]string{
		"templates/all.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: operator\ndata: {a: b}\n---\n" +
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cr\n  annotations:\n    capstan.dev/sync-wave: \"1\"\n  finalizers: [example.com/hold]\ndata: {a: b}\n---\n" +
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  annotations:\n    capstan.dev/sync-wave: \"2\"\ndata: {a: b}\n",
	}})
	a := create(t, newAddon(controllerNS, "uw-"+ns[len(ns)-5:], url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.DeletionPolicy = capstanv1.DeletionDelete
		s.HealthTimeout = &metav1.Duration{Duration: 2 * time.Minute}
	})))
	waitPhase(t, a, capstanv1.PhaseSynced)
	cm := func(name string) bool { return live(t, "v1", "ConfigMap", ns, name) != nil }
	pruned := gauge(t, "capstan_objects_pruned_total", nil)

	if err := admin.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	want := "Uninstalling: wave 0 and the waves before it wait until what the waves after it deleted is gone: ConfigMap " + ns + "/cr is being deleted (finalizers: example.com/hold)"
	waiting := waitFor(t, a, 60*time.Second, "the uninstall waiting for cr", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseDeleting && strings.Contains(describeStatus(cur), want)
	})
	if w := waiting.Status.Wave; w == nil || !w.Deleting || w.Wave != 0 {
		t.Errorf("status.wave = %+v; want wave 0, deleting", w)
	}
	if d := waiting.Status.PreHooksDone; d == nil || d.Event != "pre-delete" {
		t.Errorf("status.preHooksDone = %+v; the looks after the first must know the pre-delete stage is over, with no hook to run", d)
	}
	idle := false
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if !cm("operator") {
			t.Fatal("the uninstall deleted the operator, of wave 0, while cr, of wave 1, was still being deleted")
		}
		if gauge(t, "controller_runtime_active_workers", map[string]string{"controller": "addon"}) == 0 {
			idle = true
		}
	}
	if !idle {
		t.Error("a worker stayed busy for 5 s while the uninstall waited; the wait should hold none")
	}

	obj := live(t, "v1", "ConfigMap", ns, "cr")
	if err := admin.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the Addon uninstalled", func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(a), &capstanv1.Addon{}))
	})
	if cm("operator") || cm("cr") || cm("settings") {
		t.Error("the uninstall left the operator, cr or settings")
	}
	if got := gauge(t, "capstan_objects_pruned_total", nil) - pruned; got != 3 {
		t.Errorf("the uninstall counted %v objects deleted; want 3, each once over all its looks", got)
	}
}

// gauge reads a metric of the suite's controller, a gauge or a counter,
// from the registry it serves: the sum of the series whose labels include
// labels, 0 when there is none.
func gauge(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			match := true
			for k, v := range labels {
				match = match && have[k] == v
			}
			if match {
				sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestAWaveIsGoneWithWhatItOwns: an uninstall deletes a wave that a lower
// one waits for in the foreground, so the wave is gone only once what it
// owns is (here a ConfigMap owned by the wave's ConfigMap, held by a
// finalizer, standing for an operator's children or a Deployment's pods),
// and the lower wave, which they may still need, stays until then. The
// last wave goes in the background.
func TestAWaveIsGoneWithWhatItOwns(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "ownedwaves", version: "1.0.0", files: map[string]string{
		"templates/all.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: base\ndata: {a: b}\n" +
			"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: parent\n  annotations:\n    capstan.dev/sync-wave: \"1\"\ndata: {a: b}\n",
	}})
	a := create(t, newAddon(controllerNS, "ow-"+ns[len(ns)-5:], url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.DeletionPolicy = capstanv1.DeletionDelete
		s.HealthTimeout = &metav1.Duration{Duration: 3 * time.Second}
	})))
	waitPhase(t, a, capstanv1.PhaseSynced)
	parent := live(t, "v1", "ConfigMap", ns, "parent")
	child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "child", Finalizers: []string{"example.com/hold"},
		// NOTE: as a controller's children are: only those block their
		// owner's deletion in the foreground.
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "parent", UID: parent.GetUID(), BlockOwnerDeletion: ptr.To(true)}}}}
	if err := admin.Create(ctx, child); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(ctx, getAddon(t, a)); err != nil {
		t.Fatal(err)
	}
	cm := func(name string) *unstructured.Unstructured { return live(t, "v1", "ConfigMap", ns, name) }
	waitFor(t, a, 60*time.Second, "the uninstall's wait for wave 1 timed out", func(cur *capstanv1.Addon) bool {
		return cur.Status.Wave != nil && cur.Status.Wave.Deleting && strings.Contains(describeStatus(cur), "is not gone after") &&
			strings.Contains(describeStatus(cur), "ConfigMap "+ns+"/parent is being deleted (the objects it owns go first)")
	})
	eventually(t, 30*time.Second, "the child being deleted", func() bool {
		c := cm("child")
		return c != nil && c.GetDeletionTimestamp() != nil
	})
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if cm("base") == nil {
			t.Fatal("the uninstall deleted wave 0 while what wave 1 owns was still being deleted")
		}
	}
	if err := admin.Patch(ctx, cm("child"), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the uninstall done", func() bool {
		return cm("base") == nil && cm("parent") == nil && apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(a), &capstanv1.Addon{}))
	})
}
