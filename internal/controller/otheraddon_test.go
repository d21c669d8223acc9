package controller_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/plan"
)

// TestAnotherAddonsObjectsAreNotTaken installs one chart as Addon first,
// then the same chart, release name and namespace as Addon second, with
// spec.adopt and allowAdoptChanges: second is Blocked, naming first, and
// changes nothing. Once first is deleted (its objects left running, the
// cluster profile's Orphan), nothing holds them, and second, woken by the
// removal, adopts them.
func TestAnotherAddonsObjectsAreNotTaken(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "shared", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\ndata:\n  from: {{ .Values.from | default \"first\" | quote }}\n",
	}})
	same := func(s *capstanv1.AddonSpec) { s.ReleaseName = "same" }
	first := create(t, newAddon(controllerNS, "first-"+ns, url, withTarget(ns), withSpec(same)))
	waitPhase(t, first, capstanv1.PhaseSynced)

	second := create(t, newAddon(controllerNS, "second-"+ns, url, withTarget(ns), withValues("from: second"), withSpec(func(s *capstanv1.AddonSpec) {
		same(s)
		s.Adopt, s.AllowAdoptChanges = true, true
	})))
	got := waitPhase(t, second, capstanv1.PhaseBlocked)
	ready := condition(got, capstanv1.ConditionReady)
	if ready.Reason != plan.ReasonOtherAddon || !strings.Contains(ready.Message, "Addon "+controllerNS+"/first-"+ns) {
		t.Fatalf("second should be Blocked naming first; Ready is %s: %s", ready.Reason, ready.Message)
	}
	if o := got.Status.Plan.Objects; len(o) == 0 || o[0].ManagedBy != controllerNS+"/first-"+ns {
		t.Errorf("the plan should name first on the object: %+v", o)
	}
	if _, err := addons.Approve(ctx, admin, client.ObjectKeyFromObject(second), ""); !errors.Is(err, addons.ErrPlanBlocked) {
		t.Errorf("approving second's plan: %v; want it refused as blocked", err)
	}
	cm := &corev1.ConfigMap{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "same-cm"}, cm); err != nil || cm.Data["from"] != "first" {
		t.Fatalf("first's ConfigMap changed while second was blocked: %v %v", cm.Data, err)
	}

	if err := admin.Delete(ctx, getAddon(t, first)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "first to be gone", func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(first), &capstanv1.Addon{}))
	})
	// Nothing changes second: first's removal wakes it, and it finds the
	// objects free. Its resync is 20 s after it was Blocked, well after
	// the bound below.
	gone := time.Now()
	waitPhase(t, second, capstanv1.PhaseSynced)
	if took := time.Since(gone); took > 12*time.Second {
		t.Errorf("second took %s to adopt the objects after first was gone; want it woken, not resynced", took.Round(time.Second))
	}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "same-cm"}, cm); err != nil || cm.Data["from"] != "second" {
		t.Fatalf("second should have adopted the ConfigMap: %v %v", cm.Data, err)
	}
}
