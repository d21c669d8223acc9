package controller_test

import (
	"slices"
	"testing"
	"time"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/values"
)

// TestRestrictedChartCannotTakeAnotherAddonsGeneratedSecret installs, in
// one namespace, a tenant's chart that renders the Secret where Capstan
// keeps the generated values of another Addon, and then that other Addon,
// whose chart generates a value. Applied, the first chart's Secret would
// carry its own Addon's label, and the second add-on could not install
// until that chart stopped rendering it. The first is Blocked with rule
// name-reserved instead, and the second installs with its generated
// Secret its own.
func TestRestrictedChartCannotTakeAnotherAddonsGeneratedSecret(t *testing.T) {
	ns := newNamespace(t)
	victim := "victim"
	squatURL, _ := charts.publish(t, chart{name: "squat", version: "1.0.0", files: map[string]string{
		"templates/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: " + values.GeneratedName(victim) + "\nstringData: {generated.yaml: \"token: chosen\"}\n",
	}})
	victimURL, _ := charts.publish(t, chart{name: "victim", version: "1.0.0", files: map[string]string{
		"values.schema.json":  `{"type":"object","properties":{"token":{"type":"string","writeOnly":true,"x-capstan-generate":{"length":24}}}}`,
		"templates/main.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-main\ndata:\n  at: main\n",
	}})
	settled := func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == cur.Generation &&
			slices.Contains([]capstanv1.Phase{capstanv1.PhaseSynced, capstanv1.PhaseBlocked, capstanv1.PhaseFailed}, cur.Status.Phase)
	}

	squat := waitFor(t, create(t, newAddon(ns, "squat", squatURL)), 90*time.Second, "the squatting chart's sync to end", settled)
	if squat.Status.Phase != capstanv1.PhaseBlocked || squat.Status.Plan == nil ||
		!slices.ContainsFunc(squat.Status.Plan.Violations, func(v capstanv1.Violation) bool {
			return v.Rule == "name-reserved" && v.Object.Kind == "Secret" && v.Object.Name == values.GeneratedName(victim)
		}) {
		t.Errorf("want the chart rendering %s Blocked with rule name-reserved; got %s", values.GeneratedName(victim), describeStatus(squat))
	}

	got := waitFor(t, create(t, newAddon(ns, victim, victimURL)), 90*time.Second, "the other add-on's sync to end", settled)
	if got.Status.Phase != capstanv1.PhaseSynced {
		t.Fatalf("the add-on whose generated Secret another chart renders did not install: %s", describeStatus(got))
	}
	s := live(t, "v1", "Secret", ns, values.GeneratedName(victim))
	if s == nil {
		t.Fatal("the generated Secret is missing")
	}
	if owner := s.GetLabels()[capstanv1.AddonLabel]; owner != victim {
		t.Errorf("the generated Secret is labelled for the add-on %q; want %q", owner, victim)
	}
}
