package controller

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/source"
)

// TestOutcomeOf covers every phase and reason a reconcile can end with,
// from the findings and the error alone, with no client.
func TestOutcomeOf(t *testing.T) {
	verdict := func(st plan.State) plan.Verdict { return plan.Decide(st) }
	withPlan := func(p *capstanv1.Plan) plan.State { return plan.State{Plan: p} }
	changes := &capstanv1.Plan{Hash: "sha256:1", Summary: capstanv1.PlanSummary{Create: 1},
		Objects: []capstanv1.PlannedObject{{Action: capstanv1.ActionCreate}}}
	adopting := &capstanv1.Plan{Hash: "sha256:2", Summary: capstanv1.PlanSummary{Update: 1},
		Objects: []capstanv1.PlannedObject{{Action: capstanv1.ActionUpdate, Adopted: true}}}
	hookFailed := &hooks.Error{Event: "pre-install", Reason: "Failed", Message: "exit 1"}
	hookNotTaken := &hooks.Error{Event: "pre-install", Reason: hooks.ReasonCreateFailed, Message: "busy",
		Err: apierrors.NewServiceUnavailable("busy")}
	drifted := capstanv1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "apps", Name: "web"}

	cases := []struct {
		name    string
		f       findings
		stage   string
		err     error
		phase   capstanv1.Phase
		reason  string
		stalled bool
		says    string
	}{
		{name: "an Addon that is gone writes nothing"},
		{name: "paused", f: findings{paused: true}, phase: capstanv1.PhasePaused, reason: "Paused", says: capstanv1.PausedAnnotation},
		// NOTE: the hold's reason stays, so that no approval is taken
		// while it is paused, to be used up by the hold once it resumes.
		{name: "a held add-on that is paused is held still", f: findings{paused: true, profileChanged: &hold{reason: ReasonProfileChanged, blocked: true, message: "Installed under the cluster profile, but …"}},
			phase: capstanv1.PhaseBlocked, reason: "ProfileChanged", stalled: true, says: "It is paused as well (the annotation " + capstanv1.PausedAnnotation},
		{name: "uninstalling", f: findings{uninstalling: true}, phase: capstanv1.PhaseDeleting, reason: "Uninstalling"},
		{name: "uninstalling what a foreground delete took", f: findings{uninstalling: true, foreground: true}, phase: capstanv1.PhaseDeleting, reason: "Uninstalling",
			says: "pre-delete hooks and deleting the inventory. The Addon was deleted with foreground propagation"},
		{name: "waiting for dependents after a foreground delete", f: findings{dependents: []string{"apps/web"}, dependentsStay: true, foreground: true}, phase: capstanv1.PhaseDeleting, reason: "WaitingForDependents",
			stalled: true, says: "or with it. The Addon was deleted with foreground propagation"},
		{name: "waiting for dependents that are being removed too", f: findings{dependents: []string{"apps/web"}}, phase: capstanv1.PhaseDeleting, reason: "WaitingForDependents",
			says: "being removed too, are gone: apps/web"},
		{name: "waiting for a dependent whose removal is stuck", f: findings{dependents: []string{"apps/api", "apps/web"}, dependentsStuck: []string{"apps/web"}}, phase: capstanv1.PhaseDeleting, reason: "WaitingForDependents",
			stalled: true, says: "the removal of apps/web is stuck: see its status"},
		{name: "uninstalling without the delete hooks the guardrails refuse", f: findings{uninstalling: true, hooksRefused: "they break the guardrails: ConfigMap kube-system/x: namespace-not-allowed"},
			phase: capstanv1.PhaseDeleting, reason: "Uninstalling", says: "without the delete hooks, as helm uninstall --no-hooks would, since they break the guardrails: ConfigMap kube-system/x: namespace-not-allowed."},
		{name: "waiting for a wave without the delete hooks", f: findings{uninstalling: true, hooksRefused: "they break the guardrails: ConfigMap kube-system/x: namespace-not-allowed", waitingFor: "waiting for wave 1"},
			phase: capstanv1.PhaseDeleting, reason: "Uninstalling", says: "Uninstalling: waiting for wave 1. The delete hooks are not run, since they break the guardrails: ConfigMap kube-system/x: namespace-not-allowed."},
		{name: "uninstalling without the delete hooks of an unsigned chart", f: findings{uninstalling: true, hooksRefused: "the chart's signature failed (SignatureMissing): no provenance file",
			signature: &hold{reason: "SignatureMissing", blocked: true, message: "no provenance file; nothing from this chart is applied"}},
			phase: capstanv1.PhaseDeleting, reason: "Uninstalling", says: "without the delete hooks, as helm uninstall --no-hooks would, since the chart's signature failed (SignatureMissing): no provenance file."},
		{name: "a cluster add-on restricted now is held", f: findings{profileChanged: &hold{reason: ReasonProfileChanged, blocked: true, message: "Installed under the cluster profile, but …"}},
			phase: capstanv1.PhaseBlocked, reason: "ProfileChanged", stalled: true, says: "Installed under the cluster profile"},
		{name: "violations block", f: findings{gated: true, verdict: verdict(withPlan(&capstanv1.Plan{Violations: []capstanv1.Violation{{Rule: "kind"}}}))},
			phase: capstanv1.PhaseBlocked, reason: plan.ReasonViolations, stalled: true},
		{name: "values errors block", f: findings{gated: true, verdict: verdict(withPlan(&capstanv1.Plan{ValuesErrors: []capstanv1.ValuesError{{Rule: "schema"}}}))},
			phase: capstanv1.PhaseBlocked, reason: plan.ReasonValuesErrors, stalled: true},
		{name: "a dry run failed", f: findings{gated: true, verdict: verdict(withPlan(&capstanv1.Plan{Objects: []capstanv1.PlannedObject{{Action: capstanv1.ActionCreate, Error: "refused"}}}))},
			phase: capstanv1.PhaseFailed, reason: plan.ReasonDryRunFailed, stalled: true},
		{name: "suspended", f: findings{gated: true, verdict: verdict(plan.State{Plan: changes, Suspend: true})},
			phase: capstanv1.PhaseSuspended, reason: plan.ReasonSuspended},
		{name: "adoption would change", f: findings{gated: true, verdict: verdict(plan.State{Plan: adopting, Adopt: true})},
			phase: capstanv1.PhaseBlocked, reason: plan.ReasonAdoptChanges, stalled: true},
		{name: "running objects not adopted", f: findings{gated: true, verdict: verdict(plan.State{Plan: adopting})},
			phase: capstanv1.PhaseBlocked, reason: plan.ReasonExists, stalled: true},
		{name: "a sync request without an approved plan waits", f: findings{gated: true, verdict: verdict(plan.State{Plan: changes, ManualSync: true, SyncRequest: 1})},
			phase: capstanv1.PhaseOutOfSync, reason: plan.ReasonApprovalNoPlan},
		{name: "manual sync waits", f: findings{gated: true, verdict: verdict(plan.State{Plan: changes, ManualSync: true})},
			phase: capstanv1.PhaseOutOfSync, reason: plan.ReasonAwaitApproval},
		{name: "a stale approval waits", f: findings{gated: true, verdict: verdict(plan.State{Plan: changes, ManualSync: true, SyncRequest: 1, ApprovedPlan: "sha256:old"})},
			phase: capstanv1.PhaseOutOfSync, reason: plan.ReasonApprovalStale},
		{name: "fought drift waits", f: findings{driftWait: 4 * time.Second, driftFought: drifted},
			phase: capstanv1.PhaseOutOfSync, reason: reasonDriftFought, says: "Deployment apps/web"},
		{name: "a prune held for a confirmation, while workloads roll out", f: findings{held: []capstanv1.ObjectRef{drifted}, waitingFor: "waiting for Deployment apps/web", healthy: true, applied: true},
			phase: capstanv1.PhaseOutOfSync, reason: "PruneHeld", says: "left 1 object(s) running: Deployment apps/web"},
		{name: "workloads not ready", f: findings{waitingFor: "waiting for Deployment apps/web: Replicas: 0/2"},
			phase: capstanv1.PhaseProgressing, reason: "WaitingForWorkloads", says: "0/2"},
		{name: "healthy before, not now, nothing applied", f: findings{degraded: "Deployment apps/web: Available: 0/2"},
			phase: capstanv1.PhaseDegraded, reason: "Degraded", says: "0/2"},
		{name: "healthy before, rolling within the grace", f: findings{lapsing: "In sync: nothing to change. Not Current since …: Deployment apps/web: Replicas: 3/5."},
			phase: capstanv1.PhaseSynced, reason: "Synced", says: "Replicas: 3/5"},
		{name: "applied and healthy", f: findings{healthy: true, applied: true}, phase: capstanv1.PhaseSynced, reason: "Synced", says: "Applied"},
		{name: "nothing to change", f: findings{healthy: true}, phase: capstanv1.PhaseSynced, reason: "Synced", says: "nothing to change"},
		{name: "an error wins over what was found", f: findings{healthy: true, uninstalling: true}, stage: "Apply", err: errors.New("connection reset"),
			phase: capstanv1.PhaseFailed, reason: "ApplyFailed"},
		{name: "an error before any step", err: errors.New("boom"), phase: capstanv1.PhaseFailed, reason: "Failed"},
		{name: "a step's terminal judgement stalls", stage: "Fetch", err: terminal{errors.New("the credentials Secret is missing")},
			phase: capstanv1.PhaseFailed, reason: "FetchFailed", stalled: true},
		{name: "a digest mismatch stalls", stage: "Fetch", err: fmt.Errorf("fetch: %w", &source.DigestMismatchError{Source: "x", Expected: "a", Actual: "b"}),
			phase: capstanv1.PhaseFailed, reason: "FetchFailed", stalled: true},
		{name: "a broken archive stalls", stage: "Fetch", err: &source.ArchiveError{Problem: "not gzip"},
			phase: capstanv1.PhaseFailed, reason: "FetchFailed", stalled: true},
		{name: "a 404 stalls", stage: "Fetch", err: &source.FetchError{URL: "https://x", Status: 404},
			phase: capstanv1.PhaseFailed, reason: "FetchFailed", stalled: true},
		{name: "a 429 is retried", stage: "Fetch", err: &source.FetchError{URL: "https://x", Status: 429},
			phase: capstanv1.PhaseFailed, reason: "FetchFailed"},
		{name: "a 503 is retried", stage: "Fetch", err: &source.FetchError{URL: "https://x", Status: 503},
			phase: capstanv1.PhaseFailed, reason: "FetchFailed"},
		{name: "a failed hook stalls", stage: "Apply", err: hookFailed, phase: capstanv1.PhaseFailed, reason: "ApplyFailed", stalled: true},
		{name: "a hook the API server could not take is retried", stage: "Apply", err: hookNotTaken, phase: capstanv1.PhaseFailed, reason: "ApplyFailed"},
		{name: "a dry run the API server could not take is retried, Progressing", stage: "Preview",
			err:   fmt.Errorf("preview: %w", &plan.DryRunError{Ref: drifted, Message: "the server was unable to return a response in the time allotted", Err: apierrors.NewServerTimeout(schema.GroupResource{Group: "apps", Resource: "deployments"}, "patch", 1)}),
			phase: capstanv1.PhaseProgressing, reason: ReasonDryRunRetrying, says: "the API server did not answer the dry run of Deployment apps/web in time; retrying"},
		{name: "an API conflict is retried", stage: "Apply", err: apierrors.NewConflict(schema.GroupResource{Resource: "addons"}, "x", errors.New("changed")),
			phase: capstanv1.PhaseFailed, reason: "ApplyFailed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.f.gated && tc.f.verdict.Apply {
				t.Fatalf("the case's verdict applies; it must wait")
			}
			got := outcomeOf(tc.f, tc.stage, tc.err)
			if got.Phase != tc.phase || got.Reason != tc.reason || got.Stalled != tc.stalled {
				t.Errorf("outcomeOf = %s/%s stalled=%v; want %s/%s stalled=%v (%s)", got.Phase, got.Reason, got.Stalled, tc.phase, tc.reason, tc.stalled, got.Message)
			}
			if tc.phase != "" && got.Message == "" {
				t.Error("the outcome has no message")
			}
			if !strings.Contains(got.Message, tc.says) {
				t.Errorf("the message %q does not say %q", got.Message, tc.says)
			}
		})
	}
}

// TestHealthyCondition: the Healthy condition of each judgement.
func TestHealthyCondition(t *testing.T) {
	cases := []struct {
		name         string
		j            judgement
		status       string
		reason, says string
	}{
		{"nothing applied", judgement{nothing: true}, "Unknown", "NothingApplied", "Nothing is applied yet"},
		{"all current", judgement{}, "True", "Current", "Every object"},
		{"one rolling out", judgement{notCurrent: []string{"Deployment a/web: Available: 0/1"}}, "False", "NotCurrent", "0/1"},
		{"one failed", judgement{notCurrent: []string{"Job a/x: failed: BackoffLimitExceeded", "Deployment a/web: 0/1"}, failed: true},
			"False", "Failed", "BackoffLimitExceeded; Deployment"},
	}
	for _, c := range cases {
		got := c.j.condition(7)
		if string(got.Status) != c.status || got.Reason != c.reason || !strings.Contains(got.Message, c.says) ||
			got.Type != capstanv1.ConditionHealthy || got.ObservedGeneration != 7 {
			t.Errorf("%s: %+v", c.name, got)
		}
	}
}
