package controller_test

import (
	"strings"
	"testing"
	"time"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestManualSyncApprovesRandomValues installs with manualSync a chart
// that makes a new Secret with a password from randAlphaNum and a
// pre-install hook named and filled at random. Every reconcile renders new
// random values; the plan's hash covers them as a person can review them,
// so the approval of status.plan.hash still names the plan of the
// reconcile that handles it, and the install applies (Synced), with the
// random values of that render, instead of stopping as ApprovalStale.
func TestManualSyncApprovesRandomValues(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "random", version: "1.0.0", files: map[string]string{
		"templates/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  user: app\n  password: {{ randAlphaNum 16 | quote }}\n",
		"templates/seed.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: seed-{{ randAlphaNum 6 | lower }}\n  annotations:\n    helm.sh/hook: pre-install\n" +
			"data:\n  token: {{ randAlphaNum 12 | quote }}\n",
	}})
	a := create(t, newAddon(controllerNS, "random-"+ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) { s.ManualSync = true })))
	got := waitPhase(t, a, capstanv1.PhaseOutOfSync)
	if s := got.Status.Plan.Summary; s.Create != 1 || s.Hooks != 1 {
		t.Fatalf("plan %+v; want the Secret created and the hook run", s)
	}
	approved := got.Status.Plan.Hash
	got = update(t, got, func(cur *capstanv1.Addon) {
		cur.Spec.ApprovedPlan = approved
		cur.Spec.SyncRequest++
	})
	got = waitFor(t, got, 90*time.Second, "the approval to be applied or refused", func(cur *capstanv1.Addon) bool {
		c := condition(cur, capstanv1.ConditionReady)
		return cur.Status.ObservedGeneration == cur.Generation &&
			(cur.Status.Phase == capstanv1.PhaseSynced || c != nil && c.Reason == "ApprovalStale")
	})
	if got.Status.Phase != capstanv1.PhaseSynced {
		t.Fatalf("the approved plan %s was not applied: phase %s, %s; the plan is now %s",
			approved, got.Status.Phase, condition(got, capstanv1.ConditionReady).Message, got.Status.Plan.Hash)
	}
	secret := live(t, "v1", "Secret", ns, "db")
	if secret == nil {
		t.Fatal("the approved plan did not create the Secret")
	}
	if pw, _ := secret.Object["data"].(map[string]any)["password"].(string); len(pw) == 0 || strings.Contains(pw, "generated") {
		t.Errorf("the Secret's password %q; want the render's random one", pw)
	}
	if got.Status.LastApprovedPlan != approved {
		t.Errorf("status.lastApprovedPlan %q; want %s", got.Status.LastApprovedPlan, approved)
	}
	// The Secret's password is kept as it runs: the next reconcile plans
	// nothing to approve, rather than a new password.
	got = update(t, got, func(cur *capstanv1.Addon) { cur.Spec.SyncRequest++ })
	got = waitFor(t, got, 90*time.Second, "another reconcile", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == cur.Generation && cur.Status.Phase != ""
	})
	if s := got.Status.Plan.Summary; got.Status.Phase != capstanv1.PhaseSynced || s.Update != 0 || s.Create != 0 {
		t.Errorf("after the install: phase %s, plan %+v; want Synced with nothing to apply", got.Status.Phase, s)
	}
}
