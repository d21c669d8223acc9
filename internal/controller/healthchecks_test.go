package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
)

// TestHealthChecksJudgeACustomResource: a custom resource that reports
// only status.phase is Current to kstatus at once; with spec.healthChecks
// the add-on waits for it, names it while it fails (waiting within the
// grace after the apply, Failed past it), and is Ready once the expression
// is true. An expression that does not compile is refused
// before anything is applied.
func TestHealthChecksJudgeACustomResource(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "healthdb", version: "1.0.0", files: map[string]string{
		"crds/healthdbs.yaml": crdYAML("HealthDB", "healthdbs"),
		"templates/db.yaml":   "apiVersion: example.com/v1\nkind: HealthDB\nmetadata:\n  name: db\nspec:\n  size: 1\n",
	}})
	check := capstanv1.HealthCheck{APIVersion: "example.com/v1", Kind: "HealthDB",
		Current: "status.phase == 'Ready'", Failed: "has(status.phase) && status.phase.startsWith('Error')"}
	a := create(t, newAddon(controllerNS, "hc-"+ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.HealthChecks = []capstanv1.HealthCheck{check}
	})))
	waiting := func(what, want string) {
		t.Helper()
		waitFor(t, a, 90*time.Second, what, func(cur *capstanv1.Addon) bool {
			return cur.Status.Phase == capstanv1.PhaseProgressing && strings.Contains(readyMessage(cur), want)
		})
	}
	waiting("the wait for the database", "HealthDB "+ns+"/db: spec.healthChecks[0].current is not true yet (spec.healthChecks[0].current names a field the object does not have (yet))")

	// Its operator reports a failure, then readiness.
	setPhase := func(phase string) {
		t.Helper()
		db := live(t, "example.com/v1", "HealthDB", ns, "db")
		if err := admin.Patch(ctx, db, client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"`+phase+`"}}`)), client.FieldOwner("operator")); err != nil {
			t.Fatal(err)
		}
	}
	setPhase("ErrorNoDisk")
	// NOTE: a failure found within the grace after the apply is waited
	// for, and one found past it fails the add-on (both name it). On a
	// slow machine the look that finds it may come past the grace, so
	// the phase asserted is the one its time calls for.
	failure := "HealthDB " + ns + "/db: failed: spec.healthChecks[0].failed is true"
	named := waitFor(t, a, 90*time.Second, "the failure named", func(cur *capstanv1.Addon) bool {
		return (cur.Status.Phase == capstanv1.PhaseProgressing || cur.Status.Phase == capstanv1.PhaseFailed) &&
			strings.Contains(readyMessage(cur), failure)
	})
	if named.Status.Phase == capstanv1.PhaseFailed {
		stalled, applied := condition(named, capstanv1.ConditionStalled), named.Status.LastAppliedTime
		// metav1.Time keeps whole seconds: a second's slack.
		if stalled == nil || applied == nil || stalled.LastTransitionTime.Sub(applied.Time) < controller.FailedGrace-time.Second {
			t.Fatalf("the failure failed the add-on within the grace (%s) after the apply at %v: %s", controller.FailedGrace, applied, describeStatus(named))
		}
		t.Logf("the failure was found past the grace after the apply: Failed, not waited for")
	}
	setPhase("Ready")
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	if c := condition(got, capstanv1.ConditionReady); c == nil || c.Status != "True" {
		t.Fatalf("Ready = %+v", c)
	}

	bad := create(t, newAddon(controllerNS, "hcbad-"+ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.ReleaseName = "bad"
		s.HealthChecks = []capstanv1.HealthCheck{{APIVersion: "example.com/v1", Kind: "HealthDB", Current: "status.phase =="}}
	})))
	failed := waitPhase(t, bad, capstanv1.PhaseFailed)
	if msg := readyMessage(failed); !strings.Contains(msg, "spec.healthChecks[0].current: ERROR: <input>:1:16: Syntax error") || strings.Contains(msg, "\n") {
		t.Fatalf("an expression that does not compile: %q", msg)
	}
	if len(failed.Status.Inventory) != 0 || failed.Status.LastAppliedTime != nil {
		t.Fatalf("an add-on with a broken check applied something: %s", describeStatus(failed))
	}
}

// TestAStatusOfAnOlderGenerationIsNotCurrent: after an upgrade changes a
// custom resource's spec, a status that still reports the previous
// generation ready does not make the add-on Synced: it waits, and says
// why, until the resource's controller reports the new generation.
func TestAStatusOfAnOlderGenerationIsNotCurrent(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "genapp", version: "1.0.0", files: map[string]string{
		"crds/genapps.yaml":  statusCRDYAML("GenApp", "genapps"),
		"templates/app.yaml": "apiVersion: example.com/v1\nkind: GenApp\nmetadata:\n  name: app\nspec:\n  size: {{ .Values.size | default 1 }}\n",
	}})
	a := create(t, newAddon(controllerNS, "gen-"+ns[len(ns)-5:], url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.HealthChecks = []capstanv1.HealthCheck{{APIVersion: "example.com/v1", Kind: "GenApp", Current: "has(status.phase) && status.phase == 'Ready'"}}
	})))
	// The operator reports the generation it acted on.
	report := func() int64 {
		t.Helper()
		app := live(t, "example.com/v1", "GenApp", ns, "app")
		patch := fmt.Sprintf(`{"status":{"phase":"Ready","observedGeneration":%d}}`, app.GetGeneration())
		if err := admin.Status().Patch(ctx, app, client.RawPatch(types.MergePatchType, []byte(patch)), client.FieldOwner("operator")); err != nil {
			t.Fatal(err)
		}
		return app.GetGeneration()
	}
	waitFor(t, a, 60*time.Second, "the wait for the resource", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseProgressing && strings.Contains(readyMessage(cur), "GenApp "+ns+"/app")
	})
	first := report()
	synced := waitPhase(t, a, capstanv1.PhaseSynced)

	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("size: 2") })
	want := fmt.Sprintf("GenApp %s/app: status.observedGeneration is %d and metadata.generation %d: its controller has not acted on the latest change yet", ns, first, first+1)
	waitFor(t, a, 60*time.Second, "the upgrade waiting for the resource's controller", func(cur *capstanv1.Addon) bool {
		return cur.Status.AppliedHash != synced.Status.AppliedHash && cur.Status.Phase == capstanv1.PhaseProgressing &&
			strings.Contains(readyMessage(cur), want)
	})
	if report() != first+1 {
		t.Fatal("the upgrade did not change the resource's spec")
	}
	waitPhase(t, a, capstanv1.PhaseSynced)
}
