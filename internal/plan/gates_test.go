package plan

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
)

func TestDecide(t *testing.T) {
	ref := capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "cm"}
	withPlan := func(mut func(p *capstanv1.Plan)) *capstanv1.Plan {
		p := &capstanv1.Plan{Hash: "sha256:aaa"}
		mut(p)
		return p
	}
	noChange := withPlan(func(p *capstanv1.Plan) {
		p.Objects = []capstanv1.PlannedObject{{ObjectRef: ref, Action: capstanv1.ActionUnchanged}}
		p.Summary.Unchanged = 1
	})
	create := withPlan(func(p *capstanv1.Plan) {
		p.Objects = []capstanv1.PlannedObject{{ObjectRef: ref, Action: capstanv1.ActionCreate}}
		p.Summary.Create = 1
	})
	hooksOnly := withPlan(func(p *capstanv1.Plan) { p.Summary.Hooks = 1 })
	adoptSame := withPlan(func(p *capstanv1.Plan) {
		p.Objects = []capstanv1.PlannedObject{{ObjectRef: ref, Action: capstanv1.ActionUnchanged, Adopted: true}}
		p.Summary.Unchanged = 1
	})
	adoptChange := withPlan(func(p *capstanv1.Plan) {
		p.Objects = []capstanv1.PlannedObject{{ObjectRef: ref, Action: capstanv1.ActionUpdate, Adopted: true, Diff: "-a\n+b\n"}}
		p.Summary.Update = 1
	})
	violation := withPlan(func(p *capstanv1.Plan) {
		p.Violations = []capstanv1.Violation{{Object: ref, Rule: "kind-not-allowed", Message: "no"}}
	})
	valuesErr := withPlan(func(p *capstanv1.Plan) {
		p.ValuesErrors = []capstanv1.ValuesError{{Path: "/a", Rule: "type", Message: "want string"}}
	})
	otherAddon := withPlan(func(p *capstanv1.Plan) {
		p.Objects = []capstanv1.PlannedObject{{ObjectRef: ref, Action: capstanv1.ActionUpdate, Adopted: true, ManagedBy: "team/first"}}
		p.Summary.Update = 1
	})
	dryRunErr := withPlan(func(p *capstanv1.Plan) {
		p.Objects = []capstanv1.PlannedObject{{ObjectRef: ref, Action: capstanv1.ActionCreate, Error: "invalid"}}
		p.Summary.Create = 1
	})

	tests := []struct {
		name       string
		state      State
		apply      bool
		phase      capstanv1.Phase
		reason     string
		handledReq bool
	}{
		{name: "plain change applies", state: State{Plan: create}, apply: true},
		{name: "no change applies (nothing to do)", state: State{Plan: noChange, ManualSync: true}, apply: true},
		{name: "violations block even when suspended and approved", state: State{Plan: violation, Suspend: true, ManualSync: true, SyncRequest: 1, ApprovedPlan: "sha256:aaa"}, phase: capstanv1.PhaseBlocked, reason: ReasonViolations},
		{name: "values errors block", state: State{Plan: valuesErr}, phase: capstanv1.PhaseBlocked, reason: ReasonValuesErrors},
		{name: "a failed dry run applies nothing", state: State{Plan: dryRunErr}, phase: capstanv1.PhaseFailed, reason: ReasonDryRunFailed},
		{name: "suspend is plan only", state: State{Plan: create, Suspend: true}, phase: capstanv1.PhaseSuspended, reason: ReasonSuspended},
		{name: "suspend comes before adoption", state: State{Plan: adoptChange, Suspend: true}, phase: capstanv1.PhaseSuspended, reason: ReasonSuspended},
		{name: "existing objects need adopt", state: State{Plan: adoptSame}, phase: capstanv1.PhaseBlocked, reason: ReasonExists},
		{name: "adopting unchanged objects applies", state: State{Plan: adoptSame, Adopt: true}, apply: true},
		{name: "adopting with changes blocks", state: State{Plan: adoptChange, Adopt: true}, phase: capstanv1.PhaseBlocked, reason: ReasonAdoptChanges},
		{name: "allowAdoptChanges lets it through", state: State{Plan: adoptChange, Adopt: true, AllowAdoptChanges: true}, apply: true},
		{name: "another add-on's object blocks even with adopt and allowAdoptChanges", state: State{Plan: otherAddon, Adopt: true, AllowAdoptChanges: true, ManualSync: true, SyncRequest: 1, ApprovedPlan: "sha256:aaa"}, phase: capstanv1.PhaseBlocked, reason: ReasonOtherAddon},
		{name: "suspend comes before another add-on's objects", state: State{Plan: otherAddon, Suspend: true}, phase: capstanv1.PhaseSuspended, reason: ReasonSuspended},
		{name: "adoption comes before manual sync", state: State{Plan: adoptChange, Adopt: true, ManualSync: true, SyncRequest: 1, ApprovedPlan: "sha256:aaa"}, phase: capstanv1.PhaseBlocked, reason: ReasonAdoptChanges},
		{name: "manual sync waits", state: State{Plan: create, ManualSync: true}, phase: capstanv1.PhaseOutOfSync, reason: ReasonAwaitApproval},
		{name: "hooks alone are a pending change", state: State{Plan: hooksOnly, ManualSync: true}, phase: capstanv1.PhaseOutOfSync, reason: ReasonAwaitApproval},
		{name: "an old request does not approve", state: State{Plan: create, ManualSync: true, SyncRequest: 2, LastSyncRequest: 2, ApprovedPlan: "sha256:aaa"}, phase: capstanv1.PhaseOutOfSync, reason: ReasonAwaitApproval},
		{name: "approval of this plan applies", state: State{Plan: create, ManualSync: true, SyncRequest: 3, LastSyncRequest: 2, ApprovedPlan: "sha256:aaa"}, apply: true, handledReq: true},
		{name: "approval of another plan applies nothing", state: State{Plan: create, ManualSync: true, SyncRequest: 3, LastSyncRequest: 2, ApprovedPlan: "sha256:bbb"}, phase: capstanv1.PhaseOutOfSync, reason: ReasonApprovalStale},
		{name: "without manual sync, a pending approval of this plan applies", state: State{Plan: create, SyncRequest: 1, ApprovedPlan: "sha256:aaa"}, apply: true, handledReq: true},
		{name: "without manual sync, a pending approval of another plan applies nothing", state: State{Plan: create, SyncRequest: 1, ApprovedPlan: "sha256:bbb"}, phase: capstanv1.PhaseOutOfSync, reason: ReasonApprovalStale},
		{name: "without manual sync, an approval already used binds nothing", state: State{Plan: create, SyncRequest: 1, LastSyncRequest: 1, ApprovedPlan: "sha256:bbb"}, apply: true},
		{name: "without manual sync, a request without a hash applies", state: State{Plan: create, SyncRequest: 1}, apply: true, handledReq: true},
		{name: "without manual sync, a bare request after an install's approval applies", state: State{Plan: create, SyncRequest: 2, LastSyncRequest: 1, ApprovedPlan: "sha256:install", LastApprovedPlan: "sha256:install"}, apply: true, handledReq: true},
		{name: "without manual sync, a bare request after an approval an older Capstan applied applies", state: State{Plan: create, SyncRequest: 2, LastSyncRequest: 1, ApprovedPlan: "sha256:install", AppliedPlans: []string{"sha256:later", "sha256:install"}}, apply: true, handledReq: true},
		{name: "without manual sync, a new approval after a used one still binds", state: State{Plan: create, SyncRequest: 2, LastSyncRequest: 1, ApprovedPlan: "sha256:bbb", LastApprovedPlan: "sha256:install", AppliedPlans: []string{"sha256:install"}}, phase: capstanv1.PhaseOutOfSync, reason: ReasonApprovalStale},
		{name: "a used approval of another plan approves nothing", state: State{Plan: create, ManualSync: true, SyncRequest: 3, LastSyncRequest: 2, ApprovedPlan: "sha256:bbb", LastApprovedPlan: "sha256:bbb"}, phase: capstanv1.PhaseOutOfSync, reason: ReasonApprovalNoPlan},
		{name: "a used approval of the plan that came back applies it", state: State{Plan: create, ManualSync: true, SyncRequest: 3, LastSyncRequest: 2, ApprovedPlan: "sha256:aaa", LastApprovedPlan: "sha256:aaa", AppliedPlans: []string{"sha256:aaa"}}, apply: true, handledReq: true},
		{name: "a request without a hash applies nothing", state: State{Plan: create, ManualSync: true, SyncRequest: 1}, phase: capstanv1.PhaseOutOfSync, reason: ReasonApprovalNoPlan},
		{name: "a sync request is used up by an automatic sync", state: State{Plan: create, SyncRequest: 1}, apply: true, handledReq: true},
		{name: "a sync that goes on from its hooks passes manual sync, its plan changed since the approval", state: State{Plan: create, ManualSync: true, SyncRequest: 3, LastSyncRequest: 2, ApprovedPlan: "sha256:bbb", Continuing: true}, apply: true, handledReq: true},
		{name: "a sync that goes on from its hooks passes a closed window", state: State{Plan: create, Windows: &Windows{Why: "deny window"}, Continuing: true}, apply: true},
		{name: "suspend still holds a sync that goes on", state: State{Plan: create, Suspend: true, Continuing: true}, phase: capstanv1.PhaseSuspended, reason: ReasonSuspended},
		{name: "violations still block a sync that goes on", state: State{Plan: violation, Continuing: true}, phase: capstanv1.PhaseBlocked, reason: ReasonViolations},
		{name: "a prune to confirm still holds a sync that goes on", state: State{Plan: create, Confirm: []string{"ConfigMap ns/x"}, Continuing: true}, phase: capstanv1.PhaseOutOfSync, reason: ReasonPruneApproval},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Decide(tt.state)
			if v.Apply != tt.apply || v.Phase != tt.phase || v.Reason != tt.reason || v.HandledSyncRequest != tt.handledReq {
				t.Fatalf("Decide() = %+v; want apply=%v phase=%q reason=%q handled=%v", v, tt.apply, tt.phase, tt.reason, tt.handledReq)
			}
			if !v.Apply && v.Message == "" {
				t.Fatalf("a verdict that waits must say why")
			}
		})
	}
}

func TestMassPrune(t *testing.T) {
	p := &capstanv1.Plan{Hash: "sha256:bbb", Summary: capstanv1.PlanSummary{Delete: 3, Unchanged: 1}}
	for _, tc := range []struct {
		name           string
		s              State
		apply          bool
		reason         string
		decidedByPrune bool
	}{
		{name: "3 of 4 held", s: State{Plan: p, Inventory: 4, PruneThreshold: 0.5}, reason: ReasonPruneApproval, decidedByPrune: true},
		{name: "3 of 10 passes", s: State{Plan: p, Inventory: 10, PruneThreshold: 0.5}, apply: true},
		{name: "3 of 10 and 3 kept held", s: State{Plan: p, Inventory: 10, PruneThreshold: 0.5, Kept: 3}, reason: ReasonPruneApproval, decidedByPrune: true},
		{name: "exactly half passes", s: State{Plan: p, Inventory: 6, PruneThreshold: 0.5}, apply: true},
		{name: "off", s: State{Plan: p, Inventory: 4}, apply: true},
		{name: "approved", s: State{Plan: p, Inventory: 4, PruneThreshold: 0.5, SyncRequest: 1, ApprovedPlan: "sha256:bbb"}, apply: true},
		{name: "another plan approved", s: State{Plan: p, Inventory: 4, PruneThreshold: 0.5, SyncRequest: 1, ApprovedPlan: "sha256:ccc"}, reason: ReasonPruneApproval, decidedByPrune: true},
		{name: "a used approval of another plan, bare request", s: State{Plan: p, Inventory: 4, PruneThreshold: 0.5, SyncRequest: 2, LastSyncRequest: 1, ApprovedPlan: "sha256:ccc", LastApprovedPlan: "sha256:ccc"}, reason: ReasonPruneApproval, decidedByPrune: true},
	} {
		v := Decide(tc.s)
		if v.Apply != tc.apply || (tc.reason != "" && v.Reason != tc.reason) {
			t.Errorf("%s: verdict %+v", tc.name, v)
		}
		if _, decided := MassPrune(tc.s); decided != tc.decidedByPrune {
			t.Errorf("%s: the mass-prune gate decided %v", tc.name, decided)
		}
		if tc.s.Kept > 0 && !strings.Contains(v.Message, "this plan deletes 3 and leaves 3 running outside the inventory (marked to be kept), together 6 of the 10 objects") {
			t.Errorf("%s: %q", tc.name, v.Message)
		}
	}
}

// TestConfirmPrune holds a plan that prunes an object marked Prune=confirm
// until exactly that plan is approved.
func TestConfirmPrune(t *testing.T) {
	p := &capstanv1.Plan{Hash: "sha256:bbb", Summary: capstanv1.PlanSummary{Delete: 1, Unchanged: 9}}
	confirm := []string{"ConfigMap apps/a", "ConfigMap apps/b", "ConfigMap apps/c", "ConfigMap apps/d", "ConfigMap apps/e", "ConfigMap apps/f"}
	for _, tc := range []struct {
		name  string
		s     State
		apply bool
		says  string
	}{
		{name: "nothing to confirm", s: State{Plan: p, Inventory: 10, PruneThreshold: 0.5}, apply: true},
		{name: "held", s: State{Plan: p, Inventory: 10, PruneThreshold: 0.5, Confirm: confirm[:1]},
			says: "this plan deletes 1 object(s) whose manifests ask for a confirmation first (argocd.argoproj.io/sync-options: Prune=confirm): ConfigMap apps/a; check the plan, then approve it"},
		{name: "six held, five named", s: State{Plan: p, Inventory: 10, Confirm: confirm},
			says: "ConfigMap apps/e and 1 more; check the plan"},
		{name: "approved", s: State{Plan: p, Inventory: 10, Confirm: confirm, SyncRequest: 1, ApprovedPlan: "sha256:bbb"}, apply: true},
		{name: "another plan approved", s: State{Plan: p, Inventory: 10, Confirm: confirm, SyncRequest: 1, ApprovedPlan: "sha256:ccc"}, says: "Prune=confirm"},
	} {
		v := Decide(tc.s)
		if v.Apply != tc.apply || !tc.apply && (v.Reason != ReasonPruneApproval || !strings.Contains(v.Message, tc.says)) {
			t.Errorf("%s: verdict %+v", tc.name, v)
		}
	}
}

// TestApprovalMessagesSayWhatToDo checks the messages of a manual sync's
// waits: a request number below the last one handled is named with the
// number to pass, and a stale approval under manualSync does not advise
// clearing spec.approvedPlan, which would apply nothing there.
func TestApprovalMessagesSayWhatToDo(t *testing.T) {
	p := &capstanv1.Plan{Hash: "sha256:aaa", Summary: capstanv1.PlanSummary{Create: 1},
		Objects: []capstanv1.PlannedObject{{ObjectRef: capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Name: "cm"}, Action: capstanv1.ActionCreate}}}
	behind := Decide(State{Plan: p, ManualSync: true, SyncRequest: 3, LastSyncRequest: 7})
	if !strings.Contains(behind.Message, "raise spec.syncRequest above 7 (it is 3") {
		t.Errorf("a request below the last one: %q", behind.Message)
	}
	stale := Decide(State{Plan: p, ManualSync: true, SyncRequest: 8, LastSyncRequest: 7, ApprovedPlan: "sha256:000"})
	if stale.Reason != ReasonApprovalStale || strings.Contains(stale.Message, "clear spec.approvedPlan") ||
		!strings.Contains(stale.Message, "set spec.approvedPlan to sha256:aaa") {
		t.Errorf("a stale approval under manualSync: %s %q", stale.Reason, stale.Message)
	}
	auto := Decide(State{Plan: p, SyncRequest: 8, LastSyncRequest: 7, ApprovedPlan: "sha256:000"})
	if !strings.Contains(auto.Message, "clear spec.approvedPlan") {
		t.Errorf("a stale approval without manualSync should offer clearing it: %q", auto.Message)
	}
	noPlan := Decide(State{Plan: p, ManualSync: true, SyncRequest: 8, LastSyncRequest: 7})
	if !strings.Contains(noPlan.Message, "set spec.approvedPlan to sha256:aaa") {
		t.Errorf("a request without a plan should say how to approve one: %q", noPlan.Message)
	}
	used := Decide(State{Plan: p, ManualSync: true, SyncRequest: 8, LastSyncRequest: 7, ApprovedPlan: "sha256:000", LastApprovedPlan: "sha256:000"})
	if !strings.Contains(used.Message, "spec.approvedPlan sha256:000 is an approval an earlier sync request used up") ||
		!strings.Contains(used.Message, "set spec.approvedPlan to sha256:aaa") {
		t.Errorf("a request that finds a used approval should say so, and how to approve: %q", used.Message)
	}
}

// TestMassPruneCountsOnlyDeletable weighs a prune against the part of the
// inventory a prune may delete. A chart's eight CRDs and its Namespace
// are never deleted, and stay in the inventory while it renders them:
// counted, they would make a plan that deletes
// six of its eight Deployments a small share (6 of 17) and let it through
// unapproved.
func TestMassPruneCountsOnlyDeletable(t *testing.T) {
	var crds, deployments []capstanv1.ObjectRef
	for i := range 8 {
		crds = append(crds, capstanv1.ObjectRef{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition", Name: fmt.Sprintf("widget%d.example.com", i)})
		deployments = append(deployments, capstanv1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "apps", Name: fmt.Sprintf("worker-%d", i)})
	}
	namespace := capstanv1.ObjectRef{APIVersion: "v1", Kind: "Namespace", Name: "apps"}
	inventory := slices.Concat(crds, deployments, []capstanv1.ObjectRef{namespace})
	a := &capstanv1.Addon{Status: capstanv1.AddonStatus{Inventory: capstanv1.IDsOf(inventory)}}

	for _, tc := range []struct {
		name     string
		rendered []capstanv1.ObjectRef
		held     bool
	}{
		{name: "the CRDs and two Deployments rendered", rendered: slices.Concat(crds, deployments[:2]), held: true},
		{name: "the CRDs, the Namespace and six Deployments rendered", rendered: slices.Concat(crds, deployments[:6], []capstanv1.ObjectRef{namespace})},
	} {
		in := Input{Prune: apply.PruneSet(inventory, tc.rendered), PruneUIDs: map[string]types.UID{}}
		for _, r := range in.Prune {
			in.PruneUIDs[r.Key()] = types.UID("uid-" + r.Name)
		}
		for _, r := range tc.rendered {
			in.Objects = append(in.Objects, ObjectResult{Ref: r, Comparison: Comparison{Action: capstanv1.ActionUnchanged}})
		}
		s := StateOf(a, Build(in))
		s.PruneThreshold = 0.5
		if s.Inventory != 8 {
			t.Errorf("%s: the gate counts %d objects of the inventory, want the 8 Deployments", tc.name, s.Inventory)
		}
		v := Decide(s)
		switch {
		case tc.held && (v.Apply || v.Reason != ReasonPruneApproval):
			t.Errorf("%s: deleting %d of 8 Deployments was not held for approval: %+v", tc.name, s.Plan.Summary.Delete, v)
		case tc.held && !strings.Contains(v.Message, "deletes 6 of the 8 objects"):
			t.Errorf("%s: %q", tc.name, v.Message)
		case !tc.held && !v.Apply:
			t.Errorf("%s: deleting %d of 8 Deployments was held: %+v", tc.name, s.Plan.Summary.Delete, v)
		}
	}
}

// TestOtherAddonsSaysASharedKindMayOnlyBeRenderedAlike: a kind never
// deleted that another Addon holds blocks only as a change (the preview
// marks it so), and the message says how to share it rather than how to
// move a deletable object.
func TestOtherAddonsSaysASharedKindMayOnlyBeRenderedAlike(t *testing.T) {
	ns := capstanv1.ObjectRef{APIVersion: "v1", Kind: "Namespace", Name: "shared"}
	p := &capstanv1.Plan{Objects: []capstanv1.PlannedObject{{ObjectRef: ns, Action: capstanv1.ActionUpdate, ManagedBy: "team/first"}}}
	v, stop := OtherAddons(State{Plan: p})
	if !stop || v.Phase != capstanv1.PhaseBlocked || v.Reason != ReasonOtherAddon {
		t.Fatalf("OtherAddons = %+v, %v; want Blocked %s", v, stop, ReasonOtherAddon)
	}
	for _, want := range []string{"Namespace shared", "team/first", "may share a kind Capstan never deletes", "Render it here as that add-on does", capstanv1.AddonLabel} {
		if !strings.Contains(v.Message, want) {
			t.Errorf("message %q lacks %q", v.Message, want)
		}
	}
	if strings.Contains(v.Message, "which deletes it") {
		t.Errorf("message %q speaks of a delete Capstan never makes of this kind", v.Message)
	}
}

// TestFailedApprovedSyncReleasesItsApproval installs an add-on with an
// approval (spec.approvedPlan H1, a raised spec.syncRequest) whose sync
// began and failed for good, as a pre-install hook that fails does. The
// fixed values give plan H2: without manualSync it applies, as any change
// does; with manualSync it waits for its own approval, never applied by
// H1's. A sync that began and has not failed (a controller stopped
// half-way) keeps the approval binding, and a retry raised since is a
// request of its own.
func TestFailedApprovedSyncReleasesItsApproval(t *testing.T) {
	h2 := &capstanv1.Plan{Hash: "sha256:h2", Summary: capstanv1.PlanSummary{Create: 3, Hooks: 1}}
	addon := func(manual, failed bool, request int64, approved string) *capstanv1.Addon {
		a := &capstanv1.Addon{}
		a.Spec.ManualSync, a.Spec.ApprovedPlan, a.Spec.SyncRequest = manual, approved, request
		a.Status.SyncInProgress = &capstanv1.SyncInProgress{Plan: "sha256:h1", SyncRequest: 1, Failed: failed}
		return a
	}
	for _, tc := range []struct {
		name       string
		a          *capstanv1.Addon
		apply      bool
		reason     string
		handlesReq bool
	}{
		{"failed, no manualSync: the fix applies", addon(false, true, 1, "sha256:h1"), true, "", false},
		{"failed, manualSync: the fix waits for its own approval", addon(true, true, 1, "sha256:h1"), false, ReasonAwaitApproval, false},
		{"stopped, not failed: the approval binds", addon(false, false, 1, "sha256:h1"), false, ReasonApprovalStale, false},
		{"failed, then a bare raise: the request applies", addon(false, true, 2, "sha256:h1"), true, "", true},
		{"failed, then a bare raise with manualSync: nothing approved", addon(true, true, 2, "sha256:h1"), false, ReasonApprovalNoPlan, false},
		{"failed, then the fix approved: it applies", addon(true, true, 2, "sha256:h2"), true, "", true},
		{"failed, then another plan approved: it binds", addon(false, true, 2, "sha256:h3"), false, ReasonApprovalStale, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Decide(StateOf(tc.a, h2))
			if v.Apply != tc.apply || v.Reason != tc.reason || v.HandledSyncRequest != tc.handlesReq {
				t.Errorf("Decide = apply %v, reason %q, handles the request %v (%s); want %v, %q, %v",
					v.Apply, v.Reason, v.HandledSyncRequest, v.Message, tc.apply, tc.reason, tc.handlesReq)
			}
		})
	}
}

// TestPruneOfAGoneObjectIsNoDelete: a prune of inventory entries whose
// objects the preview found gone (no UID read: deleted by hand, or never
// created by an install that stopped before them) deletes nothing. The
// plan counts no delete and lists none, but names them in a notice; it is
// not pending, so manual sync does not ask for approval of it, and the
// mass-prune gate does not hold it. The entries stay in the hash, so that
// the approval of a plan that found one gone does not cover the plan that
// reads it back.
func TestPruneOfAGoneObjectIsNoDelete(t *testing.T) {
	cm := func(name string) capstanv1.ObjectRef {
		return capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: name}
	}
	kept := ObjectResult{Ref: cm("kept"), Comparison: Comparison{Action: capstanv1.ActionUnchanged}}
	in := Input{Objects: []ObjectResult{kept}, Prune: []capstanv1.ObjectRef{cm("a"), cm("b"), cm("c")}}
	p := Build(in)
	if p.Summary.Delete != 0 || Pending(p) {
		t.Fatalf("a prune of objects found gone: summary %+v, pending %v; want no delete and nothing pending", p.Summary, Pending(p))
	}
	for _, o := range p.Objects {
		if o.Action == capstanv1.ActionDelete {
			t.Errorf("the plan lists the delete of %s, which is gone", o.Describe())
		}
	}
	if len(p.Notices) != 1 || !strings.Contains(p.Notices[0].Message, "3 object(s) of the inventory that the render no longer applies are gone already") ||
		!strings.Contains(p.Notices[0].Message, "ConfigMap apps/a") || !strings.Contains(p.Notices[0].Message, "the sync deletes nothing") {
		t.Errorf("notices %+v; want one that names the objects gone and says nothing is deleted", p.Notices)
	}
	s := State{Plan: p, Inventory: 4, PruneThreshold: 0.5, ManualSync: true}
	if _, decided := MassPrune(s); decided {
		t.Error("the mass-prune gate holds a plan that deletes nothing")
	}
	if v := Decide(s); !v.Apply {
		t.Errorf("a manual-sync add-on waits to drop gone objects from its inventory: %+v", v)
	}

	in.PruneUIDs = map[string]types.UID{cm("a").Key(): "uid-a"}
	back := Build(in)
	if back.Hash == p.Hash {
		t.Error("a plan that reads back an object it found gone hashes as the one that found it gone")
	}
	if back.Summary.Delete != 1 || !Pending(back) || !strings.Contains(back.Notices[0].Message, "2 object(s)") {
		t.Errorf("summary %+v, notices %+v; want the delete of a and a notice of the 2 others gone", back.Summary, back.Notices)
	}
	if v := Decide(State{Plan: back, Inventory: 4, PruneThreshold: 0.5, ManualSync: true}); v.Apply || v.Reason != ReasonAwaitApproval {
		t.Errorf("the delete of an object that runs was not held for approval: %+v", v)
	}
}
