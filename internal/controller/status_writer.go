package controller

import (
	"context"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/notify"
)

// The Addon's status has one writer, this file: the patch at the end of
// every reconcile that the controller's stop did not cut short
// (patchStatus), and the checkpoints a sync writes while it runs
// (checkpointStatus), for what must survive the controller stopping
// half-way: the inventory before an apply, hook progress, and the apply
// recorded before the post hooks run.

// patchStatus writes the scope's status once, at the end of a reconcile,
// and emits an event when the phase or reason changed; the notifier hears
// of the change once the status that says so is written.
func (r *AddonReconciler) patchStatus(ctx context.Context, before *capstanv1.Addon, s *scope) error {
	if s.outcome.Phase == "" || s.deleted || r.leftShard(ctx, s) {
		return nil
	}
	addon := s.addon
	keepFormer(s)
	// Every condition's message is the outcome's; the plan was masked
	// where it was built.
	s.outcome.Message = s.mask().String(s.outcome.Message)
	generation := addon.Generation
	if s.keepObserved {
		generation = addon.Status.ObservedGeneration
	}
	setConditions(&addon.Status, generation, s.outcome)
	if j := s.found.health; j != nil {
		c := j.condition(addon.Generation)
		c.Message = s.mask().String(c.Message)
		conditions.Put(&addon.Status.Conditions, c)
	}
	addon.Status.Profile = recordedProfile(&addon.Status, s.profile, s.changedObjects)
	markWarning(&addon.Status, before.Status.Phase, time.Now(), r.owesClose(ctx, addon))
	r.rememberIncidents(addon)
	key := types.NamespacedName{Namespace: addon.Namespace, Name: addon.Name}
	recordPhase(key, addon.Status.Phase)
	if addon.Status.WarningSince != nil && r.Notifier != nil {
		r.warned.Store(key, maps.Clone(addon.Labels))
	} else {
		r.warned.Delete(key)
	}
	if r.holdApplyRecord(s) {
		return nil
	}
	notice, emit := r.emitTransition(before, s)
	again := r.incidentAgain(before, s, notice)
	base := before
	if s.stored != nil {
		base = before.DeepCopy()
		base.Status = *s.stored
	}
	patch := client.MergeFrom(base)
	if data, err := patch.Data(addon); err == nil && string(data) == "{}" {
		// Nothing changed: a resync with nothing new writes nothing. A
		// transition here was written by a checkpoint.
		emit()
		r.announce(addon, notice, again)
		return nil
	}
	err := r.Client.Status().Patch(ctx, addon, patch)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		r.wrote(addon)
		// NOTE: after the write: a status that failed to be written is
		// decided again by the next reconcile, and would be posted
		// twice, and an event would say what status does not.
		emit()
		r.announce(addon, notice, again)
	}
	return err
}

// recordedProfile is the profile status.profile records: the profile of
// the last reconcile that changed the add-on's objects. A reconcile that
// changed them (changed: the inventory grown before the apply, an object
// applied, a prune sent) records the profile the controller places the
// add-on in now, as does any reconcile of an add-on that holds nothing;
// one that changed nothing keeps what status records while the inventory
// holds objects. The profile names who applied what runs, and the
// deletion follows it when that does less (Addon.DeletionPolicyFor): an
// add-on installed under the cluster profile and moved out of a trusted
// namespace's reach (a shard whose controller does not trust it, or
// --trusted-namespaces changed) keeps the cluster profile's default,
// Orphan, and is not uninstalled by a deletion nobody asked to uninstall.
// NOTE: a restricted add-on becomes cluster only once a sync under the
// cluster profile changes its objects, never because a controller
// trusted its namespace for a while: a status write that applied nothing
// (a paused reconcile, a failed fetch, a gate that held the plan) would
// otherwise flip it, and once the trust is back to normal its sync would
// be held (profileChange) and its deletion would leave its software
// running and its values Secrets released.
func recordedProfile(st *capstanv1.AddonStatus, current capstanv1.Profile, changed bool) capstanv1.Profile {
	if changed || st.Profile == "" || len(st.Inventory) == 0 {
		return current
	}
	return st.Profile
}

// emitTransition returns what emits one event when the phase or the reason
// changes, never on every loop, for the caller to call once the status
// that says so is written, and the same transition for the notifier; and, for
// the commit statuses alone, a git folder's new commit in the same phase. Messages
// carry no secret values: they come from plans, gates and errors that are
// redacted where they are made, and patchStatus masks the known secret
// values in the outcome before it comes here.
func (r *AddonReconciler) emitTransition(before *capstanv1.Addon, s *scope) (*notify.Event, func()) {
	emit := func() {}
	if r.Recorder == nil && r.Notifier == nil {
		return nil, emit
	}
	old := readyReason(before)
	same := before.Status.Phase == s.outcome.Phase && old == s.outcome.Reason
	// NOTE: a git folder's new commit that leaves the phase as it was (a
	// commit elsewhere in the repository, or an apply Ready at once) is
	// no transition, but a commit status must still name it.
	moved := s.artifact != nil && s.artifact.Tree != nil && before.Status.Version != s.addon.Status.Version
	if same && (!moved || r.Notifier == nil) {
		return nil, emit
	}
	// NOTE: a fight flips between these every cycle; recordUndo warns
	// once instead. Only an incident receiver hears of its Synced: a
	// Degraded add-on may settle through a fight.
	fought := old == reasonDriftFought && s.outcome.Phase == capstanv1.PhaseSynced
	if s.outcome.Reason == reasonDriftFought || fought && r.Notifier == nil {
		return nil, emit
	}
	kind, severity := corev1.EventTypeNormal, phaseSeverity(s.outcome.Phase)
	if severity == notify.SeverityWarning {
		kind = corev1.EventTypeWarning
	}
	if r.Recorder != nil && !same && !fought {
		addon, reason, action, message := s.addon, s.outcome.Reason, string(s.outcome.Phase), truncate(s.outcome.Message, 1000)
		emit = func() { r.Recorder.Eventf(addon, nil, kind, reason, action, "%s", message) }
	}
	if r.Notifier != nil {
		e := r.addonEvent(before, s, severity)
		e.SameState, e.IncidentOnly = same, fought
		return &e, emit
	}
	return nil, emit
}

// addonEvent is the notifier's event of the status this reconcile ends
// with, of the given severity.
func (r *AddonReconciler) addonEvent(before *capstanv1.Addon, s *scope, severity notify.Severity) notify.Event {
	st := &s.addon.Status
	e := notify.Event{Time: time.Now().UTC(), Kind: "Addon", Namespace: s.addon.Namespace, Name: s.addon.Name,
		Phase: string(s.outcome.Phase), Reason: s.outcome.Reason, Message: truncate(s.outcome.Message, 4000),
		Severity: severity, Source: st.Source, Version: st.Version, Labels: maps.Clone(s.addon.Labels)}
	if before.Status.Phase != "" {
		e.PreviousSeverity = phaseSeverity(before.Status.Phase)
	}
	if w := before.Status.WarningSince; w != nil {
		e.WarningSince = w.UTC()
	}
	if len(st.History) > 0 {
		e.Revision = st.History[0].Number
	}
	if a := s.artifact; a != nil && a.Tree != nil {
		// NOTE: this reconcile's fetch, not status.plan's: a commit
		// that failed before its plan was written is still the one
		// a commit status names.
		e.Repository, e.Commit = netguard.Redact(a.Identity.URL), a.Identity.Commit
	}
	return e
}

// notifyGone tells the incident receivers that the add-on is gone, once
// its finalizer is removed, or once it is found gone after a warning: an
// incident its failure opened is closed, since nothing is left to fix,
// and no settled state would follow. was is the severity of its last
// phase. Other receivers hear of no deletion.
func (r *AddonReconciler) notifyGone(key types.NamespacedName, lbls map[string]string, was notify.Severity) {
	if r.Notifier == nil {
		return
	}
	r.Notifier.Notify(notify.Event{Time: time.Now().UTC(), Kind: "Addon", Namespace: key.Namespace, Name: key.Name,
		Phase: notify.PhaseDeleted, Reason: notify.PhaseDeleted, Message: "The Addon was deleted.", Severity: notify.SeverityInfo,
		PreviousSeverity: was, Labels: maps.Clone(lbls), IncidentOnly: true})
}

// markWarning keeps status.warningSince: set when the add-on goes into a
// warning, or leaves one for a phase on the way (was, the phase before:
// an Addon that a Capstan without the field left failing), kept through
// the phases on the way, cleared once it is Synced, unless its close is
// owed (owesClose): an incident receiver takes it and it is not delivered
// yet. It rides in the write that changes the phase, and a healthy add-on
// never carries it.
//
// NOTE: a mark kept on a Synced add-on for its owed close says nothing of
// what follows: leaving Synced starts over (a new warning from now, or no
// mark), so neither the next failure's warningSince nor the health grace
// counts the healthy time between.
func markWarning(st *capstanv1.AddonStatus, was capstanv1.Phase, now time.Time, owed bool) {
	if was == capstanv1.PhaseSynced && st.Phase != capstanv1.PhaseSynced {
		st.WarningSince = nil
	}
	switch {
	case st.Phase == capstanv1.PhaseSynced:
		if !owed {
			st.WarningSince = nil
		}
	case st.WarningSince == nil && (phaseSeverity(st.Phase) == notify.SeverityWarning || phaseSeverity(was) == notify.SeverityWarning):
		st.WarningSince = &metav1.Time{Time: now}
	}
}

// phaseSeverity is a warning for a phase that needs a look: an add-on
// Failed, Blocked or Degraded.
func phaseSeverity(phase capstanv1.Phase) notify.Severity {
	switch phase {
	case capstanv1.PhaseFailed, capstanv1.PhaseBlocked, capstanv1.PhaseDegraded:
		return notify.SeverityWarning
	}
	return notify.SeverityInfo
}

func readyReason(a *capstanv1.Addon) string {
	return conditionReason(&a.Status, capstanv1.ConditionReady)
}

// conditionReason is the reason of one condition of a status, or "".
func conditionReason(st *capstanv1.AddonStatus, conditionType string) string {
	for _, c := range st.Conditions {
		if c.Type == conditionType {
			return c.Reason
		}
	}
	return ""
}

// checkpointStatus patches status in the middle of a reconcile: the
// inventory before an apply, hook progress, and what was applied before the
// post hooks run. The patch is computed against the status this reconcile
// knows is stored, the one it read or the last checkpoint's: the controller
// is the only writer of an Addon's status, and reconciles of one Addon never
// overlap, so reading it again would cost a request and tell nothing new.
func (r *AddonReconciler) checkpointStatus(ctx context.Context, s *scope) error {
	if r.leftShard(ctx, s) {
		return errLeftShard
	}
	stored := s.stored
	if stored == nil {
		stored = s.read
	}
	base := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: s.addon.Namespace, Name: s.addon.Name}, Status: *stored.DeepCopy()}
	next := base.DeepCopy()
	st := &next.Status
	st.Inventory, st.InventoryCluster = s.addon.Status.Inventory, s.addon.Status.InventoryCluster
	st.Hook = s.addon.Status.Hook
	st.Wave = s.addon.Status.Wave
	st.Plan = s.addon.Status.Plan
	st.AppliedHash, st.AppliedGeneration = s.addon.Status.AppliedHash, s.addon.Status.AppliedGeneration
	st.History = s.addon.Status.History
	st.AppliedAsUpgrade = s.addon.Status.AppliedAsUpgrade
	st.LastSyncRequest, st.LastApprovedPlan = s.addon.Status.LastSyncRequest, s.addon.Status.LastApprovedPlan
	st.LastAppliedTime = s.addon.Status.LastAppliedTime
	st.PendingHook = s.addon.Status.PendingHook
	st.PreHooksDone = s.addon.Status.PreHooksDone
	st.SyncFailHooks = s.addon.Status.SyncFailHooks
	st.SyncInProgress = s.addon.Status.SyncInProgress
	if st.Phase == "" {
		// The first write of a new add-on: say what it does meanwhile.
		setConditions(st, s.addon.Generation, outcome{Phase: capstanv1.PhaseProgressing, Reason: reasonApplying,
			Message: "Applying the objects, then waiting for them to become ready."})
	}
	// NOTE: with the inventory: a controller that stops once the apply
	// began leaves the profile the objects were being changed under.
	st.Profile = recordedProfile(st, s.profile, s.changedObjects)
	if err := r.Client.Status().Patch(ctx, next, client.MergeFrom(base)); err != nil {
		return err
	}
	r.wrote(next)
	// The answer is the Addon as stored now.
	s.stored = next.Status.DeepCopy()
	return nil
}

// reasonApplying is the Reconciling reason of a new add-on while its
// first apply runs.
const reasonApplying = "Applying"

// heldStatus is the status a reconcile held back (holdApplyRecord): the
// Addon it belongs to, by UID and the resourceVersion stored when it was
// held, the status itself, and when it was first held.
type heldStatus struct {
	uid     types.UID
	version string
	status  *capstanv1.AddonStatus
	since   time.Time
}

// holdApplyRecord decides whether the status that ends this reconcile
// waits for the next one. It does when a new add-on's first apply, of a
// render with no hooks, now waits for its workloads: the next reconcile
// comes as soon as one of them changes, and most of the time finds them
// ready, so the add-on goes from Applying to Synced with one status write,
// not two. A look that comes while the rollout goes on (an add-on with
// several Deployments is looked at after each one's update) holds the
// status again, up to one health poll after the first hold, so that a wait
// that lasts is written by the poll's look at the latest. Nothing is lost
// if the controller stops in between: the inventory was written before the
// apply, and a render without hooks is applied again with nothing run
// twice. An upgrade is always written at once: its stored status still
// says what ran before.
func (r *AddonReconciler) holdApplyRecord(s *scope) bool {
	if s.found.waitingFor == "" || s.outcome.Reason != reasonWaitingForWorkloads {
		return false
	}
	if s.stored != nil && s.stored.Wave != nil {
		// NOTE: the stored status says a wave waits, which is over.
		return false
	}
	since := time.Now()
	switch {
	case s.resumed:
		// The Addon as stored is still the checkpoint before the apply
		// (resumeApplyRecord checked that nothing was written since).
		if since.Sub(s.heldSince) >= r.Config.HealthPoll {
			return false
		}
		since = s.heldSince
	case !s.hooklessApply || s.stored == nil || conditionReason(s.stored, capstanv1.ConditionReady) != reasonApplying:
		return false
	}
	key := types.NamespacedName{Namespace: s.addon.Namespace, Name: s.addon.Name}
	// The checkpoint (s.stored, or the Addon a resumed look read) is the
	// last write.
	last, _ := r.written.Load(key)
	version, _ := last.(string)
	r.held.Store(key, heldStatus{uid: s.addon.UID, version: version, status: s.addon.Status.DeepCopy(), since: since})
	return true
}

// resumeApplyRecord starts the reconcile from the status the last one held
// back, when the Addon is still the one stored then (same UID, no write
// since). Its end writes that status with whatever this reconcile adds.
func (r *AddonReconciler) resumeApplyRecord(s *scope) {
	key := types.NamespacedName{Namespace: s.addon.Namespace, Name: s.addon.Name}
	v, ok := r.held.LoadAndDelete(key)
	if !ok {
		return
	}
	held := v.(heldStatus)
	if held.uid != s.addon.UID || held.version != s.addon.ResourceVersion {
		return
	}
	s.addon.Status = *held.status.DeepCopy()
	s.resumed, s.heldSince = true, held.since
}
