package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/ignore"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/render"
	"capstan.dev/capstan/internal/values"
)

// applyPlan applies an approved plan with apply.Sequence: the inventory
// first (so a crash orphans nothing), CRDs and Namespaces on an install
// (hooks may need them), pre hooks, the rest, prune, post hooks. It runs the
// hooks and writes the status checkpoints the sequence calls for.
func (r *AddonReconciler) applyPlan(ctx context.Context, s *scope) (bool, error) {
	log := logf.FromContext(ctx)
	if err := r.beginSync(ctx, s); err != nil {
		return false, err
	}
	// An add-on a restricted apply owned drops those owner references
	// before anything of it changes under the cluster profile.
	if err := r.disownBeforeCluster(ctx, s); err != nil {
		return false, err
	}
	var changed, unverified []*unstructured.Unstructured
	changedNow := map[*unstructured.Unstructured]bool{}
	recreate := map[*unstructured.Unstructured]types.UID{}
	adopted := map[capstanv1.ObjectRef]apply.Adoption{}
	creates := map[*unstructured.Unstructured]bool{}
	for i, obj := range s.objects {
		if s.previews[i].Action != capstanv1.ActionUnchanged {
			changed = append(changed, obj)
			changedNow[obj] = true
		}
		if s.previews[i].Action == capstanv1.ActionCreate {
			creates[obj] = true
		}
		if s.previews[i].Unverified {
			unverified = append(unverified, obj)
		}
		// NOTE: a kind never deleted that another add-on holds is shared:
		// its labels only steer deletes, so the adoption leaves the
		// other's in place, and neither takes it from the other on every
		// sync.
		if p := s.previews[i]; p.Adopted && p.Action == capstanv1.ActionUnchanged && s.sharedWith[p.Ref.Key()] == "" {
			if live := s.live[p.Ref.Key()]; live != nil {
				owned := p.Owned
				if keepsOwners(s, obj) {
					owned = nil
				}
				adopted[p.Ref] = apply.Adoption{UID: live.GetUID(), Fields: owned}
			}
		}
		if s.previews[i].Recreate {
			// NOTE: the delete is bound to the object the plan saw, whose
			// UID the plan's hash covers.
			recreate[obj] = s.previews[i].RecreateUID
		}
	}
	pre, post := s.events()
	// A run whose end a stopped look recorded may have left its
	// hook-succeeded objects: they go before any hook runs again, so that
	// no new run applies over a stale one. One whose delete fails (a
	// finalizer no one removes) holds this sync only when a hook of it
	// would make the same object; else the record keeps it, and the next
	// look tries again.
	if err := r.cleanUpBeforeHooks(ctx, s, pre, post); err != nil {
		return false, err
	}
	now := time.Now()
	// The apply makes the inventory the target cluster's: one in a former
	// cluster is left there (inventory_cluster.go).
	s.addon.Status.InventoryCluster = s.cluster.inventoryCluster()
	r.leaveFormer(s, "Apply", clusterName(s.cluster.server))
	seq := apply.Sequence{
		Applier: s.applier, Inventory: capstanv1.RefsOf(s.addon.Status.Inventory), Objects: s.objects, Changed: changed,
		Install: s.lifecycle == LifecycleInstall, Prune: s.prune, Holder: r.holder(s), PreEvent: pre, PostEvent: post,
		Keep: s.keepFrom(apply.Pruning), Kept: slices.Concat(sparedRefs(slices.Concat(s.kept, s.notOurs)), s.released), Confirmed: s.confirm,
		PruneUIDs: plannedUIDs(s),
		AwaitGone: r.awaitGone(s, false), Unverified: unverified, Creates: creates, Recreate: recreate, Adopted: adopted, OwnerLabels: s.addon.OwnerLabels(), HasPreHooks: s.hasHooks(pre), Refused: plan.RedactAPIError,
		KeepOwners: func(obj *unstructured.Unstructured) bool { return keepsOwners(s, obj) },
		// NOTE: with no pre hooks there is nothing a restart could run
		// twice, and so no checkpoint to write (runEvent calls no done).
		PreHooks: func(ctx context.Context) error {
			return r.runHooks(ctx, s, pre, func(ctx context.Context, run string, objs []capstanv1.ObjectRef) error {
				// Tests stop here, as a controller killed before it
				// recorded the pre hooks would: status.hook still names
				// the last one.
				if err := r.stepHook(ctx, s, "record "+pre); err != nil {
					return err
				}
				// Recorded at once, before the hook-succeeded objects are
				// deleted (runEvent): a sync stopped before the apply is
				// recorded must not run these hooks again.
				s.addon.Status.Hook = nil
				s.addon.Status.PreHooksDone = s.doneRecord(pre, s.render.Hash, run, objs)
				return r.checkpointStatus(ctx, s)
			})
		},
		PostHooks: func(ctx context.Context) error {
			// NOTE: the apply's record (recordApply) hands the objects a
			// failed run of the pending event kept for its retry to
			// status.preHooksDone when this run does not go on from it.
			// They go before this run's hooks: a hook of this event that
			// makes one of them would apply over it, and read another
			// run's Job as its own success.
			if err := r.cleanUpBeforeHooks(ctx, s, "", post); err != nil {
				return err
			}
			return r.runHooks(ctx, s, post, r.recordPost(s, post))
		},
		SaveInventory: func(ctx context.Context, inventory []capstanv1.ObjectRef) error {
			s.addon.Status.Inventory = capstanv1.IDsOf(inventory)
			// The apply begins: the checkpoint records the profile it
			// applies under with the inventory (recordedProfile).
			s.changedObjects = true
			return r.checkpointStatus(ctx, s)
		},
		OnApplied: func(obj, live *unstructured.Unstructured) {
			// The API server's answer is the live object: a dry run of the
			// same manifest against it would find it unchanged.
			key := capstanv1.RefOf(obj).Key()
			s.changedObjects = true
			s.live[key] = live
			r.verified.note(s.addon, key, plan.VerifiedAt(s.digests[key], live, now))
		},
		CRDsApplied: func() { _, _ = s.cluster.capabilities(true) },
		AwaitWave: func(ctx context.Context, wave int32, objs []*unstructured.Unstructured, nothingApplied bool) error {
			return r.awaitWave(ctx, s, wave, objs, changedNow, nothingApplied)
		},
		Applied: func(ctx context.Context, res apply.Result) error {
			s.changedObjects = s.changedObjects || res.PruneRequests > 0
			return r.recordApply(ctx, s, res, pre, post)
		},
		Step: func(ctx context.Context, name string) error {
			// NOTE: a sync runs for minutes, and the shard the Addon moved
			// to syncs it meanwhile: the old one must change nothing
			// more, or its hooks' before-hook-creation would delete the
			// new shard's running Job of the same run. The check reads
			// the cache, with no request while the Addon is the shard's.
			if r.leftShard(ctx, s) {
				return errLeftShard
			}
			if err := r.stepHook(ctx, s, name); err != nil || name != "apply" || len(s.addon.Spec.Ignore) == 0 {
				return err
			}
			// NOTE: the running values were read when the sync planned;
			// its pre hooks may have run for minutes since.
			_, err := r.keepRunning(ctx, s)
			return err
		},
	}
	res, err := seq.Run(ctx)
	// NOTE: a prune that failed half-way has deleted what it counts.
	s.changedObjects = s.changedObjects || res.PruneRequests > 0
	r.reportRecreated(s, recreate)
	objectsApplied.Add(float64(res.Applied))
	objectsPruned.Add(float64(res.PruneRequests))
	s.addon.Status.Inventory = capstanv1.IDsOf(res.Inventory)
	if len(res.Pruned) > 0 {
		log.Info("Pruned objects", "count", len(res.Pruned))
	}
	if len(res.Held) > 0 {
		// NOTE: they stay in the inventory; the sync that follows plans
		// their delete again, and waits for its confirmation.
		log.Info("Left objects marked Prune=confirm since the plan was approved, or created anew under their names since it was made; the next plan shows their delete", "count", len(res.Held))
		s.requeueSoon(r.Config.HealthPoll)
		s.found.held = res.Held
	}
	spared := res.Spared
	if left := slices.Concat(s.kept, s.notOurs); len(left) > 0 && !slices.ContainsFunc(res.Inventory, func(ref capstanv1.ObjectRef) bool { return ref.Key() == left[0].Ref.Key() }) {
		// NOTE: the sequence reached the prune, where the kept objects
		// and those not this add-on's left the inventory, even if a
		// delete failed after.
		spared = append(spared, left...)
	}
	r.reportSpared(ctx, s, "Prune", spared)
	if len(s.released) > 0 && !slices.ContainsFunc(res.Inventory, func(ref capstanv1.ObjectRef) bool { return ref.Key() == s.released[0].Key() }) {
		log.Info("Dropped from the inventory, running, objects of a kind never deleted that the render no longer has", "objects", describeAll(s.released))
	}
	if r.endedByWave(ctx, s, err) {
		return true, nil
	}
	if r.endedByHook(ctx, s, err) {
		// NOTE: a sync request stays open until the apply is recorded, as
		// when the hooks end within the look: a pre hook that fails leaves
		// it for the retry.
		return true, nil
	}
	if err != nil {
		err = r.syncFailed(ctx, s, r.applyGrace(s, err, time.Now()))
		if b := s.addon.Status.SyncInProgress; b != nil && failedForGood(err) {
			// NOTE: a fix that changes the plan is judged as any plan,
			// not held by this request's approval (plan.FailedRequest); a
			// retry of the same plan still goes on from this sync.
			b.Failed = true
		}
		return false, err
	}
	r.dryRunGrace.Applied(s.addon)
	dropPending(&s.addon.Status)
	s.addon.Status.SyncFailHooks = nil
	if h := s.addon.Status.Hook; h != nil && h.Event != render.TestEvent {
		// NOTE: every run of this sync ended; one status.hook still names
		// is a run this sync did not go on with (a post hook the change
		// that waited for it replaced), which nothing will read again.
		// A test run is the test step's to go on with.
		s.addon.Status.Hook = nil
	}
	if s.profile == capstanv1.ProfileRestricted {
		if _, err := values.Cleanup(ctx, r.Client, s.addon, time.Now()); err != nil {
			log.Error(err, "Cleaning up unreferenced values Secrets failed")
		}
	}
	s.plan = nil
	return false, nil
}

// beginSync records in status that a person's sync (one that handles
// spec.syncRequest, with changes to make) begins, before anything of it
// is applied: a retry of
// it that a stop half-way leaves goes on without another approval
// (continuesSync). The checkpoint that saves the inventory carries the
// record; when the inventory already holds every object, a checkpoint of
// its own writes it. A sync that goes on keeps the record it began with.
func (r *AddonReconciler) beginSync(ctx context.Context, s *scope) error {
	if !s.verdict.HandledSyncRequest || !plan.Pending(s.plan) || s.continuesSync() {
		return nil
	}
	s.addon.Status.SyncInProgress = &capstanv1.SyncInProgress{Plan: s.plan.Hash, SyncRequest: s.addon.Spec.SyncRequest,
		Generation: s.addon.Generation, RenderHash: s.render.Hash, Changes: s.changes}
	inventory := capstanv1.RefsOf(s.addon.Status.Inventory)
	if !slices.Equal(apply.Union(inventory, refs(s.objects)), inventory) {
		return nil // the inventory's checkpoint (SaveInventory) writes it
	}
	return r.checkpointStatus(ctx, s)
}

// syncFailed runs a git folder's SyncFail hooks once its apply has failed
// for good, as Argo CD runs them when a sync operation fails, and returns
// the failure with what they did. For good is a terminal error, one only a
// person can fix: a hook that failed, a wave whose objects failed or did
// not become Current in time; a transient one is retried, and a preview or
// a gate that stops a sync applied nothing, so it is no sync that failed.
// They run once per render: the resync retries a stalled add-on, and a
// retry of the same render that fails again runs them no more, as Argo
// CD's automated sync tries a commit once (status.syncFailHooks); a new
// commit, or a change of the Addon that renders otherwise, runs them anew.
func (r *AddonReconciler) syncFailed(ctx context.Context, s *scope, err error) error {
	if classify(err) != classTerminal || !s.hasHooks(render.SyncFailEvent) {
		return err
	}
	if d := s.addon.Status.SyncFailHooks; d != nil && d.Hash == s.render.Hash {
		return err
	}
	// NOTE: as any event's, a run that a stopped controller left goes on
	// (runHooks): a SyncFail Job still running is waited for, not started
	// anew.
	herr := r.runHooks(ctx, s, render.SyncFailEvent, nil)
	if ctx.Err() != nil {
		// The controller stops: the next look runs them, or goes on.
		return err
	}
	if unrecorded(herr) {
		// NOTE: a hook not started, since status could not name it
		// first, did not run: the next look runs them, or goes on.
		return fmt.Errorf("%w; the SyncFail hooks did not run yet: %w", err, herr)
	}
	// NOTE: recorded whether they failed or not, and at once: a SyncFail
	// hook that fails would otherwise run again at every resync.
	s.addon.Status.SyncFailHooks = &capstanv1.PendingHook{Event: render.SyncFailEvent, Hash: s.render.Hash}
	if cerr := r.checkpointStatus(ctx, s); cerr != nil {
		return cerr
	}
	return syncFailOutcome(err, herr)
}

// syncFailOutcome is the error of a sync that failed with err, after its
// SyncFail hooks ran and ended with herr. A hook that could not be read
// did not fail, and is no longer waited for: the SyncFail hooks are
// recorded as run whatever their end, so no look reads it again.
func syncFailOutcome(err, herr error) error {
	var re *hooks.ReadError
	switch {
	case errors.As(herr, &re):
		return fmt.Errorf("%w; then the SyncFail hooks ran, and the %s hook %s could not be read: %v; it is left as it is and not waited for",
			err, re.Event, re.Hook.Describe(), re.Err)
	case herr != nil:
		return fmt.Errorf("%w; then the SyncFail hooks ran, and one failed: %v", err, herr)
	}
	return fmt.Errorf("%w; then the SyncFail hooks ran", err)
}

// recordApply records in status what was applied, before the post hooks
// run. With post hooks to run, it writes a checkpoint with the hooks
// pending: if the controller stops while they run, the next sync runs only
// them, not the pre hooks again.
func (r *AddonReconciler) recordApply(ctx context.Context, s *scope, res apply.Result, pre, post string) error {
	st := &s.addon.Status
	st.Inventory = capstanv1.IDsOf(res.Inventory)
	if st.AppliedHash != s.render.Hash || res.PruneRequests > 0 {
		// NOTE: a prune of the render applied before is a change too: the
		// delete a person confirmed after the prune held it, or one that
		// spec.prune now allows. Only deletes Capstan sent count: an
		// object the prune found gone (left by an apply that stopped
		// half-way) changes nothing.
		rev := s.revision(metav1.Now())
		rev.Changes.Delete -= len(res.Held)
		st.History = addRevision(st.History, rev)
	}
	st.AppliedHash, st.AppliedGeneration = s.render.Hash, s.addon.Generation
	st.AppliedAsUpgrade = s.upgrade
	// The sync that began is applied: a later one is judged anew.
	st.SyncInProgress = nil
	if s.verdict.HandledSyncRequest {
		// NOTE: the approval that came with the request is used up with it
		// (plan.State.LastApprovedPlan), whether this sync applied its plan
		// or found nothing to change.
		st.LastSyncRequest, st.LastApprovedPlan = s.addon.Spec.SyncRequest, s.addon.Spec.ApprovedPlan
	}
	if res.Applied > 0 || len(res.Pruned) > 0 {
		now := metav1.Now()
		st.LastAppliedTime = &now
		// What this apply changed has not been found Current yet.
		st.FirstHealthyTime = nil
	}
	if res.Applied > 0 || len(res.Pruned) > 0 || pre != "" || post != "" {
		// The plan in status is what was just applied; a prompt resync
		// replaces it with what runs now.
		s.requeueAfter = r.Config.HealthPoll
	}
	// NOTE: objects a clean-up could not delete stay recorded, to be
	// deleted later.
	old := st.PendingHook
	st.PendingHook, st.PreHooksDone = nil, leftOver(st.PreHooksDone)
	s.hooklessApply = !s.hasHooks(pre) && !s.hasHooks(post)
	if !s.hasHooks(post) {
		st.PendingHook = old
		dropPending(st)
		return nil
	}
	st.PendingHook = &capstanv1.PendingHook{Event: post, Hash: s.render.Hash}
	if old != nil {
		// NOTE: what a failed run of this event left for its retry stays
		// with the run that goes on from it; another run's, or another
		// event's, is deleted by a later look, since no run goes on from
		// it now.
		if run := hookRun(s, post); old.Event == post {
			st.PendingHook.Objects = keepRun(st, old.Objects, run)
			if old.Failed != nil && old.Failed.Run == run {
				// NOTE: a retry that repairs drift first is the same run
				// (hookRun), and goes on from where it ended.
				st.PendingHook.Failed = old.Failed
			}
		} else {
			st.PreHooksDone = withLeftOvers(st.PreHooksDone, old.Objects)
		}
	}
	return r.checkpointStatus(ctx, s)
}

// revision describes the render this sync applies, applied at.
func (s *scope) revision(at metav1.Time) capstanv1.Revision {
	rev := capstanv1.Revision{
		AppliedAt: at, Generation: s.addon.Generation,
		Source: s.addon.Status.Source, Version: s.addon.Status.Version, AppliedHash: s.render.Hash,
	}
	if p := s.plan; p != nil {
		rev.PlanHash, rev.Changes = p.Hash, p.Summary
	}
	return rev
}

// addRevision puts rev at the head of history, numbered one above the
// newest, and keeps at most capstanv1.MaxHistory revisions.
func addRevision(history []capstanv1.Revision, rev capstanv1.Revision) []capstanv1.Revision {
	rev.Number = 1
	if len(history) > 0 {
		rev.Number = history[0].Number + 1
	}
	out := append([]capstanv1.Revision{rev}, history...)
	return out[:min(len(out), capstanv1.MaxHistory)]
}

// holder lets a prune or an uninstall leave an object that another Addon
// holds now (two add-ons created at once can both have applied it, and
// the one whose labels it carries runs it), and one that nothing shows to
// be this add-on's (apply.NotOurs): its name is in the inventory, saved
// before an apply that may have stopped before creating it, but someone
// else made the object that runs under that name.
func (r *AddonReconciler) holder(s *scope) apply.Holder {
	return func(ctx context.Context, ref capstanv1.ObjectRef, obj metav1.Object) (apply.Hold, error) {
		by, err := r.heldBy(ctx, s, ref, obj)
		if err != nil || by != "" {
			return apply.Hold{Addon: by}, err
		}
		return apply.Hold{NotOurs: apply.NotOurs(s.addon, obj)}, nil
	}
}

// reportSpared says which objects a prune or an uninstall (action) left
// running, to the Addon that holds them, kept by an annotation, or not
// this add-on's: one log
// line each, and one event for each reason, since events of one reason
// and action fold into one.
func (r *AddonReconciler) reportSpared(ctx context.Context, s *scope, action string, spared []apply.Spared) {
	var held, kept, foreign []string
	for _, sp := range spared {
		if sp.KeptBy != "" {
			logf.FromContext(ctx).Info("Left an object an annotation keeps", "object", sp.Ref.Describe(), "annotation", sp.KeptBy)
			kept = append(kept, sp.Ref.Describe()+" ("+sp.KeptBy+")")
			continue
		}
		if sp.NotOurs != "" {
			logf.FromContext(ctx).Info("Left an object this add-on did not create, and dropped it from the inventory", "object", sp.Ref.Describe(), "why", sp.NotOurs)
			foreign = append(foreign, sp.Ref.Describe())
			continue
		}
		logf.FromContext(ctx).Info("Left an object to the Addon that holds it", "object", sp.Ref.Describe(), "addon", sp.Holder)
		held = append(held, sp.Ref.Describe()+" (Addon "+sp.Holder+")")
	}
	if r.Recorder == nil {
		return
	}
	if len(held) > 0 {
		r.Recorder.Eventf(s.addon, nil, "Normal", "LeftToAnotherAddon", action, "Left running, not deleted, what another Addon holds: %s.", truncate(strings.Join(held, ", "), 900))
	}
	if len(foreign) > 0 {
		r.Recorder.Eventf(s.addon, nil, "Warning", "LeftNotOwned", action, "Left running, not deleted, and dropped from the inventory, what this add-on did not create (neither its labels nor a field it applied are on it; someone else made it under a name the inventory held): %s.",
			truncate(strings.Join(foreign, ", "), 900))
	}
	if len(kept) > 0 {
		r.Recorder.Eventf(s.addon, nil, "Normal", "KeptByResourcePolicy", action, "Left running, not deleted, and dropped from the inventory, what the manifests mark to be kept: %s.",
			truncate(strings.Join(kept, ", "), 900))
	}
}

// reportRecreated says which objects the apply deleted and created anew
// (spec.recreate, a mark in the manifest: apply.RecreateMarked, or a Job's
// new pod template), in one event: those whose live UID is no longer the
// one the plan saw, each with the mark that asked for it. An audit of who deleted what finds the
// controller's delete in the API server's log; the event says why.
func (r *AddonReconciler) reportRecreated(s *scope, planned map[*unstructured.Unstructured]types.UID) {
	var which []string
	for obj, uid := range planned {
		if live := s.live[capstanv1.RefOf(obj).Key()]; live != nil && live.GetUID() != uid {
			what := capstanv1.RefOf(obj).Describe()
			if m := apply.RecreateMarked(obj); m != "" && !s.addon.Spec.Recreate {
				what += " (" + m + ")"
			} else if obj.GetKind() == "Job" && !s.addon.Spec.Recreate {
				what += " (its pod template changed)"
			}
			which = append(which, what)
		}
	}
	if len(which) == 0 || r.Recorder == nil {
		return
	}
	slices.Sort(which)
	r.Recorder.Eventf(s.addon, nil, "Normal", "Recreated", "Apply", "Deleted and created anew, since the API server refuses to change them in place (spec.recreate, or the mark named): %s.",
		truncate(strings.Join(which, ", "), 900))
}

// stepHook lets tests stop a reconcile between apply steps.
func (r *AddonReconciler) stepHook(ctx context.Context, s *scope, name string) error {
	if r.BeforeApplyStep == nil {
		return nil
	}
	return r.BeforeApplyStep(ctx, s.addon, name)
}

func refs(objs []*unstructured.Unstructured) []capstanv1.ObjectRef {
	out := make([]capstanv1.ObjectRef, 0, len(objs))
	for _, o := range objs {
		out = append(out, capstanv1.RefOf(o))
	}
	return out
}

// cleanUpBeforeHooks deletes the hook-succeeded objects that earlier runs
// left in status.preHooksDone before the hooks of events pre and post
// run. One whose delete fails holds the sync only when a hook of those
// events makes the same object, which would apply over it; else a
// warning says so, the record keeps it, and the next look tries again.
func (r *AddonReconciler) cleanUpBeforeHooks(ctx context.Context, s *scope, pre, post string) error {
	left, err := r.finishCleanUp(ctx, s)
	if err == nil {
		return nil
	}
	if clash := s.hookClash(left, pre, post); clash != "" {
		return fmt.Errorf("%w; a %s hook makes the same object, so this sync waits for it to go", err, clash)
	}
	r.warnCleanUp(ctx, s, left, err, "the sync goes on, and the next one tries again")
	return nil
}

// keepsOwners reports whether a rule of spec.ignore selects obj: the
// apply sends its ignored fields as they run, so their owners keep them
// (no hand-over, no claim), and they stay when the rule goes.
func keepsOwners(s *scope, obj *unstructured.Unstructured) bool {
	return len(ignore.Paths(s.addon.Spec.Ignore, obj)) > 0
}

// applyGrace is err, the apply's, as an applyRetry while the API server's
// failure to take it lasts less than its grace (plan.DryRunGrace, under
// plan.ApplyGraceKey): a webhook it failed to call (one the render does
// not register, as for a dry run), a timeout, a 429, a 500 or 503, or a
// connection lost. Any other error, a hook's among them (hooks.Transient
// judges those), or one that has lasted, is returned as it is: a refusal
// (a 4xx, a webhook that answered and denied) fails at once, as before.
//
// NOTE: the request's own deadline or a wait that timed out is Capstan's,
// not the API server's, and is no such moment.
func (r *AddonReconciler) applyGrace(s *scope, err error, now time.Time) error {
	if !applyMoment(err) {
		return err
	}
	webhook := apply.FailedWebhook(err)
	if webhook != "" && apply.Webhooks(s.objects)[webhook] {
		return err
	}
	first, lasted := r.dryRunGrace.Lasted(s.addon, plan.ApplyGraceKey(webhook), now)
	switch {
	case lasted && first.IsZero():
		return &applyLasted{fmt.Errorf("%w (the controller remembers too many other requests failing so to give this apply time)", err)}
	case lasted:
		return &applyLasted{fmt.Errorf("%w (the API server has failed the apply so since %s, on %d looks or more)", err, first.UTC().Format(time.RFC3339), plan.GraceTries)}
	}
	return &applyRetry{err: err}
}

// applyLasted is an apply the API server could not take for a moment
// whose grace is over (applyGrace): the failure it is.
type applyLasted struct{ error }

func (e *applyLasted) Unwrap() error { return e.error }

// applyMoment reports whether err, an apply's, is one the API server
// answers for a moment (apply.ServerBusy) or a connection lost on the way
// to it, and no hook's.
//
// NOTE: a context's error is a net.Error too; one that ended is the
// reconcile's deadline or a wait of Capstan's, no moment of the API
// server's.
func applyMoment(err error) bool {
	var netErr net.Error
	if hooks.IsHookError(err) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	return apply.ServerBusy(err) || errors.As(err, &netErr)
}

// failedForGood reports whether err, a sync's apply's after applyGrace,
// ends the sync that began rather than pausing it: a failure only a
// person can fix (a hook that failed, a wave that did not become
// Current), an object the API server refused (a 4xx other than a
// timeout, a conflict or 429), or an apply whose grace is over
// (applyLasted). Anything else, an apply still in its grace, a hook or a
// status write the API server could not take for a moment, a conflict,
// the reconcile's own deadline, only pauses it: the approval that began
// it is not used up by a moment.
func failedForGood(err error) bool {
	var retry *applyRetry
	var lasted *applyLasted
	var status apierrors.APIStatus
	switch {
	case errors.As(err, &retry):
		return false
	case classify(err) == classTerminal, errors.As(err, &lasted):
		return true
	case errors.As(err, &status):
		code := status.Status().Code
		return code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusConflict && code != http.StatusTooManyRequests
	}
	return false
}

// applyRetry is an apply the API server could not take for a moment,
// within its grace (applyGrace): the add-on is Progressing
// (ReasonApplyRetrying), and the apply is retried with backoff.
type applyRetry struct{ err error }

func (e *applyRetry) Error() string { return e.err.Error() }
func (e *applyRetry) Unwrap() error { return e.err }

// retrying is the status message of the retried apply, whose error's
// message, masked, is msg.
func (e *applyRetry) retrying(msg string) string {
	return plan.RetryingWhy(e.err, "apply") + "; retrying with backoff (it counts as a failure only once it has failed so on " +
		strconv.Itoa(plan.GraceTries) + " looks in a row and for " + strconv.Itoa(int(plan.GraceFor/time.Minute)) + " minutes): " + msg
}

// plannedUIDs are the UIDs the preview read of the objects the prune
// deletes (keptFromPrune), which the plan's hash holds: the prune deletes
// those objects and no other under their names. It is never nil, so that
// an object the preview found gone, and someone created since, is not
// deleted either.
func plannedUIDs(s *scope) map[string]types.UID {
	if s.pruneUIDs == nil {
		return map[string]types.UID{}
	}
	return s.pruneUIDs
}
