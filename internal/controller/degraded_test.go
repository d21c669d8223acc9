package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// statusCRDYAML is a CRD of example.com whose status is a subresource, as
// an operator's is: writing it leaves the generation alone.
func statusCRDYAML(kind, plural string) string {
	return crdYAML(kind, plural) + "      subresources: {status: {}}\n"
}

// TestAnAddonThatStopsBeingHealthyIsDegraded: a Synced add-on whose custom
// resource reports a failure afterwards, with nothing applied, turns
// Degraded (Ready False, Healthy False) from the status change, not at the
// resync; spec.healthTimeout does not turn it Failed, not even after a
// gate held it for a while; it is Synced again when the resource recovers.
// An add-on held by manualSync reports the health of what runs in its
// Healthy condition, from the status changes too, while its phase stays
// the gate's.
func TestAnAddonThatStopsBeingHealthyIsDegraded(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "degradeapp", version: "1.0.0", files: map[string]string{
		"crds/degradeapps.yaml": statusCRDYAML("DegradeApp", "degradeapps"),
		"templates/app.yaml":    "apiVersion: example.com/v1\nkind: DegradeApp\nmetadata:\n  name: app\nspec:\n  size: {{ .Values.size | default 1 }}\n",
	}})
	check := capstanv1.HealthCheck{APIVersion: "example.com/v1", Kind: "DegradeApp",
		Current: "has(status.phase) && status.phase == 'Ready'", Failed: "has(status.phase) && status.phase.startsWith('Error')"}
	a := create(t, newAddon(controllerNS, "dg-"+ns[len(ns)-5:], url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.HealthChecks = []capstanv1.HealthCheck{check}
	})))
	// The operator, through the status subresource.
	setPhase := func(phase string) {
		t.Helper()
		app := live(t, "example.com/v1", "DegradeApp", ns, "app")
		if err := admin.Status().Patch(ctx, app, client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"`+phase+`"}}`)), client.FieldOwner("operator")); err != nil {
			t.Fatal(err)
		}
	}
	healthy := func(cur *capstanv1.Addon, status metav1.ConditionStatus, reason string) bool {
		c := condition(cur, capstanv1.ConditionHealthy)
		return c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == cur.Generation
	}
	// The look a status change queues comes within seconds; the test's
	// resync is 20 s after the last look, so a wait of 15 s sees the
	// former only.
	const soon = 15 * time.Second
	waitFor(t, a, 60*time.Second, "the wait for the resource", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseProgressing && strings.Contains(readyMessage(cur), "DegradeApp "+ns+"/app")
	})
	setPhase("Ready")
	synced := waitFor(t, a, 90*time.Second, "Synced and Healthy", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && healthy(cur, metav1.ConditionTrue, "Current")
	})
	applied := synced.Status.LastAppliedTime
	if synced.Status.FirstHealthyTime == nil || synced.Status.FirstHealthyTime.Before(applied) {
		t.Fatalf("firstHealthyTime %v, last applied %v", synced.Status.FirstHealthyTime, applied)
	}

	// The resource fails.
	setPhase("ErrorDiskFull")
	got := waitFor(t, a, soon, "Degraded soon after the failure", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseDegraded
	})
	want := "DegradeApp " + ns + "/app: failed: spec.healthChecks[0].failed is true"
	degraded := func(got *capstanv1.Addon) {
		t.Helper()
		ready := condition(got, capstanv1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != "Degraded" || !strings.Contains(ready.Message, want) {
			t.Fatalf("Ready of a Degraded add-on: %s", describeStatus(got))
		}
		if !healthy(got, metav1.ConditionFalse, "Failed") || !strings.Contains(condition(got, capstanv1.ConditionHealthy).Message, want) {
			t.Fatalf("Healthy of a Degraded add-on: %s", describeStatus(got))
		}
		for _, typ := range []string{capstanv1.ConditionStalled, capstanv1.ConditionReconciling} {
			if c := condition(got, typ); c == nil || c.Status != metav1.ConditionFalse {
				t.Fatalf("a Degraded add-on is %s: %s", typ, describeStatus(got))
			}
		}
		if !got.Status.LastAppliedTime.Equal(applied) {
			t.Fatalf("Degraded applied something: last applied %v, then %v", applied, got.Status.LastAppliedTime)
		}
	}
	degraded(got)
	// spec.healthTimeout bounds the wait after an apply, not a failure
	// long after it.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.HealthTimeout = &metav1.Duration{Duration: time.Second} })
	time.Sleep(2 * time.Second)
	degraded(waitPhase(t, a, capstanv1.PhaseDegraded))

	// A gate holds a change for a while: the phase is the gate's, Healthy
	// still says what runs. Once the change is taken back, nothing is
	// applied, and the add-on is Degraded again, not Failed.
	held := func(what string, status metav1.ConditionStatus, reason string) *capstanv1.Addon {
		t.Helper()
		return waitFor(t, a, soon, what, func(cur *capstanv1.Addon) bool {
			return cur.Status.Phase == capstanv1.PhaseOutOfSync && cur.Status.ObservedGeneration == cur.Generation && healthy(cur, status, reason)
		})
	}
	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.ManualSync = true
		cur.Spec.Values = jsonValues("size: 2")
	})
	got = held("held for approval, and failing", metav1.ConditionFalse, "Failed")
	if r := condition(got, capstanv1.ConditionReady); r == nil || r.Reason != "AwaitingApproval" {
		t.Fatalf("a held add-on whose objects fail: Ready should stay the gate's: %s", describeStatus(got))
	}
	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.ManualSync = false
		cur.Spec.Values = nil
	})
	degraded(waitPhase(t, a, capstanv1.PhaseDegraded))

	setPhase("Ready")
	waitFor(t, a, soon, "Synced again once it recovers", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && healthy(cur, metav1.ConditionTrue, "Current")
	})

	// Held again, healthy: a failure shows in Healthy from the status
	// change alone, and so does the recovery.
	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.ManualSync = true
		cur.Spec.Values = jsonValues("size: 2")
	})
	held("held for approval, and healthy", metav1.ConditionTrue, "Current")
	setPhase("ErrorDiskFull")
	held("held for approval, and failing again", metav1.ConditionFalse, "Failed")
	if spec := live(t, "example.com/v1", "DegradeApp", ns, "app").Object["spec"].(map[string]any); spec["size"] != int64(1) {
		t.Fatalf("the held change was applied: spec %v", spec)
	}
	setPhase("Ready")
	held("held for approval, and healthy again", metav1.ConditionTrue, "Current")
}

// TestAnObjectInProgressIsDegradedOnlyPastTheGrace: once a Synced add-on's
// resource goes in progress (as a Deployment does while an autoscaler or
// a rollout restart moves it), the add-on stays Synced, with no event or
// notification, and says so in its Healthy condition; only past the grace
// (spec.healthTimeout) is it Degraded, from the look it asked for at the
// grace's end, not at the resync. A failure is Degraded at once, and a
// Degraded add-on whose resource goes back to in progress stays Degraded
// until it is Current.
func TestAnObjectInProgressIsDegradedOnlyPastTheGrace(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "lapseapp", version: "1.0.0", files: map[string]string{
		"crds/lapseapps.yaml": statusCRDYAML("LapseApp", "lapseapps"),
		"templates/app.yaml":  "apiVersion: example.com/v1\nkind: LapseApp\nmetadata:\n  name: app\nspec:\n  size: 1\n",
	}})
	check := capstanv1.HealthCheck{APIVersion: "example.com/v1", Kind: "LapseApp",
		Current: "has(status.phase) && status.phase == 'Ready'", Failed: "has(status.phase) && status.phase.startsWith('Error')"}
	a := create(t, newAddon(controllerNS, "lp-"+ns[len(ns)-5:], url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.HealthChecks = []capstanv1.HealthCheck{check}
	})))
	setPhase := func(phase string) {
		t.Helper()
		app := live(t, "example.com/v1", "LapseApp", ns, "app")
		if err := admin.Status().Patch(ctx, app, client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"`+phase+`"}}`)), client.FieldOwner("operator")); err != nil {
			t.Fatal(err)
		}
	}
	healthy := func(cur *capstanv1.Addon, status metav1.ConditionStatus, reason string) bool {
		c := condition(cur, capstanv1.ConditionHealthy)
		return c != nil && c.Status == status && c.Reason == reason
	}
	waitFor(t, a, 60*time.Second, "the wait for the resource", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseProgressing && strings.Contains(readyMessage(cur), "LapseApp "+ns+"/app")
	})
	setPhase("Ready")
	waitFor(t, a, 90*time.Second, "Synced and Healthy", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && healthy(cur, metav1.ConditionTrue, "Current")
	})
	const grace = 8 * time.Second
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.HealthTimeout = &metav1.Duration{Duration: grace} })
	synced := waitFor(t, a, 30*time.Second, "Synced with the grace", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.ObservedGeneration == cur.Generation
	})

	// In progress: Synced, Healthy False, until the grace's end.
	setPhase("Scaling")
	lapsing := waitFor(t, a, 20*time.Second, "Healthy False after the status change", func(cur *capstanv1.Addon) bool {
		return !healthy(cur, metav1.ConditionTrue, "Current")
	})
	if lapsing.Status.Phase != capstanv1.PhaseSynced || !healthy(lapsing, metav1.ConditionFalse, "NotCurrent") {
		t.Fatalf("an object in progress within the grace: want Synced with Healthy False (NotCurrent): %s", describeStatus(lapsing))
	}
	if ready := condition(lapsing, capstanv1.ConditionReady); ready.Status != metav1.ConditionTrue || ready.Reason != "Synced" ||
		!strings.Contains(ready.Message, "LapseApp "+ns+"/app") || !strings.Contains(ready.Message, "is Degraded if they are not Current by") {
		t.Fatalf("Ready within the grace: %+v", ready)
	}
	if !lapsing.Status.LastAppliedTime.Equal(synced.Status.LastAppliedTime) {
		t.Fatal("the look applied something")
	}
	since := condition(lapsing, capstanv1.ConditionHealthy).LastTransitionTime.Time
	// NOTE: the resync is 20 s after the last look; only the look asked
	// for at the grace's end comes before since+18s.
	got := waitFor(t, a, time.Until(since.Add(18*time.Second)), "Degraded at the grace's end", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase != capstanv1.PhaseSynced
	})
	ready := condition(got, capstanv1.ConditionReady)
	if got.Status.Phase != capstanv1.PhaseDegraded || ready.Reason != "Degraded" || !healthy(got, metav1.ConditionFalse, "NotCurrent") {
		t.Fatalf("past the grace: want Degraded: %s", describeStatus(got))
	}
	if at := ready.LastTransitionTime.Time; at.Before(since.Add(grace)) {
		t.Fatalf("Degraded at %s, %s after the objects stopped being Current; the grace is %s", at, at.Sub(since), grace)
	}
	setPhase("Ready")
	waitFor(t, a, 20*time.Second, "Synced once Current again", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && healthy(cur, metav1.ConditionTrue, "Current")
	})

	// A failure: Degraded by the look that finds it. The grace is longer
	// now than the looks take, so that only the add-on's warning keeps it
	// Degraded below.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.HealthTimeout = &metav1.Duration{Duration: 5 * time.Minute} })
	waitFor(t, a, 30*time.Second, "Synced with the longer grace", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.ObservedGeneration == cur.Generation
	})
	setPhase("ErrorDiskFull")
	got = waitFor(t, a, 20*time.Second, "Degraded after the failure", func(cur *capstanv1.Addon) bool {
		return !healthy(cur, metav1.ConditionTrue, "Current")
	})
	if got.Status.Phase != capstanv1.PhaseDegraded || !healthy(got, metav1.ConditionFalse, "Failed") ||
		!condition(got, capstanv1.ConditionReady).LastTransitionTime.Equal(&condition(got, capstanv1.ConditionHealthy).LastTransitionTime) {
		t.Fatalf("a failure is Degraded by the look that finds it: %s", describeStatus(got))
	}
	// Back to in progress, within the grace: still Degraded.
	setPhase("Scaling")
	got = waitFor(t, a, 20*time.Second, "the look after the failure", func(cur *capstanv1.Addon) bool {
		return healthy(cur, metav1.ConditionFalse, "NotCurrent")
	})
	if got.Status.Phase != capstanv1.PhaseDegraded {
		t.Fatalf("a Degraded add-on whose object goes back to in progress: %s", describeStatus(got))
	}
	setPhase("Ready")
	waitPhase(t, a, capstanv1.PhaseSynced)
}
