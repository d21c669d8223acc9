package cli

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/plan"
)

// TestSyncOfASuspendedOrPausedAddonEndsAtOnce: a suspended or paused
// add-on applies nothing, so a sync or an install of it would wait out its
// whole --timeout. The sync of a suspended one is refused before anything
// is written, and leaves no approval that a later resume would apply; the
// install of a paused one writes its approval and says, at once, that it
// waits for the annotation to go.
func TestSyncOfASuspendedOrPausedAddonEndsAtOnce(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	newAddon(t, c, ns, "held", func(a *capstanv1.Addon) { a.Spec.Suspend = true })
	newAddon(t, c, ns, "frozen", func(a *capstanv1.Addon) {
		a.Spec.Suspend = true
		a.Annotations = map[string]string{capstanv1.PausedAnnotation: "true"}
	})

	start := time.Now()
	out, err := capstan(t, cluster, "addon", "sync", "held", "-n", ns, "--timeout", "40s")
	if err == nil || !strings.Contains(err.Error(), "is suspended") || !strings.Contains(err.Error(), "capstan addon install held -n "+ns+" --plan ") {
		t.Fatalf("sync of a suspended add-on: %v; want it refused, naming the command that resumes it\n%s", err, out)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the refusal took %s", took)
	}
	if a := getAddon(t, c, ns, "held"); a.Spec.ApprovedPlan != "" || a.Spec.SyncRequest != 0 {
		t.Errorf("the refused sync left an approval: approvedPlan %q, syncRequest %d", a.Spec.ApprovedPlan, a.Spec.SyncRequest)
	}

	start = time.Now()
	out, err = capstan(t, cluster, "addon", "install", "frozen", "-n", ns, "--yes", "--timeout", "40s")
	if err == nil || !strings.Contains(err.Error(), "is paused") || strings.Contains(err.Error(), "gave up") {
		t.Fatalf("install of a paused add-on: %v; want the wait to end at once, saying it is paused\n%s", err, out)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the wait took %s", took)
	}
	if a := getAddon(t, c, ns, "frozen"); a.Spec.ApprovedPlan == "" || a.Spec.Suspend {
		t.Errorf("the install of a paused add-on should stand: approvedPlan %q, suspend %v", a.Spec.ApprovedPlan, a.Spec.Suspend)
	}
}

// TestSyncOutcome checks how a wait for a sync reads each state.
func TestSyncOutcome(t *testing.T) {
	key := client.ObjectKey{Namespace: "apps", Name: "web"}
	addon := func(change func(*capstanv1.Addon)) *capstanv1.Addon {
		a := &capstanv1.Addon{}
		a.Generation, a.Status.ObservedGeneration = 2, 2
		a.Spec.SyncRequest, a.Status.LastSyncRequest = 3, 2
		a.Status.Phase = capstanv1.PhaseOutOfSync
		change(a)
		return a
	}
	for _, tc := range []struct {
		name   string
		change func(*capstanv1.Addon)
		done   bool
		err    string
	}{
		{"synced", func(a *capstanv1.Addon) { a.Status.Phase = capstanv1.PhaseSynced }, true, ""},
		{"applying", func(*capstanv1.Addon) {}, false, ""},
		{"a new generation not yet seen", func(a *capstanv1.Addon) { a.Generation = 3 }, false, ""},
		{"failed", func(a *capstanv1.Addon) { a.Status.Phase = capstanv1.PhaseFailed }, false, "is Failed"},
		{"suspended", func(a *capstanv1.Addon) { a.Spec.Suspend = true }, false, "capstan addon get web -n apps --diff"},
		{"suspended, its plan in status", func(a *capstanv1.Addon) {
			a.Spec.Suspend = true
			a.Status.Plan = &capstanv1.Plan{Generation: a.Generation, Hash: "h2"}
		}, false, "capstan addon install web -n apps --plan h2"},
		{"suspended, in git", func(a *capstanv1.Addon) {
			a.Spec.Suspend = true
			a.Labels = map[string]string{"capstan.dev/managed-by-git": "ops"}
		}, false, "capstan addon resume web --gitops"},
		{"paused, never reconciled again", func(a *capstanv1.Addon) {
			a.Generation = 3
			a.Annotations = map[string]string{capstanv1.PausedAnnotation: "true"}
		}, false, "capstan.dev/paused-"},
		// NOTE: no promise that the approval applies once the pause
		// goes: the hold would use it up.
		{"paused, and held since its profile changed", func(a *capstanv1.Addon) {
			held("ProfileChanged")(a)
			a.Annotations = map[string]string{capstanv1.PausedAnnotation: "true"}
		}, false, "Blocked (ProfileChanged)"},
		{"approval taken", func(a *capstanv1.Addon) { a.Status.LastSyncRequest = 3 }, false, "waits for approval"},
		// The controller saw the request and did not take it up: no
		// later status raises status.lastSyncRequest without a person.
		{"approval stale", held(plan.ReasonApprovalStale), false, "waits for a person (ApprovalStale): approve again"},
		{"approval without a plan", held(plan.ReasonApprovalNoPlan), false, "waits for a person (ApprovalWithoutPlan)"},
		{"a prune to approve", held(plan.ReasonPruneApproval), false, "waits for a person (PruneNeedsApproval)"},
		{"stale, but of an older generation", func(a *capstanv1.Addon) {
			held(plan.ReasonApprovalStale)(a)
			a.Generation = 3
		}, false, ""},
	} {
		done, err := syncOutcome(addon(tc.change), key, "")
		if done != tc.done || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: done %v, error %v; want done %v, an error with %q", tc.name, done, err, tc.done, tc.err)
		}
	}
}

// held sets the Ready condition's reason, as a gate that holds the plan
// writes it, with a message that says what to do.
func held(reason string) func(*capstanv1.Addon) {
	return func(a *capstanv1.Addon) {
		a.Status.Conditions = []metav1.Condition{{Type: capstanv1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: "approve again"}}
	}
}

// TestRefreshOutcome checks how a wait for a refresh reads each state: a
// plan that waits for a person, a stale approval too, ends it at once.
func TestRefreshOutcome(t *testing.T) {
	key := client.ObjectKey{Namespace: "apps", Name: "web"}
	addon := func(change func(*capstanv1.Addon)) *capstanv1.Addon {
		a := &capstanv1.Addon{}
		a.Annotations = map[string]string{capstanv1.RefreshAnnotation: "r1"}
		a.Status.LastHandledRefresh = "r1"
		a.Spec.SyncRequest, a.Status.LastSyncRequest = 3, 2
		a.Status.Phase = capstanv1.PhaseOutOfSync
		change(a)
		return a
	}
	for _, tc := range []struct {
		name   string
		change func(*capstanv1.Addon)
		done   bool
		line   string
		err    string
	}{
		{"not yet handled", func(a *capstanv1.Addon) { a.Status.LastHandledRefresh = "" }, false, "waiting for the controller", ""},
		{"synced", func(a *capstanv1.Addon) { a.Status.Phase = capstanv1.PhaseSynced }, true, "Synced", ""},
		{"applying", func(*capstanv1.Addon) {}, false, "OutOfSync", ""},
		{"failed", func(a *capstanv1.Addon) { a.Status.Phase = capstanv1.PhaseFailed }, false, "Failed", "is Failed"},
		{"awaiting approval", func(a *capstanv1.Addon) { a.Status.LastSyncRequest = 3 }, true, "waits for approval", ""},
		{"approval stale", held(plan.ReasonApprovalStale), true, "waits for a person (ApprovalStale)", ""},
		{"a prune to approve", held(plan.ReasonPruneApproval), true, "waits for a person (PruneNeedsApproval)", ""},
	} {
		done, line, err := refreshOutcome(addon(tc.change), key, "r1")
		if done != tc.done || !strings.Contains(line, tc.line) || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: done %v, line %q, error %v; want done %v, a line with %q, an error with %q", tc.name, done, line, err, tc.done, tc.line, tc.err)
		}
	}
}
