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

// TestAFailedObjectEndsTheWaitAfterAnApply: an object that fails while
// the add-on waits after its apply (no spec.healthTimeout set) makes the
// add-on Failed and Stalled, naming it, once the grace after the apply
// has passed, not Progressing for ever; it is Synced once the object
// recovers.
func TestAFailedObjectEndsTheWaitAfterAnApply(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "failwait", version: "1.0.0", files: map[string]string{
		"crds/failwaits.yaml": statusCRDYAML("FailWait", "failwaits"),
		"templates/app.yaml":  "apiVersion: example.com/v1\nkind: FailWait\nmetadata:\n  name: app\nspec:\n  size: 1\n",
	}})
	a := create(t, newAddon(controllerNS, "fw-"+ns[len(ns)-5:], url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.HealthChecks = []capstanv1.HealthCheck{{APIVersion: "example.com/v1", Kind: "FailWait",
			Current: "has(status.phase) && status.phase == 'Ready'", Failed: "has(status.phase) && status.phase.startsWith('Error')"}}
	})))
	// The operator, through the status subresource.
	setPhase := func(phase string) {
		t.Helper()
		app := live(t, "example.com/v1", "FailWait", ns, "app")
		if err := admin.Status().Patch(ctx, app, client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"`+phase+`"}}`)), client.FieldOwner("operator")); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, a, 60*time.Second, "the wait for the resource", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseProgressing && strings.Contains(readyMessage(cur), "FailWait "+ns+"/app")
	})
	setPhase("ErrorDiskFull")
	got := waitFor(t, a, 90*time.Second, "Failed", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseFailed
	})
	want := "FailWait " + ns + "/app: failed: spec.healthChecks[0].failed is true"
	if !strings.Contains(readyMessage(got), want) {
		t.Fatalf("the failure is not named: %s", describeStatus(got))
	}
	stalled := condition(got, capstanv1.ConditionStalled)
	if stalled == nil || stalled.Status != metav1.ConditionTrue {
		t.Fatalf("a failed wait is not Stalled: %s", describeStatus(got))
	}
	// NOTE: the grace lets a status that describes the object before the
	// apply pass; the failure counts only once it is over.
	if applied := got.Status.LastAppliedTime; applied == nil || stalled.LastTransitionTime.Sub(applied.Time) < 29*time.Second {
		t.Fatalf("Stalled at %v, within the grace after the apply at %v", stalled.LastTransitionTime, applied)
	}
	setPhase("Ready")
	waitFor(t, a, 60*time.Second, "Synced once the resource recovers", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced
	})
}
