package plan

import (
	"fmt"
	"slices"
	"strings"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
)

// State is what the gates decide on: the plan and the parts of the spec and
// status that gate it.
type State struct {
	Plan              *capstanv1.Plan
	Suspend           bool
	Adopt             bool
	AllowAdoptChanges bool
	ManualSync        bool
	SyncRequest       int64
	ApprovedPlan      string
	LastSyncRequest   int64
	// LastApprovedPlan is status.lastApprovedPlan: the approval that came
	// with the sync request last handled, used up with it.
	LastApprovedPlan string
	// AppliedPlans are the plans status.history records as applied. An
	// Addon last synced by a Capstan that did not record
	// status.lastApprovedPlan has its used approval there.
	AppliedPlans []string
	// Inventory counts the objects the add-on applied before that a prune
	// may delete: the never-delete kinds (apply.Deletable) are left out.
	// A chart's CRDs and Namespaces would otherwise make every workload a
	// small share of it.
	Inventory int
	// PruneThreshold is the share of the inventory a plan may delete
	// without an approval; 0 turns the gate off.
	PruneThreshold float64
	// Kept counts what the render no longer holds but the prune leaves
	// running (Helm's resource policy): it leaves the inventory all the
	// same, so the mass-prune gate counts it with the deletes.
	Kept int
	// Confirm names the objects the prune would delete that their
	// manifests mark to be pruned only with a person's confirmation
	// (Argo CD's Prune=confirm).
	Confirm []string
	// Windows is what spec.syncWindows say now; nil when there are none.
	Windows *Windows
	// Continuing is set when the sync goes on from hooks an earlier look
	// of the same generation left running, or from a person's sync of the
	// same generation, render and request that stopped half-way
	// (status.syncInProgress): a sync that began, which a person approved
	// and the windows let through then. Manual sync, the
	// mass-prune approval and the windows do not hold it again, as they
	// would not have stopped a sync that waited for its hooks within one
	// look; its plan is no longer the one approved only because part of it
	// ran. Every other gate still holds it, a prune to confirm included:
	// an object marked since the approval was never confirmed.
	Continuing bool
}

// StateOf is the State that the Addon a and its plan p give by
// themselves: the gates of its spec and what its status records. The
// controller adds what only it knows (sync windows, the mass-prune
// threshold, what is kept or to confirm, applied plans, a run that goes
// on); capstan plan decides on this alone.
func StateOf(a *capstanv1.Addon, p *capstanv1.Plan) State {
	s := State{
		Plan: p, Suspend: a.Spec.Suspend, Adopt: a.Spec.Adopt, AllowAdoptChanges: a.Spec.AllowAdoptChanges,
		ManualSync: a.Spec.ManualSync, SyncRequest: a.Spec.SyncRequest, ApprovedPlan: a.Spec.ApprovedPlan,
		LastSyncRequest: a.Status.LastSyncRequest, LastApprovedPlan: a.Status.LastApprovedPlan,
		Inventory: CountDeletable(capstanv1.RefsOf(a.Status.Inventory)),
	}
	if req, approved, ok := FailedRequest(a); ok {
		s.LastSyncRequest, s.LastApprovedPlan = req, approved
	}
	return s
}

// FailedRequest is the sync request whose sync began and failed for good
// (status.syncInProgress, failed) and that status does not record as
// handled yet, with the approval to record as used up with it; ok is
// false when there is none. That request was handled, and its approval
// used, as a sync that applied would have used them: the approval applied
// the plan approved as far as it went, and binds nothing more. Without
// this, an add-on installed with an approval whose pre-install hook failed
// held every plan after the fix as ApprovalStale, manualSync or not. A
// retry that goes on from the sync that began (the same spec, render and
// request, nothing more to change) is that sync still, and the controller
// judges it so (State.Continuing); any other plan is judged as any plan
// is, and with manualSync waits for its own approval. A request raised
// since is one of its own: an approval still in the spec is used up when
// it is the one the failed sync began with (a bare raise, as a hook
// failure's message advises), not when it is a new one.
func FailedRequest(a *capstanv1.Addon) (request int64, approved string, ok bool) {
	b := a.Status.SyncInProgress
	if b == nil || !b.Failed || b.SyncRequest <= a.Status.LastSyncRequest || b.SyncRequest > a.Spec.SyncRequest {
		return 0, "", false
	}
	approved = a.Status.LastApprovedPlan
	if b.SyncRequest == a.Spec.SyncRequest || a.Spec.ApprovedPlan == b.Plan {
		approved = a.Spec.ApprovedPlan
	}
	return b.SyncRequest, approved, true
}

// CountDeletable counts the references of kinds that a prune may delete.
func CountDeletable(refs []capstanv1.ObjectRef) int {
	n := 0
	for _, r := range refs {
		if apply.Deletable(r) {
			n++
		}
	}
	return n
}

// Verdict is the gates' decision.
type Verdict struct {
	// Apply is true when the plan may be applied now.
	Apply bool
	// Phase, Reason and Message describe a plan that waits; they are empty
	// when Apply is true.
	Phase   capstanv1.Phase
	Reason  string
	Message string
	// HandledSyncRequest is true when the verdict uses up spec.syncRequest.
	HandledSyncRequest bool
}

// A Gate either decides (true) or passes the plan on to the next gate.
type Gate func(State) (Verdict, bool)

// Gates are the gates in order: problems, suspend, another add-on's
// objects, adoption, mass prune, a prune to confirm, manual sync.
var Gates = []Gate{Problems, Suspended, OtherAddons, Adoption, MassPrune, ConfirmPrune, ManualSync}

// Unapprovable are the gates that stop a plan whatever a person approves:
// its problems (violations, values errors, a failed dry run) and another
// add-on's objects. An approval of a plan they stop is refused
// (addons.Reviewable): it could never apply, and since a dry run's error
// is part of the plan's hash, it would outlive the cause and hold the
// plan that follows the fix as stale.
var Unapprovable = []Gate{Problems, OtherAddons}

// Decide runs the gates in order. A plan that passes them all is applied
// when the sync windows let it (Window).
func Decide(s State) Verdict {
	for _, g := range Gates {
		if v, decided := g(s); decided {
			return Window(s, v)
		}
	}
	return Window(s, Verdict{Apply: true, HandledSyncRequest: s.SyncRequest > s.LastSyncRequest})
}

// Window is the last gate: a plan the others let through waits while the
// sync windows are closed, if it changes anything. A person's sync (an
// approval, a raised spec.syncRequest) applies then only where the
// windows that hold it say manualSync (Windows.Manual); otherwise it stays
// pending, and applies when they open.
func Window(s State, v Verdict) Verdict {
	w := s.Windows
	if !v.Apply || w == nil || w.Open || !Pending(s.Plan) || v.HandledSyncRequest && w.Manual || s.Continuing {
		return v
	}
	msg := "changes wait for a sync window (" + String(s.Plan) + "): " + w.Why
	if v.HandledSyncRequest {
		msg += "; the sync requested stays pending and applies then (a window with manualSync: true would let it apply now)"
	}
	return Verdict{Phase: capstanv1.PhaseOutOfSync, Reason: ReasonSyncWindow, Message: msg}
}

// Reasons of the verdicts, used in conditions and events.
const (
	ReasonViolations     = "GuardrailViolations"
	ReasonValuesErrors   = "ValuesErrors"
	ReasonDryRunFailed   = "DryRunFailed"
	ReasonSuspended      = "Suspended"
	ReasonAdoptChanges   = "AdoptionWouldChange"
	ReasonExists         = "ObjectsExist"
	ReasonOtherAddon     = "ManagedByAnotherAddon"
	ReasonAwaitApproval  = "AwaitingApproval"
	ReasonPruneApproval  = "PruneNeedsApproval"
	ReasonApprovalStale  = "ApprovalStale"
	ReasonApprovalNoPlan = "ApprovalWithoutPlan"
	ReasonSyncWindow     = "SyncWindowClosed"
	ReasonWindowInvalid  = "SyncWindowInvalid"
)

// Problems blocks a plan with guardrail violations or values errors, for
// ever, and fails one whose dry run failed.
func Problems(s State) (Verdict, bool) {
	p := s.Plan
	if len(p.Violations) > 0 {
		n := listedTotal(p, listedViolations, len(p.Violations))
		return Verdict{Phase: capstanv1.PhaseBlocked, Reason: ReasonViolations,
			Message: fmt.Sprintf("%d guardrail violation(s), first: %s %s: %s", n, p.Violations[0].Object.Describe(), p.Violations[0].Rule, p.Violations[0].Message)}, true
	}
	if len(p.ValuesErrors) > 0 {
		n := listedTotal(p, listedValuesErrors, len(p.ValuesErrors))
		return Verdict{Phase: capstanv1.PhaseBlocked, Reason: ReasonValuesErrors,
			Message: fmt.Sprintf("%d values error(s), first: %s: %s", n, p.ValuesErrors[0].Path, p.ValuesErrors[0].Message)}, true
	}
	for _, o := range p.Objects {
		if o.Error != "" {
			return Verdict{Phase: capstanv1.PhaseFailed, Reason: ReasonDryRunFailed,
				Message: fmt.Sprintf("the API server refused %s in a dry run, so nothing was applied: %s", o.Describe(), o.Error)}, true
		}
	}
	return Verdict{}, false
}

// Suspended makes a suspended add-on plan-only.
func Suspended(s State) (Verdict, bool) {
	if !s.Suspend {
		return Verdict{}, false
	}
	return Verdict{Phase: capstanv1.PhaseSuspended, Reason: ReasonSuspended,
		Message: "spec.suspend is true: the plan is written and nothing is applied (" + String(s.Plan) + ")"}, true
}

// OtherAddons blocks a plan that would take over objects another Addon
// applied and still holds in its inventory, whatever spec.adopt says: two
// add-ons that apply one object undo each other's changes on every sync,
// and an uninstall of either deletes what the other still runs. Helm
// refuses the same with its release's ownership metadata. A kind never
// deleted is marked only when the plan would change it (the two may share
// it as it is), and the message says so.
func OtherAddons(s State) (Verdict, bool) {
	var taken []capstanv1.PlannedObject
	for _, o := range s.Plan.Objects {
		if o.ManagedBy != "" {
			taken = append(taken, o)
		}
	}
	if len(taken) == 0 {
		return Verdict{}, false
	}
	if !apply.Deletable(taken[0].ObjectRef) {
		return Verdict{Phase: capstanv1.PhaseBlocked, Reason: ReasonOtherAddon,
			Message: fmt.Sprintf("%d object(s) shared with another add-on would change, first %s, which Addon %s holds in its inventory and applied last; add-ons may share a kind Capstan never deletes, but not apply different fields to it, or each would undo the other's on every sync. Render it here as that add-on does (the plan's diff shows how they differ), or leave it out of one of them; if that add-on no longer renders it, its next sync drops it from its inventory, and this add-on applies it then (or remove its labels %s and %s from the object)",
				len(taken), taken[0].Describe(), taken[0].ManagedBy, capstanv1.AddonLabel, capstanv1.AddonNamespaceLabel)}, true
	}
	return Verdict{Phase: capstanv1.PhaseBlocked, Reason: ReasonOtherAddon,
		Message: fmt.Sprintf("%d object(s) belong to another add-on, first %s of Addon %s, which holds it in its inventory; two add-ons cannot manage one object, and an uninstall of that one would delete it. Give this add-on another spec.releaseName or spec.targetNamespace; or, to move the object here, first take it out of the other add-on: leave it out of its render with spec.prune: true there (which deletes it; this add-on then creates it anew), or delete that Addon with deletionPolicy Orphan",
			len(taken), taken[0].Describe(), taken[0].ManagedBy)}, true
}

// Adoption blocks taking over objects that already run when that would
// change them, unless allowAdoptChanges is set, and blocks taking them over
// at all unless adopt is set.
func Adoption(s State) (Verdict, bool) {
	var existing, changing []capstanv1.PlannedObject
	for _, o := range s.Plan.Objects {
		if !o.Adopted {
			continue
		}
		existing = append(existing, o)
		if o.Action != capstanv1.ActionUnchanged {
			changing = append(changing, o)
		}
	}
	switch {
	case len(existing) > 0 && !s.Adopt:
		return Verdict{Phase: capstanv1.PhaseBlocked, Reason: ReasonExists,
			Message: fmt.Sprintf("%d object(s) already exist and this add-on did not create them, first %s; set spec.adopt: true to take them over", len(existing), existing[0].Describe())}, true
	case len(changing) > 0 && !s.AllowAdoptChanges:
		return Verdict{Phase: capstanv1.PhaseBlocked, Reason: ReasonAdoptChanges,
			Message: fmt.Sprintf("adopting would change %d running object(s), first %s; see the diffs in the plan, then fix the values or set spec.allowAdoptChanges: true", len(changing), changing[0].Describe())}, true
	}
	return Verdict{}, false
}

// MassPrune holds a plan that deletes more than the threshold's share of
// what the add-on applied, counting only what a prune may delete, until a
// sync request approves exactly its hash.
// A render that suddenly lost half its objects is more often a mistake (a
// values typo, a broken template) than an intent; Flux and Argo CD have
// both deleted clusters' software that way.
func MassPrune(s State) (Verdict, bool) {
	if s.Plan == nil || s.PruneThreshold <= 0 || s.Inventory == 0 || s.Continuing {
		return Verdict{}, false
	}
	del := s.Plan.Summary.Delete + s.Kept
	if float64(del) <= s.PruneThreshold*float64(s.Inventory) {
		return Verdict{}, false
	}
	if approval(s) == s.Plan.Hash {
		return Verdict{}, false // approved: the manual-sync gate applies it
	}
	what := fmt.Sprintf("deletes %d", del)
	if s.Kept > 0 {
		what = fmt.Sprintf("deletes %d and leaves %d running outside the inventory (marked to be kept), together %d", s.Plan.Summary.Delete, s.Kept, del)
	}
	return Verdict{Phase: capstanv1.PhaseOutOfSync, Reason: ReasonPruneApproval,
		Message: fmt.Sprintf("this plan %s of the %d objects the add-on applied, more than %.0f%%: a render that lost so much is more often a mistake than an intent; check the values and the plan, then approve it: %s",
			what, s.Inventory, s.PruneThreshold*100, approveHow(s))}, true
}

// ConfirmPrune holds a plan that deletes an object marked to be pruned only
// with a person's confirmation (Argo CD's sync option Prune=confirm, which
// manifests written for Argo CD put on what is costly to lose) until a sync
// request approves exactly its hash, as the mass-prune gate does.
func ConfirmPrune(s State) (Verdict, bool) {
	if s.Plan == nil || len(s.Confirm) == 0 {
		return Verdict{}, false
	}
	if approval(s) == s.Plan.Hash {
		return Verdict{}, false // approved: the manual-sync gate applies it
	}
	names := s.Confirm
	more := ""
	if len(names) > 5 {
		names, more = names[:5], fmt.Sprintf(" and %d more", len(s.Confirm)-5)
	}
	return Verdict{Phase: capstanv1.PhaseOutOfSync, Reason: ReasonPruneApproval,
		Message: fmt.Sprintf("this plan deletes %d object(s) whose manifests ask for a confirmation first (argocd.argoproj.io/sync-options: Prune=confirm): %s%s; check the plan, then approve it: %s",
			len(s.Confirm), strings.Join(names, ", "), more, approveHow(s))}, true
}

// ManualSync holds a plan with pending changes until a sync request approves
// exactly its hash. An approval binds without manualSync too: a pending sync
// request that names a plan hash (as installing a suspended add-on writes
// it) applies that plan and no other, so an approval always applies exactly
// the plan the approver saw. An approval used up by an earlier request binds
// nothing (approval).
func ManualSync(s State) (Verdict, bool) {
	approved := approval(s)
	if !Pending(s.Plan) || (!s.ManualSync && approved == "") || s.Continuing {
		return Verdict{}, false
	}
	if s.SyncRequest <= s.LastSyncRequest {
		return Verdict{Phase: capstanv1.PhaseOutOfSync, Reason: ReasonAwaitApproval,
			Message: "changes wait for approval (" + String(s.Plan) + "): " + approveHow(s)}, true
	}
	switch {
	case approved == s.Plan.Hash:
		return Verdict{Apply: true, HandledSyncRequest: true}, true
	case approved == "" && s.ApprovedPlan != "":
		return Verdict{Phase: capstanv1.PhaseOutOfSync, Reason: ReasonApprovalNoPlan,
			Message: "a sync was requested, but spec.approvedPlan " + s.ApprovedPlan + " is an approval an earlier sync request used up, so nothing was applied; to apply the plan, " + approveHow(s)}, true
	case approved == "":
		return Verdict{Phase: capstanv1.PhaseOutOfSync, Reason: ReasonApprovalNoPlan,
			Message: "a sync was requested without spec.approvedPlan, so nothing was applied; to apply the plan, " + approveHow(s)}, true
	default:
		msg := "spec.approvedPlan " + s.ApprovedPlan + " is not the current plan " + s.Plan.Hash +
			" (the plan changed since it was approved, or the hash was never a plan's), so nothing was applied; review the plan, then " + approveHow(s)
		if !s.ManualSync {
			msg += "; or clear spec.approvedPlan to let changes apply as they come"
		}
		return Verdict{Phase: capstanv1.PhaseOutOfSync, Reason: ReasonApprovalStale, Message: msg}, true
	}
}

// approval is the plan hash that a pending sync request approves, or ""
// when there is no pending request or it approves nothing. An approval
// counts only with the sync request it came with, as an Argo CD sync
// operation is one: spec.approvedPlan stays in the spec after its request
// is handled (the controller never writes the spec), and a later bare
// raise of spec.syncRequest, as a hook failure's message advises, must not
// find it there and hold every later plan as stale. So an approval that
// status records as used up (status.lastApprovedPlan, or a plan that
// status.history records as applied) approves nothing.
//
// NOTE: a used approval that names the current plan still counts. The same
// change came back (the live objects were put back as they were before),
// and approving it again writes exactly that spec, so the two cannot be
// told apart; what it applies is exactly what a person approved. The hash
// binds each delete to the UID of the object it deletes (Input.PruneUIDs,
// ObjectResult.RecreateUID), so an object created anew under a name the
// approved plan deleted gives another hash, and the used approval does
// not delete it.
func approval(s State) string {
	if s.SyncRequest <= s.LastSyncRequest || s.ApprovedPlan == "" {
		return ""
	}
	if s.Plan != nil && s.ApprovedPlan == s.Plan.Hash {
		return s.ApprovedPlan
	}
	if s.ApprovedPlan == s.LastApprovedPlan || slices.Contains(s.AppliedPlans, s.ApprovedPlan) {
		return ""
	}
	return s.ApprovedPlan
}

// approveHow says how to approve the current plan: by hand, with the
// sync request raised above the last one handled, or with the CLI. A
// spec.syncRequest below the last one (an older manifest applied again,
// as GitOps does) is named, since raising it by one would not be enough.
func approveHow(s State) string {
	raise := "raise spec.syncRequest"
	if s.SyncRequest < s.LastSyncRequest {
		raise = fmt.Sprintf("raise spec.syncRequest above %d (it is %d, below the last sync request handled)", s.LastSyncRequest, s.SyncRequest)
	}
	return "set spec.approvedPlan to " + s.Plan.Hash + " and " + raise + ", or run `capstan addon sync NAME -n NAMESPACE --plan " + s.Plan.Hash + "`"
}
