package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestSyncWavesApplyInOrder: objects annotated with sync waves are applied
// lowest wave first, and a wave only once every object of the waves before
// it is Current. The sync shows the wave that waits in status.wave, and
// the plan says in which order the waves go. An object of an earlier wave
// that fails stops the sync before the later waves, changing nothing of
// them, and the sync goes on once it recovers. A wave that is not a number
// blocks the plan with nothing applied.
func TestSyncWavesApplyInOrder(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	files := func(kind, plural string) map[string]string {
		return map[string]string{
			"crds/" + plural + ".yaml": statusCRDYAML(kind, plural),
			"templates/db.yaml":        "apiVersion: example.com/v1\nkind: " + kind + "\nmetadata:\n  name: db\nspec:\n  size: 1\n",
			"templates/early.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: early\n  annotations:\n    capstan.dev/sync-wave: \"-1\"\n" +
				"data:\n  a: b\n",
			// Argo CD's name for the annotation, as a manifest written for it has.
			"templates/app.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  annotations:\n    argocd.argoproj.io/sync-wave: \"1\"\n" +
				"data:\n  greeting: {{ .Values.greeting | default \"hello\" }}\n",
			"templates/late.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: late\n  annotations:\n    capstan.dev/sync-wave: {{ .Values.lateWave | default \"2\" | quote }}\n" +
				"data:\n  a: b\n",
		}
	}
	url, _ := charts.publish(t, chart{name: "waveapp", version: "1.0.0", files: files("WaveDB", "wavedbs")})
	check := capstanv1.HealthCheck{APIVersion: "example.com/v1", Kind: "WaveDB",
		Current: "has(status.phase) && status.phase == 'Ready'", Failed: "has(status.phase) && status.phase.startsWith('Error')"}
	a := create(t, newAddon(controllerNS, "wv-"+ns[len(ns)-5:], url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.HealthChecks = []capstanv1.HealthCheck{check}
	})))
	cm := func(name string) *unstructured.Unstructured { return live(t, "v1", "ConfigMap", ns, name) }
	setPhase := func(phase string) {
		t.Helper()
		db := live(t, "example.com/v1", "WaveDB", ns, "db")
		if err := admin.Status().Patch(ctx, db, client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"`+phase+`"}}`)), client.FieldOwner("operator")); err != nil {
			t.Fatal(err)
		}
	}

	// Waves -1 and 0 are applied; wave 1 waits for the database.
	waiting := waitFor(t, a, 60*time.Second, "wave 1 waiting for the database", func(cur *capstanv1.Addon) bool {
		return cur.Status.Wave != nil && cur.Status.Wave.Wave == 1
	})
	if w := waiting.Status.Wave.Waiting; !strings.Contains(w, "WaveDB "+ns+"/db") {
		t.Errorf("status.wave.waiting = %q; want it to name the database", w)
	}
	if !hasNoticeSaying(waiting.Status.Plan, "the objects are applied in sync waves -1, 0, 1, 2 (capstan.dev/sync-wave)") {
		t.Errorf("the plan does not tell the waves: %+v", waiting.Status.Plan.Notices)
	}
	if cm("early") == nil || live(t, "example.com/v1", "WaveDB", ns, "db") == nil {
		t.Fatal("waves -1 and 0 are not applied")
	}
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if cm("app") != nil || cm("late") != nil {
			t.Fatal("a later wave was applied before the database was Current")
		}
	}
	readyAt := time.Now().Truncate(time.Second)
	setPhase("Ready")
	synced := waitPhase(t, a, capstanv1.PhaseSynced)
	app, late := cm("app"), cm("late")
	if app == nil || late == nil || app.GetCreationTimestamp().Time.Before(readyAt) {
		t.Fatalf("waves 1 and 2 after the database: app %v, late %v", app != nil, late != nil)
	}
	if synced.Status.Wave != nil {
		t.Errorf("status.wave = %+v after the sync", synced.Status.Wave)
	}

	// The database fails; an upgrade of wave 1 stops before it.
	setPhase("ErrorNoDisk")
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("greeting: bonjour") })
	failed := waitFor(t, a, 60*time.Second, "the upgrade stopped by the failed database", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseFailed && strings.Contains(readyMessage(cur),
			"wave 1 and the waves after it are not applied, since an object of a wave before it failed: WaveDB "+ns+"/db: failed")
	})
	if got, _, _ := unstructured.NestedString(cm("app").Object, "data", "greeting"); got != "hello" {
		t.Fatalf("wave 1 changed while the database failed: greeting %q", got)
	}
	if failed.Status.Wave != nil {
		t.Errorf("status.wave = %+v after the sync stopped", failed.Status.Wave)
	}
	setPhase("Ready")
	patchAnnotation(t, a, capstanv1.RefreshAnnotation, "db-recovered")
	waitFor(t, a, 60*time.Second, "the upgrade once the database recovered", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.AppliedHash != synced.Status.AppliedHash
	})
	if got, _, _ := unstructured.NestedString(cm("app").Object, "data", "greeting"); got != "bonjour" {
		t.Fatalf("greeting %q after the recovery", got)
	}

	// Wave 0 is not Current (not failed) when a change comes to wave 1
	// alone: the sync ends waiting, with nothing applied and no worker
	// held, showing the wave; the wait keeps its start over the looks, and
	// ends at spec.healthTimeout. Once wave 0 is Current the change goes.
	setPhase("Starting")
	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.Values = jsonValues("greeting: hola")
		cur.Spec.HealthTimeout = &metav1.Duration{Duration: 6 * time.Second}
	})
	deferred := waitFor(t, a, 60*time.Second, "the change to wave 1 waiting for wave 0", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseProgressing && cur.Status.Wave != nil && cur.Status.Wave.Wave == 1 && strings.Contains(readyMessage(cur),
			"wave 1 waits for the waves before it, with nothing of this sync applied yet: waiting for WaveDB "+ns+"/db")
	})
	if got, _, _ := unstructured.NestedString(cm("app").Object, "data", "greeting"); got != "bonjour" {
		t.Fatalf("a deferred wave applied %q", got)
	}
	timedOut := waitFor(t, a, 60*time.Second, "the deferred wave past spec.healthTimeout", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseFailed && strings.Contains(readyMessage(cur),
			"wave 1 and the waves after it are not applied: the waves before it are not Current after")
	})
	// NOTE: each look requeues; only a start kept over the looks ends it.
	// Status keeps it, so that the next look fails at once again.
	if w := timedOut.Status.Wave; w == nil || !w.Since.Equal(&deferred.Status.Wave.Since) || time.Since(w.Since.Time) < 6*time.Second {
		t.Errorf("the deferred wave's start: began %s, status.wave %+v after the timeout", deferred.Status.Wave.Since, w)
	}
	patchAnnotation(t, a, capstanv1.RefreshAnnotation, "still-starting")
	if again := waitFor(t, a, 30*time.Second, "the refreshed look", func(cur *capstanv1.Addon) bool {
		return cur.Status.LastHandledRefresh == "still-starting"
	}); again.Status.Phase != capstanv1.PhaseFailed {
		t.Errorf("a wave that timed out waits anew on the next look: %s", describeStatus(again))
	}
	setPhase("Ready")
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.HealthTimeout = nil })
	waitFor(t, a, 60*time.Second, "the deferred wave applied once wave 0 is Current", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Generation == cur.Status.ObservedGeneration
	})
	if got, _, _ := unstructured.NestedString(cm("app").Object, "data", "greeting"); got != "hola" {
		t.Fatalf("greeting %q once wave 0 is Current", got)
	}

	// A wave that is not a number blocks the plan.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("greeting: hola\nlateWave: soon") })
	blocked := waitPhase(t, a, capstanv1.PhaseBlocked)
	if msg := readyMessage(blocked); !strings.Contains(msg, `ConfigMap `+ns+`/late sync-wave: the capstan.dev/sync-wave annotation is "soon"; give a whole number`) {
		t.Fatalf("blocked: %q", msg)
	}
	if got := cm("late").GetAnnotations()["capstan.dev/sync-wave"]; got != "2" {
		t.Fatalf("the blocked plan changed the object: wave %q", got)
	}

	// An install into a Namespace it creates: the objects of later waves
	// wait too, though they could go ahead of the rest as inert objects.
	// Deleting the Addon while it waits ends the wait at once.
	ns2 := ns + "-new"
	url2, _ := charts.publish(t, chart{name: "waveapp2", version: "1.0.0", files: files("WaveDBTwo", "wavedbtwos")})
	b := create(t, newAddon(controllerNS, "wvn-"+ns[len(ns)-5:], url2, withTarget(ns2), withSpec(func(s *capstanv1.AddonSpec) {
		s.CreateNamespace = true
		s.HealthChecks = []capstanv1.HealthCheck{{APIVersion: "example.com/v1", Kind: "WaveDBTwo", Current: check.Current}}
	})))
	waitFor(t, b, 60*time.Second, "wave 1 of the new namespace waiting", func(cur *capstanv1.Addon) bool {
		return cur.Status.Wave != nil && cur.Status.Wave.Wave == 1
	})
	if live(t, "v1", "ConfigMap", ns2, "early") == nil || live(t, "v1", "ConfigMap", ns2, "app") != nil || live(t, "v1", "ConfigMap", ns2, "late") != nil {
		t.Fatal("in a new namespace, the waves are not applied in order")
	}
	if err := admin.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the Addon that waited to go", func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(b), &capstanv1.Addon{}))
	})
}

// TestADryRunWaitsForTheWaveThatServesItsWebhook: an operator's webhook is
// in wave 0 and its custom resource in wave 1. Once the webhook is
// registered and the operator is not running yet, the dry run of the
// custom resource cannot reach the webhook; the add-on waits for wave 0,
// Progressing, instead of failing. Once wave 0 is Current and the webhook
// still does not answer, the dry run's error stands. (The webhook names a
// Service, which the local control plane's egress guard never lets the
// API server reach: nothing leaves loopback.)
func TestADryRunWaitsForTheWaveThatServesItsWebhook(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	hook := "hookeddbs-" + ns
	url, _ := charts.publish(t, chart{name: "hookedapp", version: "1.0.0", files: map[string]string{
		"crds/hookedops.yaml": statusCRDYAML("HookedOp", "hookedops"),
		"crds/hookeddbs.yaml": crdYAML("HookedDB", "hookeddbs"),
		"templates/operator.yaml": "apiVersion: example.com/v1\nkind: HookedOp\nmetadata:\n  name: operator\nspec:\n  size: 1\n" +
			"---\napiVersion: v1\nkind: Service\nmetadata:\n  name: operator\nspec:\n  ports: [{port: 443}]\n" +
			"---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata:\n  name: " + hook + "\nwebhooks:\n" +
			"  - name: validate.hookeddbs.example.com\n    admissionReviewVersions: [v1]\n    sideEffects: None\n    failurePolicy: Fail\n    timeoutSeconds: 2\n" +
			"    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: {{ .Release.Namespace }}}}\n" +
			"    rules: [{apiGroups: [example.com], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [hookeddbs]}]\n" +
			"    clientConfig: {service: {namespace: {{ .Release.Namespace }}, name: operator, path: /validate}}\n",
		"templates/db.yaml": "apiVersion: example.com/v1\nkind: HookedDB\nmetadata:\n  name: main\n  annotations:\n    capstan.dev/sync-wave: \"1\"\nspec:\n  size: 1\n",
	}})
	t.Cleanup(func() {
		whc := &unstructured.Unstructured{}
		whc.SetAPIVersion("admissionregistration.k8s.io/v1")
		whc.SetKind("ValidatingWebhookConfiguration")
		whc.SetName(hook)
		_ = client.IgnoreNotFound(admin.Delete(context.Background(), whc))
	})
	a := create(t, newAddon(controllerNS, "wh-"+ns[len(ns)-5:], url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.HealthChecks = []capstanv1.HealthCheck{{APIVersion: "example.com/v1", Kind: "HookedOp", Current: "has(status.phase) && status.phase == 'Ready'"}}
		s.HealthTimeout = &metav1.Duration{Duration: 3 * time.Second}
	})))
	// The install: the custom resource passed its check before the webhook
	// was registered; wave 0 never turns Current, and the wait ends.
	waitFor(t, a, 60*time.Second, "the install's wait for wave 0 to end", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseFailed && strings.Contains(readyMessage(cur), "wave 1 and the waves after it are not applied: the waves before it are not Current after")
	})
	if live(t, "example.com/v1", "HookedDB", ns, "main") != nil {
		t.Fatal("wave 1 was applied")
	}
	// The next sync: the dry run cannot reach the webhook, and waits.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.HealthTimeout = &metav1.Duration{Duration: time.Minute} })
	waitFor(t, a, 60*time.Second, "the dry run waiting for wave 0", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseProgressing && cur.Status.Wave != nil && cur.Status.Wave.Wave == 1 && strings.Contains(readyMessage(cur),
			"the dry run of wave 1 calls a webhook of a wave before it that does not answer yet, so it waits for those waves: waiting for HookedOp "+ns+"/operator")
	})
	// Wave 0 is Current; the webhook still does not answer: that error stands.
	op := live(t, "example.com/v1", "HookedOp", ns, "operator")
	if err := admin.Status().Patch(ctx, op, client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"Ready"}}`)), client.FieldOwner("operator")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, a, 60*time.Second, "the dry run's error once wave 0 is Current", func(cur *capstanv1.Addon) bool {
		msg := readyMessage(cur)
		return cur.Status.Phase == capstanv1.PhaseFailed && strings.Contains(msg, "refused HookedDB "+ns+"/main in a dry run") && strings.Contains(msg, "failed calling webhook")
	})
}

// TestAWaveWaitsForItsJobToComplete: a migration Job in wave -1 holds wave
// 0 until the Job controller marks it Complete, not only until it starts
// (kstatus calls a started Job Current). Its pod is first left unscheduled
// (a node selector no node matches), so the Job runs with a pod active for
// as long as the test likes; then a Job that kwok runs to completion lets
// wave 0 go.
func TestAWaveWaitsForItsJobToComplete(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "migrateapp", version: "1.0.0", files: map[string]string{
		"templates/migrate.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate-{{ .Values.run }}\n  annotations:\n    capstan.dev/sync-wave: \"-1\"\n" +
			"spec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n" +
			"{{- if .Values.stuck }}\n      nodeSelector: {capstan.dev/no-such-node: \"true\"}\n{{- end }}\n" +
			"      containers:\n        - name: migrate\n          image: registry.example/tools:1.0\n",
		"templates/app.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata: {a: b}\n",
	}})
	a := create(t, newAddon(controllerNS, "mj-"+ns[len(ns)-5:], url, withTarget(ns), withValues("run: 1\nstuck: true")))
	job := func(name string) *unstructured.Unstructured { return live(t, "batch/v1", "Job", ns, name) }

	got := waitFor(t, a, 60*time.Second, "wave 0 waiting for the running Job, or the add-on Synced", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced || cur.Status.Wave != nil && cur.Status.Wave.Wave == 0
	})
	if got.Status.Phase == capstanv1.PhaseSynced {
		t.Fatalf("wave 0 went while the Job of wave -1 ran: %s", describeStatus(got))
	}
	if w := got.Status.Wave.Waiting; !strings.Contains(w, "Job "+ns+"/migrate-1: Job has not completed: active 1") {
		t.Errorf("status.wave.waiting = %q; want the Job, not completed", w)
	}
	if started, _, _ := unstructured.NestedString(job("migrate-1").Object, "status", "startTime"); started == "" {
		t.Fatal("the Job controller has not started the Job: the test shows nothing")
	}
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if live(t, "v1", "ConfigMap", ns, "app") != nil {
			t.Fatal("wave 0 was applied while the Job of wave -1 ran")
		}
	}

	// A Job that completes: wave 0 goes once it is Complete.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("run: 2\nstuck: false") })
	waitFor(t, a, 60*time.Second, "Synced once the Job completed", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.ObservedGeneration == cur.Generation
	})
	completed, _, _ := unstructured.NestedString(job("migrate-2").Object, "status", "completionTime")
	at, err := time.Parse(time.RFC3339, completed)
	if err != nil {
		t.Fatalf("the Job's completionTime %q: %v", completed, err)
	}
	if app := live(t, "v1", "ConfigMap", ns, "app"); app == nil || app.GetCreationTimestamp().Time.Before(at) {
		t.Fatalf("wave 0 before the Job completed at %s: %v", at, app)
	}
}

// TestAnApprovedAdoptionWaitsWithinItsSync: a manual-sync add-on adopts a
// running object of wave 0 that is not Current yet, and creates one of
// wave 1. The approved sync writes the adopted object's owner labels before
// the wait, so the next plan would adopt nothing and have another hash; the
// sync therefore waits within itself, and the approval carries it through
// once wave 0 is Current, with no second approval.
func TestAnApprovedAdoptionWaitsWithinItsSync(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	// What already runs, as the chart renders it, and not ready yet.
	db := &unstructured.Unstructured{}
	db.SetAPIVersion("v1")
	db.SetKind("ConfigMap")
	db.SetNamespace(ns)
	db.SetName("db")
	_ = unstructured.SetNestedStringMap(db.Object, map[string]string{"size": "1"}, "data")
	if err := admin.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	url, _ := charts.publish(t, chart{name: "adoptwave", version: "1.0.0", files: map[string]string{
		"templates/db.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: db\ndata:\n  size: \"1\"\n",
		"templates/app.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  annotations:\n    capstan.dev/sync-wave: \"1\"\n    ready: \"yes\"\ndata:\n  a: b\n",
	}})
	a := create(t, newAddon(controllerNS, "aw-"+ns[len(ns)-5:], url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Adopt, s.ManualSync = true, true
		s.HealthChecks = []capstanv1.HealthCheck{{APIVersion: "v1", Kind: "ConfigMap",
			Current: "has(metadata.annotations) && 'ready' in metadata.annotations"}}
	})))
	planned := waitPhase(t, a, capstanv1.PhaseOutOfSync)
	approved := planned.Status.Plan.Hash
	adopted := false
	for _, o := range planned.Status.Plan.Objects {
		adopted = adopted || (o.Name == "db" && o.Adopted)
	}
	if !adopted {
		t.Fatalf("the plan does not adopt db: %+v", planned.Status.Plan.Objects)
	}
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.ApprovedPlan = approved; cur.Spec.SyncRequest++ })
	waitFor(t, a, 60*time.Second, "wave 1 waiting for db", func(cur *capstanv1.Addon) bool {
		return cur.Status.Wave != nil && cur.Status.Wave.Wave == 1
	})
	if live(t, "v1", "ConfigMap", ns, "app") != nil {
		t.Fatal("wave 1 was applied before db was Current")
	}
	cur := live(t, "v1", "ConfigMap", ns, "db")
	cur.SetAnnotations(map[string]string{"ready": "yes"})
	if err := admin.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	synced := waitFor(t, a, 60*time.Second, "the approved sync to go on", func(cur *capstanv1.Addon) bool {
		if cur.Status.Phase == capstanv1.PhaseOutOfSync && cur.Status.Plan != nil && cur.Status.Plan.Hash != approved {
			t.Fatalf("the approval went stale: the plan's hash is %s, not the approved %s: %s", cur.Status.Plan.Hash, approved, describeStatus(cur))
		}
		return cur.Status.Phase == capstanv1.PhaseSynced
	})
	if synced.Status.LastApprovedPlan != approved || live(t, "v1", "ConfigMap", ns, "app") == nil {
		t.Errorf("the sync approved by %q (want %s); app applied: %v", synced.Status.LastApprovedPlan, approved, live(t, "v1", "ConfigMap", ns, "app") != nil)
	}
}
