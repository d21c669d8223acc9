package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/guard"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/notify"
	"capstan.dev/capstan/internal/render"
	"capstan.dev/capstan/internal/values"
)

// reconcileDelete runs the deletion policy, then lets the Addon go.
//
// Orphan leaves everything running; objects a restricted apply may have
// owned (mayBeOwned) lose their owner reference first, so the garbage
// collector does not delete them. Delete runs the pre-delete hooks (a
// failure stops the uninstall; none runs in a namespace missing or being
// deleted, deleteHooks), deletes the inventory except the never-delete
// kinds, and runs the post-delete hooks. Either way the values Secrets and
// ConfigMaps of an add-on whose deletion follows the restricted profile are
// deleted, or handed back when the removal keeps values; every other
// add-on's are kept, without an owner reference to the Addon. The default
// policy is the cluster profile's, Orphan, when the Addon is placed in it
// now or status.profile records it (DeletionPolicyFor).
func (r *AddonReconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(s.addon, capstanv1.Finalizer) {
		s.deleted = true
		r.releaseRemote(client.ObjectKeyFromObject(s.addon))
		return ctrl.Result{}, nil
	}
	s.stage = "Delete"
	if mayBeOwned(s) && slices.Contains(s.addon.Finalizers, metav1.FinalizerDeleteDependents) {
		// NOTE: too late to hold anything back: the garbage collector
		// deletes the dependents of an owner deleted in the foreground
		// at once, whatever its other finalizers. Said once, as the
		// deletion begins.
		s.found.foreground = true
		if s.read.Phase != capstanv1.PhaseDeleting && r.Recorder != nil {
			r.Recorder.Eventf(s.addon, nil, "Warning", reasonForegroundDeletion, "Delete", "%s", foregroundNote)
		}
	}
	policy := s.deletionPolicy()
	switch policy {
	case capstanv1.DeletionOrphan:
		if mayBeOwned(s) {
			if err := r.disown(ctx, s); err != nil {
				return r.result(s, err)
			}
		}
	case capstanv1.DeletionDelete:
		if err := r.uninstallHeld(s); err != nil {
			return r.result(s, err)
		}
		// Dependents are uninstalled before their dependencies.
		dependents, staying, stuck, err := r.dependents(ctx, s.addon)
		if err != nil {
			return r.result(s, err)
		}
		if len(dependents) > 0 {
			s.found.dependents, s.found.dependentsStay, s.found.dependentsStuck = dependents, staying, stuck
			s.requeueSoon(dependencyRecheck)
			return r.result(s, nil)
		}
		if err := r.uninstall(ctx, s); err != nil {
			if r.endedByHook(ctx, s, err) {
				return r.result(s, nil)
			}
			if d := (*waveDeferred)(nil); errors.As(err, &d) {
				// A wave waits for what the waves after it deleted to be
				// gone: the reconcile ends holding no worker, and a
				// deletion of one of the add-on's objects, or the health
				// poll, looks again.
				s.found.waitingFor = d.what
				s.requeueSoon(r.Config.HealthPoll)
				r.watchKinds(ctx, s, d.kinds)
				r.awaitingGone.Store(client.ObjectKeyFromObject(s.addon), true)
				return r.result(s, nil)
			}
			return r.result(s, err)
		}
		if mayBeOwned(s) && s.profile == capstanv1.ProfileCluster {
			// NOTE: the cluster profile's uninstall leaves what the
			// manifests mark to keep, what another Addon holds and what is
			// not this add-on's; a restricted apply may have given those an
			// owner reference, which the garbage collector would follow.
			if err := r.disown(ctx, s); err != nil {
				return r.result(s, err)
			}
		}
	}
	var err error
	switch {
	case s.addon.DeletionProfile(s.profile) == capstanv1.ProfileRestricted:
		if s.addon.Annotations[capstanv1.KeepValuesAnnotation] == "true" {
			_, err = values.Release(ctx, r.Client, s.addon)
		} else {
			_, err = values.DeleteAll(ctx, r.Client, s.addon)
		}
	case mayBeOwned(s):
		// NOTE: an add-on installed under the cluster profile, or placed
		// in it now, keeps its values, as that profile does; they are
		// released, not left, since a restricted reconcile may have given
		// them an owner reference that the garbage collector would follow.
		_, err = values.Release(ctx, r.Client, s.addon)
	default:
		// NOTE: a cluster add-on's values stay as they are, but for an
		// owner reference a restricted reconcile gave them before its
		// namespace was trusted: no apply under the cluster profile takes
		// it off a values object.
		_, err = values.Disown(ctx, r.Client, s.addon)
	}
	if err != nil {
		return r.result(s, err)
	}
	patch := client.MergeFrom(s.addon.DeepCopy())
	controllerutil.RemoveFinalizer(s.addon, capstanv1.Finalizer)
	if err := r.Client.Patch(ctx, s.addon, patch); err != nil {
		return r.result(s, client.IgnoreNotFound(err))
	}
	s.deleted = true
	key := types.NamespacedName{Namespace: s.addon.Namespace, Name: s.addon.Name}
	forgetPhase(key)
	// Its secret values are not kept in memory past the Addon.
	r.masks.forget(key)
	// The remote cluster it was uninstalled from is released now, not when
	// the Addon's deletion comes through the cache.
	r.releaseRemote(key)
	r.warned.Delete(key)
	var was notify.Severity
	if s.read != nil && s.read.Phase != "" {
		was = phaseSeverity(s.read.Phase)
	}
	if s.read != nil && s.read.WarningSince != nil {
		// NOTE: failed, then deleted while a fix rolled out.
		was = notify.SeverityWarning
	}
	r.notifyGone(key, s.addon.Labels, was)
	if r.Recorder != nil {
		r.Recorder.Eventf(s.addon, nil, "Normal", "Deleted", "Delete", "The Addon was deleted with policy %s.", policy)
	}
	return ctrl.Result{}, nil
}

// uninstallHeld refuses the uninstall of an add-on installed under the
// cluster profile that this controller places in the restricted profile
// now, whose sync is held (profileChange), until a person trusts its
// namespace again or lets it go: nil when the uninstall may run.
//
// NOTE: the uninstall needs the profile the add-on was installed under.
// Run under the restricted profile, it would delete what the manifests
// mark to keep and render its delete hooks into the Addon's namespace as
// the controller; run under the cluster profile, it would run delete hooks
// rendered from a spec that anyone who may write Addons in a namespace no
// longer trusted can change, with the add-ons' account's cluster-wide
// rights. Nothing is deleted meanwhile; the message says both ways on.
func (r *AddonReconciler) uninstallHeld(s *scope) error {
	if s.profile != capstanv1.ProfileRestricted || s.addon.Status.Profile != capstanv1.ProfileCluster || nothingApplied(s.addon) {
		return nil
	}
	ns := s.addon.Namespace
	return terminal{fmt.Errorf("the uninstall waits, and deletes nothing: the add-on was installed under the cluster profile, but this controller (%s) places namespace %s in the restricted profile, "+
		"whose rights and rules are not those the add-on was installed with. Trust %s again (add it to the --trusted-namespaces of the controller that selects this Addon, or move the Addon back to a shard that trusts it) and the uninstall goes on; "+
		"or %s to let the Addon go and leave its software running",
		placement(r.Config), ns, ns, orphanHint(s.addon, s.addon.DeletionProfile(s.profile)))}
}

// uninstall removes the add-on's software: the pre-delete hooks, the
// inventory in reverse waves, the post-delete hooks. A wave that waits for
// what the waves after it deleted ends the reconcile (waveDeferred), and
// the looks after it go on from the deletes: they render nothing, since
// the first look recorded what they need.
func (r *AddonReconciler) uninstall(ctx context.Context, s *scope) error {
	s.found.uninstalling = true
	if p := s.priorWave; deletingWave(p) && sameDeletion(s, p, true) {
		// NOTE: kept unless this look ends the wait, so that one that
		// fails before it looks (the cluster out of reach, a read that
		// fails) keeps the wait's start.
		s.addon.Status.Wave = p
	}
	if nothingApplied(s.addon) {
		// NOTE: nothing of the add-on was applied in any cluster, so
		// there is nothing to delete and no delete hook to run
		// (deleteHooks runs none), and no cluster is selected: a remote
		// add-on whose kubeconfig Secret is gone (removed with it from a
		// GitOps folder), misspelt or refused goes as a local one does.
		return nil
	}
	if inventoryHere(s) {
		// NOTE: the inventory is in the controller's own cluster, which
		// spec.kubeConfig no longer names: what placeInventory would
		// decide once the Secret is read, whatever it holds (a remote
		// cluster's identity is never the controller's own), so the
		// Secret is not needed for it.
		s.former = &capstanv1.AddonStatus{}
		moveClusterFields(s.former, &s.addon.Status)
		r.leaveFormer(s, "Uninstall", fmt.Sprintf("the cluster of the kubeconfig in Secret %s/%s", s.addon.Namespace, s.addon.Spec.KubeConfig.SecretRef.Name))
		return nil
	}
	// NOTE: the inventory is deleted in the cluster it was applied to;
	// when that cluster cannot be reached, the uninstall waits.
	if _, err := r.selectTarget(ctx, s); err != nil {
		return uninstallWaits(s, err)
	}
	if s.former != nil {
		// NOTE: spec.kubeConfig names another cluster than the
		// inventory's, where nothing of the add-on was applied: there is
		// nothing to delete there and no delete hook to run, and the
		// former cluster is not touched (inventory_cluster.go).
		r.leaveFormer(s, "Uninstall", clusterName(s.cluster.server))
		return nil
	}
	rendered := false
	render := func() error {
		if rendered {
			return nil
		}
		rendered = true
		return r.deleteHooks(ctx, s)
	}
	if p := s.addon.Status.PendingHook; p != nil && p.Event != "post-delete" && len(p.Objects) > 0 {
		// NOTE: a sync's post event that failed never runs again: what
		// its hooks that succeeded left for the retry is deleted now.
		s.addon.Status.PreHooksDone = withLeftOvers(s.addon.Status.PreHooksDone, p.Objects)
		np := *p
		np.Objects = nil
		s.addon.Status.PendingHook = &np
	}
	if d := s.addon.Status.PreHooksDone; d != nil && len(d.Objects) > 0 {
		// A run whose end a stopped look recorded (a sync's, or this
		// uninstall's) may have left its hook-succeeded objects.
		if left, err := r.finishCleanUp(ctx, s); err != nil {
			if deleteEvent(d.Event) {
				return err // this uninstall's own hooks: the next look goes on
			}
			// NOTE: a sync's leftovers do not hold the uninstall: an
			// object a finalizer holds for ever would stop the add-on's
			// deletion before anything of it was deleted. The pre-delete
			// record drops them once this look is past that stage.
			r.warnCleanUp(ctx, s, left, err, "the uninstall goes on and leaves them; delete them by hand")
		}
	}
	if postDeleteDone(s.addon) {
		// NOTE: an uninstall stopped once its post-delete hooks had
		// succeeded: everything is deleted and its hooks ran, so only the
		// finalizer's removal is left.
		return nil
	}
	p := s.addon.Status.PendingHook
	retry := p != nil && p.Event == "post-delete"
	if !retry {
		if !preDeleteDone(s.addon) {
			if err := render(); err != nil {
				return err
			}
			// NOTE: what the render marks never to apply, or holds as a
			// hook now, may still be in the inventory when no sync has run
			// since the mark (a gate held it): it leaves the inventory
			// running, as a sync would leave it. That, and that the
			// pre-delete stage is over, hooks or none, are recorded at
			// once, before the hook-succeeded objects are deleted
			// (runEvent): a later look (a wave that waited, a refused
			// delete) renders nothing, since part of the add-on may be
			// deleted already, and must neither run the pre-delete hooks
			// again nor delete what this render left out, whatever its
			// source answers by then.
			var left []apply.Spared
			record := func(ctx context.Context, run string, objs []capstanv1.ObjectRef) error {
				if err := r.stepHook(ctx, s, "record pre-delete"); err != nil {
					return err
				}
				left = s.leftOutOfInventory()
				s.addon.Status.Inventory = capstanv1.IDsOf(apply.Subtract(capstanv1.RefsOf(s.addon.Status.Inventory), sparedRefs(left)))
				s.addon.Status.Hook = nil
				s.addon.Status.PreHooksDone = s.doneRecord("pre-delete", "", run, objs)
				if err := r.checkpointStatus(ctx, s); err != nil {
					return err
				}
				// NOTE: said once the record is written, whatever comes
				// after it: a clean-up that fails next must not lose it,
				// and no later look says it again.
				r.reportSpared(ctx, s, "Uninstall", left)
				return nil
			}
			if err := r.runHooks(ctx, s, "pre-delete", record); err != nil {
				if hooks.IsRunning(err) || hooks.IsReadError(err) || unrecorded(err) || preDeleteDone(s.addon) {
					// NOTE: a stage recorded over failed only in its
					// clean-up, which the next look finishes. A hook that
					// could not be read did not fail: status.hook still
					// names it.
					return err
				}
				if transientHookError(err) {
					// NOTE: nor did one the API server could not take for
					// a moment (429, 5xx, a timeout, a conflict, the
					// connection): the next look makes it again, with
					// backoff, as a sync's hooks are. A refusal that lasts
					// (a webhook that is down) keeps the finalizer as long,
					// so the way out is said all the same.
					return persistingRefusal(s, err)
				}
				if why := goneWhileHooksRan(ctx, s, err); why != "" {
					// NOTE: the namespace went after deleteHooks read it:
					// the stage is over without the hooks (recorded below).
					r.dropDeleteHooks(ctx, s, why)
				} else {
					return terminal{fmt.Errorf("the pre-delete hook failed, so the uninstall stopped and everything still runs; fix the hook, or remove the %s annotation and set spec.deletionPolicy: Orphan to keep the software: %w", capstanv1.UninstallAnnotation, err)}
				}
			}
			if !s.hasHooks("pre-delete") {
				// No pre-delete hook ran: the stage is over all the same.
				if err := record(ctx, "", nil); err != nil {
					return err
				}
			}
		}
		deleted, err := s.applier.DeleteAll(ctx, capstanv1.RefsOf(s.addon.Status.Inventory),
			apply.Deleting{Holder: r.holder(s), Keep: s.keepFrom(apply.Uninstalling), AwaitGone: r.awaitGone(s, true)})
		objectsPruned.Add(float64(deleted.Requests))
		if d := (*waveDeferred)(nil); errors.As(err, &d) {
			// NOTE: the look that goes on finds what is spared again, and
			// says so once, when the deletes are done.
			return err
		}
		r.reportSpared(ctx, s, "Uninstall", deleted.Spared)
		if err != nil {
			return err
		}
		s.addon.Status.Wave = nil
		if err := render(); err != nil {
			return err
		}
		if s.hasHooks("post-delete") {
			// NOTE: the run is recorded with the event: a retry renders
			// again, and a chart on a semver range that got a new version,
			// or a folder with a new commit, would make another run, whose
			// hooks that succeeded in this one would run again.
			s.addon.Status.PendingHook = &capstanv1.PendingHook{Event: "post-delete", Run: hookRun(s, "post-delete")}
			if err := r.checkpointStatus(ctx, s); err != nil {
				return err
			}
		}
	}
	if err := render(); err != nil {
		return err
	}
	// A retry goes on from the post-delete run that stopped: the hooks that
	// succeeded in it are not run again.
	if err := r.runEvent(ctx, s, "post-delete", retry, r.recordPost(s, "post-delete")); err != nil {
		if hooks.IsRunning(err) || hooks.IsReadError(err) || unrecorded(err) || postDeleteDone(s.addon) {
			// NOTE: a hook that could not be read did not fail: the next
			// look reads it again (status.hook), so the error says so
			// rather than that the hook failed.
			return err
		}
		if transientHookError(err) {
			// NOTE: nor did one the API server could not take for a
			// moment: the retry goes on from the run (status.hook).
			return persistingRefusal(s, err)
		}
		if why := goneWhileHooksRan(ctx, s, err); why != "" {
			// NOTE: everything else is deleted, and the hooks left can
			// never run there. What the post-delete runs kept is tried
			// once: the namespace's deletion deletes what is in it, and
			// must not wait for the finalizer.
			r.dropDeleteHooks(ctx, s, why)
			if left, err := r.cleanUpKeptHooks(ctx, s); err != nil {
				r.warnCleanUp(ctx, s, left, err, "the uninstall goes on and leaves them; delete them by hand")
			}
			return nil
		}
		return fmt.Errorf("the post-delete hook failed; everything else is deleted, and the next sync runs only the post-delete hooks again: %w", err)
	}
	_, err := r.cleanUpKeptHooks(ctx, s)
	return err
}

// cleanUpKeptHooks deletes, before the finalizer goes, the hook-succeeded
// objects that the uninstall's post-delete runs kept for a retry and that
// status still names: those of a run no retry went on from, those of the
// run that succeeded under a name its render no longer holds (a chart that
// moved on renamed a hook), which the runner never read, and those of a
// pending post-delete event whose hooks this look runs none of (the
// render has none now, or they were dropped). Once the Addon is gone no
// record names them, and nothing would ever delete them; a restricted
// add-on's would go with it by their owner reference, a cluster add-on's
// would stay for good. It returns the objects whose delete failed.
//
// NOTE: the post-delete stage is recorded over, and written, before the
// deletes: a look after one that failed, or after a controller that
// stopped while they ran, only deletes what is left (finishCleanUp, at the
// start of the uninstall), and holds the finalizer until it is gone, as
// for the objects of the uninstall's own hooks; it runs no post-delete
// hook again. A pending event turned into that record in memory only
// would leave status.pendingHook stored: a source that renders its hooks
// again by the next look would have it go on from the pending run, whose
// kept objects are deleted by then, and run their hooks again. When the
// write fails, nothing is deleted, and every object is returned as left.
func (r *AddonReconciler) cleanUpKeptHooks(ctx context.Context, s *scope) ([]capstanv1.HookObject, error) {
	st := &s.addon.Status
	if p := st.PendingHook; p != nil && p.Event == "post-delete" {
		done := &capstanv1.PendingHook{Event: "post-delete", Run: p.Run}
		if d := st.PreHooksDone; d != nil {
			done.Objects = slices.Clone(d.Objects)
		}
		st.PendingHook, st.PreHooksDone = nil, withLeftOvers(done, p.Objects)
		if err := r.checkpointStatus(ctx, s); err != nil {
			return st.PreHooksDone.Objects, fmt.Errorf("recording the post-delete stage over failed, so nothing its runs kept was deleted: %w", err)
		}
	}
	if !postDeleteDone(s.addon) {
		return nil, nil // no post-delete hook ran, and none kept anything
	}
	left, err := r.finishCleanUp(ctx, s)
	if err == nil {
		// Tests stop here, as a controller killed after the deletes and
		// before the status write that ends the reconcile would.
		err = r.stepHook(ctx, s, "post-delete kept clean-up")
	}
	return left, err
}

// deleteHooks renders the add-on once more to find its delete hooks, and
// keeps those the uninstall may run.
//
// An add-on that was never applied runs none: Helm runs the delete hooks
// only of a release it installed, and a Blocked add-on's hooks must not
// run at its removal when its sync never ran them. For the same reason an
// applied chart is rendered at the version applied last, not one the spec
// names that never was (renderForDelete).
//
// A render that fails for a moment (a chart repository that times out or
// answers 429 or 5xx, a credentials Secret that could not be read, the
// cluster out of reach) is retried with backoff: the uninstall waits, and
// deletes nothing before its pre-delete hooks ran. A render that only a
// person can fix (a chart version deleted from its repository, a 404, a
// template that fails, values with errors) runs none of the delete hooks:
// that must not keep the Addon for ever, so the uninstall goes on without
// them, and a DeleteHooksRefused event and the Deleting message say why.
// Nor has a chart whose signature spec.chart.verify refuses: it is not
// rendered, and the event says so.
//
// The delete hooks run with the rights of the controller (or of the
// add-ons' account), so they pass the guard step as a sync's render does,
// in both profiles as its rules say. A delete hook that breaks a rule, or
// an Addon whose spec or chart does, runs none of them: the uninstall goes
// on without its delete hooks, as `helm uninstall --no-hooks` does, and a
// DeleteHooksRefused event and the Deleting message say why. An object of
// the render that breaks a rule is not applied, so it does not count as
// rendered for a delete hook that uses it (guard.CheckWithout). A read of
// the live objects that failed (ownership-unknown), and no other rule
// broken, is retried.
//
// Nor does a delete hook run when the namespace of one of them does not
// exist or is being deleted, as when a tenant's namespace is deleted with
// its Addon in it (goneHookNamespace): the uninstall goes on without them,
// with the same event.
func (r *AddonReconciler) deleteHooks(ctx context.Context, s *scope) error {
	if neverApplied(s.addon) {
		s.hooks = nil
		return nil
	}
	if done, err := r.renderForDelete(ctx, s); err != nil || done {
		if err != nil {
			s.hooks = nil
			var stop *boundStop
			if errors.As(err, &stop) && stop.Bound == "time" {
				return r.timeBoundStop(ctx, s, stop, err)
			}
			if classify(err) != classTerminal {
				stage := "nothing is deleted before its pre-delete hooks have run"
				if preDeleteDone(s.addon) {
					stage = "its post-delete hooks run once it renders"
				}
				return fmt.Errorf("rendering the add-on to find its delete hooks failed, so the uninstall waits and tries again; %s. "+
					"If the source will not answer again, point the Addon at a copy that does, or remove the %s annotation and set spec.deletionPolicy: Orphan to let the Addon go without them: %w", stage, capstanv1.UninstallAnnotation, err)
			}
			r.refuseDeleteHooks(ctx, s, "the source could not be rendered: "+s.mask().Error(err).Error(), renderFailedAhead(s.addon))
			return nil
		}
		if done {
			// NOTE: the fetch stops here when the chart's signature
			// fails: nothing of an unverified chart is rendered, so none
			// of its hooks runs, and nothing is left out of the
			// inventory's deletes for it.
			s.hooks = nil
			if sig := s.found.signature; sig != nil && sig.err != nil {
				r.refuseDeleteHooks(ctx, s, "the chart's signature failed ("+sig.reason+"): "+sig.err.Error(), deleteHooksAhead(s.addon, nil, true))
			}
			return nil
		}
	}
	if len(s.valuesErrors) > 0 {
		s.hooks = nil
		r.refuseDeleteHooks(ctx, s, "the values have errors: "+s.mask().String(describeValuesErrors(s.valuesErrors)), renderFailedAhead(s.addon))
		return nil
	}
	// NOTE: a read that failed is judged below, by the hooks it concerns:
	// one of an object no delete hook uses does not hold the uninstall.
	s.violations = append(s.violations, r.renderViolations(ctx, s)...)
	violations := s.violations
	if s.profile == capstanv1.ProfileRestricted && s.render != nil && len(s.violations) > 0 &&
		(s.hasHooks("pre-delete") || s.hasHooks("post-delete")) {
		// NOTE: the uninstall applies none of the objects that break a
		// rule, so a delete hook's reference to one is to whatever runs
		// under that name: the platform's Secret the chart renders too
		// (not-owned) would be read by a hook that passes on its own.
		violations = append(slices.Clone(violations), guard.CheckWithout(ctx, guarded(s), s.violations, r.guardContext(s))...)
	}
	refused := refusedDeleteHooks(s.addon, s.hooks, violations)
	if len(refused) == 0 {
		why, err := goneHookNamespace(ctx, s)
		if why != "" {
			r.dropDeleteHooks(ctx, s, why)
		}
		return err
	}
	if !slices.ContainsFunc(refused, func(v capstanv1.Violation) bool { return v.Rule != guard.RuleOwnershipUnknown }) {
		// NOTE: a read that failed says nothing of the hook; the
		// uninstall waits for a read that answers. A rule the hooks
		// break for certain refuses them at once.
		return fmt.Errorf("reading the live objects of the delete hooks failed, so the guardrails could not judge them; the uninstall tries again: %s: %s",
			refused[0].Object.Describe(), refused[0].Message)
	}
	r.dropDeleteHooks(ctx, s, "they break the guardrails: "+describeViolations(refused))
	return nil
}

// timeBoundStop judges a delete render that the sandbox stopped at its
// time bound (stop, in err). The time bound is not the inputs' verdict at
// the first stop: the render may pass once the pause is over, on a less
// loaded node, so the uninstall waits for that pause and tries again. A
// render of the same inputs that stops there again (stop.times counts
// them, boundRenders) is taken as theirs: the uninstall goes on without
// its delete hooks, as for any render that fails for good, and a
// DeleteHooksRefused event says why. The bound is the sandbox's own pause,
// so a render that loops for ever (on purpose or not) holds the Addon's
// finalizer, and its namespace, for one pause at most.
//
// NOTE: no hook was rendered, so the namespaces read first are those of
// the Addon and its target (goneAddonNamespace): when one is going, the
// uninstall goes on without its hooks at once, as for hooks whose
// namespace is gone, and waits for nothing.
func (r *AddonReconciler) timeBoundStop(ctx context.Context, s *scope, stop *boundStop, err error) error {
	why, rerr := r.goneAddonNamespace(ctx, s)
	if rerr != nil {
		return rerr
	}
	if why == "" && waitsAtTimeBound(stop) {
		if t := (terminal{}); errors.As(err, &t) {
			// NOTE: a wait, not a failure: the render step calls every
			// stop at a bound terminal.
			err = t.error
		}
		return fmt.Errorf("rendering the add-on to find its delete hooks stopped at the sandbox's time bound, so the uninstall waits and tries again once its pause is over; "+
			"nothing is deleted before its pre-delete hooks have run. If the render stops there again, the uninstall goes on without its delete hooks: "+
			"to run them, set values the chart renders in time: %w", err)
	}
	if why == "" {
		why = "the render stopped at the sandbox's time bound again after its pause: " + s.mask().Error(err).Error()
	}
	r.refuseDeleteHooks(ctx, s, why, renderFailedAhead(s.addon))
	return nil
}

// waitsAtTimeBound reports whether the uninstall waits for a delete
// render the sandbox stopped at its time bound: only at its first stop.
func waitsAtTimeBound(stop *boundStop) bool {
	return stop.times < 2
}

// goneAddonNamespace names the Addon's own namespace (read where the
// Addon lives) or its target namespace (read where the add-on runs) when
// one is being deleted or does not exist (hooks.NamespaceGoneReason), or
// "".
func (r *AddonReconciler) goneAddonNamespace(ctx context.Context, s *scope) (string, error) {
	var own corev1.Namespace
	switch err := r.APIReader.Get(ctx, client.ObjectKey{Name: s.addon.Namespace}, &own); {
	case apierrors.IsNotFound(err):
		return "the namespace " + s.addon.Namespace + " does not exist", nil
	case err != nil:
		return "", fmt.Errorf("reading the namespace %s of the Addon failed, so the uninstall tries again: %w", s.addon.Namespace, err)
	case own.DeletionTimestamp != nil:
		return "the namespace " + s.addon.Namespace + " is being deleted", nil
	}
	ns := s.addon.Spec.TargetNamespace
	if ns == "" {
		return "", nil
	}
	live, err := s.applier.Get(ctx, capstanv1.ObjectRef{APIVersion: "v1", Kind: "Namespace", Name: ns})
	if err != nil {
		return "", fmt.Errorf("reading the namespace %s of the uninstall failed, so the uninstall tries again: %w", ns, err)
	}
	return hooks.NamespaceGoneReason(ns, live), nil
}

// goneHookNamespace reads the namespace of each delete hook still to run,
// and names the first one that does not exist or is being deleted: "the
// namespace NAME is being deleted", or "".
//
// NOTE: a delete hook cannot run in a namespace that is going away: the
// API server refuses any object there, and the namespace controller deletes
// the add-on's objects whatever the uninstall does. Waiting for the hooks
// would hold the Addon's finalizer, and with it the namespace, for ever.
// Nor is a missing namespace made for them: a Namespace is never deleted
// by an uninstall, so the one made would be left behind.
func goneHookNamespace(ctx context.Context, s *scope) (string, error) {
	if postDeleteDone(s.addon) {
		return "", nil
	}
	var ahead []render.Hook
	if !preDeleteDone(s.addon) {
		ahead = hooks.Select(s.hooks, "pre-delete")
	}
	ahead = append(ahead, hooks.Select(s.hooks, "post-delete")...)
	read := map[string]bool{}
	for _, h := range ahead {
		ns := h.Object.GetNamespace()
		if ns == "" || read[ns] {
			continue
		}
		read[ns] = true
		live, err := s.applier.Get(ctx, capstanv1.ObjectRef{APIVersion: "v1", Kind: "Namespace", Name: ns})
		if err != nil {
			return "", fmt.Errorf("reading the namespace %s of the delete hooks failed, so the uninstall tries again: %w", ns, err)
		}
		if why := hooks.NamespaceGoneReason(ns, live); why != "" {
			return why, nil
		}
	}
	return "", nil
}

// goneWhileHooksRan names the namespace of a delete hook that went while
// the delete hooks ran, when one of them failed with err: the one the
// runner found refused (hooks.NamespaceGone), or else the one
// goneHookNamespace finds now. It is "" when none did, and the failure is
// the hook's.
//
// NOTE: a namespace deleted while a Job or Pod hook in it is waited for
// (within --hook-wait) fails that hook otherwise than as refused: the
// namespace controller deletes the hook's object, which the wait then finds
// gone (hooks.ReasonDeleted) or failed. Taken as the hook's failure, that
// stopped the uninstall, and the finalizer held the namespace Terminating
// until a later look (the resync) read it. A read of the namespace that
// fails here leaves the failure the hook's: the next look reads the
// namespace again (deleteHooks) before it goes on.
func goneWhileHooksRan(ctx context.Context, s *scope, err error) string {
	if why, gone := hooks.NamespaceGone(err); gone {
		return why
	}
	why, rerr := goneHookNamespace(ctx, s)
	if rerr != nil {
		logf.FromContext(ctx).Info("Could not tell whether a failed delete hook's namespace is gone", "error", rerr.Error())
	}
	return why
}

// dropDeleteHooks takes the delete events out of the render's hooks, and
// says why (refuseDeleteHooks): the uninstall goes on without them.
func (r *AddonReconciler) dropDeleteHooks(ctx context.Context, s *scope, why string) {
	ahead := deleteHooksAhead(s.addon, s.hooks, false)
	s.hooks = withoutDeleteEvents(s.hooks)
	r.refuseDeleteHooks(ctx, s, why, ahead)
}

// refuseDeleteHooks records why the uninstall runs no delete hook, for the
// Deleting message, and logs it. While a refused hook was still to run
// (ahead), a DeleteHooksRefused event says so too.
//
// NOTE: an uninstall that waits for a wave renders again at each look for
// its post-delete hooks; one with none left to run sends no event again.
func (r *AddonReconciler) refuseDeleteHooks(ctx context.Context, s *scope, why string, ahead bool) {
	s.found.hooksRefused = why
	logf.FromContext(ctx).Info("Not running the delete hooks", "why", why)
	if ahead && r.Recorder != nil {
		r.Recorder.Eventf(s.addon, nil, "Warning", reasonDeleteHooksRefused, "Uninstall",
			"The delete hooks were not run, since %s. The uninstall goes on without them, as helm uninstall --no-hooks does.", truncate(why, 900))
	}
}

// deleteHooksAhead reports whether a delete hook of hs is still to run in
// the uninstall of a: a post-delete hook, or a pre-delete one before the
// pre-delete stage is over. A chart that was not rendered (unknown) may
// have any: it counts as having both, so its refusal is said at the look
// that would have run the pre-delete hooks, and the looks after it (which
// render again only for post-delete hooks) say nothing new.
func deleteHooksAhead(a *capstanv1.Addon, hs []render.Hook, unknown bool) bool {
	if postDeleteDone(a) {
		return false // they all ran
	}
	pre := !preDeleteDone(a)
	if unknown {
		return pre
	}
	return len(hooks.Select(hs, "post-delete")) > 0 || pre && len(hooks.Select(hs, "pre-delete")) > 0
}

// renderFailedAhead reports whether a delete hook of a that failed to
// render was still to run: any, while the pre-delete stage is not over
// (deleteHooksAhead of a chart not rendered), and the post-delete hooks a
// stopped run left pending (status.pendingHook), which an earlier render
// found.
func renderFailedAhead(a *capstanv1.Addon) bool {
	p := a.Status.PendingHook
	return deleteHooksAhead(a, nil, true) || p != nil && p.Event == "post-delete"
}

// postDeleteDone reports whether a's uninstall recorded its post-delete
// hooks succeeded (recordPost): only the finalizer's removal is left.
func postDeleteDone(a *capstanv1.Addon) bool {
	d := a.Status.PreHooksDone
	return d != nil && d.Event == "post-delete"
}

// preDeleteDone reports whether a's uninstall is past its pre-delete
// stage, hooks or none.
func preDeleteDone(a *capstanv1.Addon) bool {
	d := a.Status.PreHooksDone
	return d != nil && (d.Event == "pre-delete" || d.Event == "post-delete")
}

// reasonForegroundDeletion is the reason of the event that says a
// restricted Addon was deleted with foreground propagation.
const reasonForegroundDeletion = "ForegroundDeletion"

// foregroundNote says what a foreground delete of a restricted Addon did.
// Its objects carry owner references to the Addon (prepare), and the
// garbage collector deletes the dependents of an owner deleted in the
// foreground at once, before Capstan's finalizer runs.
const foregroundNote = "The Addon was deleted with foreground propagation (kubectl delete --cascade=foreground, or a GitOps prune that propagates in the foreground), " +
	"so Kubernetes' garbage collector deleted the objects it owns at once, before its pre-delete hooks ran and whatever spec.deletionPolicy says. " +
	"Delete Addons in the background (the default), or with --cascade=orphan to keep their software."

// reasonDeleteHooksRefused is the reason of the event that says an
// uninstall did not run its delete hooks, since they break the guardrails,
// the chart's signature failed, or the add-on could not be rendered for a
// reason only a person can fix.
const reasonDeleteHooksRefused = "DeleteHooksRefused"

// neverApplied reports whether nothing of the add-on was ever applied:
// nothing in its inventory (an install writes it before anything else,
// its pre-install hooks included) and no apply recorded.
func neverApplied(a *capstanv1.Addon) bool {
	st := a.Status
	return len(st.Inventory) == 0 && st.AppliedHash == "" && st.LastAppliedTime == nil && len(st.History) == 0
}

// nothingApplied reports whether nothing of a was applied in any cluster,
// nor any hook run: neverApplied, with no hook running, pending or
// recorded done.
func nothingApplied(a *capstanv1.Addon) bool {
	st := a.Status
	return neverApplied(a) && st.Hook == nil && st.PendingHook == nil && st.PreHooksDone == nil && st.SyncFailHooks == nil
}

// inventoryHere reports whether the uninstall of a cluster-profile add-on
// whose spec.kubeConfig names a remote cluster finds its inventory
// recorded in the controller's own cluster: a former cluster, which the
// uninstall leaves as it is (inventory_cluster.go).
func inventoryHere(s *scope) bool {
	c := s.addon.Status.InventoryCluster
	return s.profile == capstanv1.ProfileCluster && s.addon.Spec.KubeConfig != nil && c != nil && c.Identity == ""
}

// uninstallWaits is the error of an uninstall that cannot select the
// cluster its inventory is in: the kubeconfig Secret is missing or
// refused, or the cluster does not answer. It says both ways on: bring
// the cluster back, or let the Addon go and leave what it applied there
// running.
//
// NOTE: never terminal, whatever err is (a missing Secret is terminal in
// a sync): nothing but a person's change or the cluster's return ends the
// wait, and both can come at any time (a GitOps tool that restores the
// Secret, a network that heals), so it is retried with backoff, not only
// at the resync. The inventory is kept: nothing is deleted, or orphaned,
// unless a person says so.
func uninstallWaits(s *scope, err error) error {
	ref := s.addon.Spec.KubeConfig
	if ref == nil {
		return err // the controller's own cluster: selectCluster read nothing
	}
	return fmt.Errorf("the uninstall waits for the cluster its inventory is in, and deletes nothing meanwhile: %s. "+
		"Fix or restore the kubeconfig Secret %s/%s, or make the cluster reachable, and the uninstall goes on; "+
		"or %s to let the Addon go and leave what it applied there running, unmanaged",
		strings.TrimSuffix(err.Error(), "."), s.addon.Namespace, ref.SecretRef.Name, orphanHint(s.addon, s.addon.DeletionProfile(s.profile)))
}

// persistingRefusal is err, a delete hook the API server could not take
// for a moment, which is retried with backoff, with the way out should the
// refusal last (an admission webhook that is down): the Addon keeps its
// finalizer until the hook is made.
func persistingRefusal(s *scope, err error) error {
	return fmt.Errorf("%w If the API server goes on refusing it (an admission webhook that is down), %s to let the Addon go with its software left running", err, orphanHint(s.addon, s.addon.DeletionProfile(s.profile)))
}

// orphanHint says how to turn the deletion of a into an Orphan one: the
// uninstall annotation removed, spec.deletionPolicy set to Orphan, or both.
// profile is the profile whose defaults the deletion follows
// (DeletionProfile): a restricted add-on's default is Delete, so it needs
// the policy set even where nothing asked for the uninstall.
func orphanHint(a *capstanv1.Addon, profile capstanv1.Profile) string {
	annotated := a.Annotations[capstanv1.UninstallAnnotation] == "true"
	policy := a.Spec.DeletionPolicy == capstanv1.DeletionDelete ||
		a.Spec.DeletionPolicy == "" && profile == capstanv1.ProfileRestricted
	switch {
	case annotated && policy:
		return "remove the " + capstanv1.UninstallAnnotation + " annotation and set spec.deletionPolicy: Orphan"
	case policy:
		return "set spec.deletionPolicy: Orphan"
	}
	return "remove the " + capstanv1.UninstallAnnotation + " annotation"
}

// refusedDeleteHooks are the violations that keep an uninstall from
// running its delete hooks: those of a pre-delete or post-delete hook, and
// those of the Addon's own spec or chart (a tenant's spec.kubeConfig, a
// chart not written for Capstan), which no hook of the render may run
// past. An object that is not a delete hook breaking a rule is no reason:
// the uninstall applies nothing of the render but those hooks. Nor does
// such an object count as rendered for a hook that names it: violations
// holds what guard.CheckWithout finds once it is left out (deleteHooks).
func refusedDeleteHooks(addon *capstanv1.Addon, hs []render.Hook, violations []capstanv1.Violation) []capstanv1.Violation {
	deleting := map[string]bool{}
	for _, event := range []string{"pre-delete", "post-delete"} {
		for _, h := range hooks.Select(hs, event) {
			deleting[capstanv1.RefOf(h.Object).Key()] = true
		}
	}
	if len(deleting) == 0 {
		return nil
	}
	var out []capstanv1.Violation
	for _, v := range violations {
		own := v.Object.Kind == "Addon" && v.Object.APIVersion == capstanv1.GroupVersion.String() &&
			v.Object.Namespace == addon.Namespace && v.Object.Name == addon.Name
		if own || deleting[v.Object.Key()] {
			out = append(out, v)
		}
	}
	return out
}

// withoutDeleteEvents returns the hooks with the delete events taken out
// of each: none of them runs at the uninstall, and the hooks are still the
// render's (a folder's object that is a hook now stays out of the
// inventory's deletes).
func withoutDeleteEvents(hs []render.Hook) []render.Hook {
	out := make([]render.Hook, 0, len(hs))
	for _, h := range hs {
		h.Events = slices.DeleteFunc(slices.Clone(h.Events), deleteEvent)
		out = append(out, h)
	}
	return out
}

// describeViolations names each violation: the object, the rule and the
// field.
func describeViolations(vs []capstanv1.Violation) string {
	parts := make([]string, 0, len(vs))
	for _, v := range vs {
		what := v.Object.Describe() + ": " + v.Rule
		if v.Path != "" {
			what += " at " + v.Path
		}
		parts = append(parts, what)
	}
	return strings.Join(parts, "; ")
}

// describeValuesErrors names each values error: its path, rule and
// message, which never holds the value.
func describeValuesErrors(errs []capstanv1.ValuesError) string {
	parts := make([]string, 0, len(errs))
	for _, e := range errs {
		parts = append(parts, e.Path+" ("+e.Rule+"): "+e.Message)
	}
	return strings.Join(parts, "; ")
}

// mayBeOwned reports whether the add-on's objects may carry owner
// references to the Addon, which a restricted apply sets (prepare): it is
// placed in the restricted profile now, or status.profile records it
// installed under that profile, as it does once its namespace is trusted
// until a sync under the cluster profile changes its objects. That sync
// first takes every such reference off (disownBeforeCluster), so an
// add-on that status.profile records cluster has none left.
func mayBeOwned(s *scope) bool {
	return s.profile == capstanv1.ProfileRestricted || s.addon.Status.Profile == capstanv1.ProfileRestricted
}

// disown removes the owner references to the Addon from the objects it
// applied, so the garbage collector leaves them running: those of the
// inventory, and the hook objects its charts made, which are in no
// inventory. A restricted add-on's hooks can only be of the kinds the
// guardrails allow, in its own namespace, with Capstan's labels naming it;
// they are looked for there whatever profile places the add-on now.
func (r *AddonReconciler) disown(ctx context.Context, s *scope) error {
	return r.disownIn(ctx, s, s.applier, s.addon.Status.Inventory)
}

// disownBeforeCluster removes the owner references a restricted apply gave
// the add-on's objects (disown) before the first sync under the cluster
// profile of an add-on status.profile records restricted changes anything,
// so before status.profile may record cluster (recordedProfile): from then
// on a deletion reads no owner reference left (mayBeOwned). Were they left
// to that sync's apply, what it does not apply again would keep them and
// be deleted by the garbage collector once the Addon goes, whatever its
// deletion policy: the objects of a sync that fails part-way after its
// inventory checkpoint, those marked ssa: IfNotPresent, the hook objects
// of an install, and what the cluster render no longer holds. A failure
// fails the sync before it changes anything, so status.profile stays
// restricted and the next sync tries again.
//
// NOTE: with the restricted applier, as the controller that set the
// references, and in the controller's own cluster: a restricted add-on
// never reads its kubeConfig, so its objects are all here, also when the
// inventory the cluster profile targets is in another cluster (s.former).
func (r *AddonReconciler) disownBeforeCluster(ctx context.Context, s *scope) error {
	if s.profile != capstanv1.ProfileCluster || s.addon.Status.Profile != capstanv1.ProfileRestricted {
		return nil
	}
	inventory := s.addon.Status.Inventory
	if s.former != nil {
		inventory = s.former.Inventory
	}
	if err := r.disownIn(ctx, s, r.local.appliers[capstanv1.ProfileRestricted], inventory); err != nil {
		return fmt.Errorf("the sync under the cluster profile changes nothing until the owner references the restricted profile set are taken off the add-on's objects, so that no deletion of the Addon lets the garbage collector delete them: %w", err)
	}
	return nil
}

// disownIn is disown through applier, for the objects of inventory.
func (r *AddonReconciler) disownIn(ctx context.Context, s *scope, applier *apply.Applier, inventory []capstanv1.ObjectID) error {
	for _, ref := range inventory {
		// NOTE: read as the prune and the uninstall read it: an entry
		// whose API version the cluster no longer serves (a beta removed
		// by an upgrade, a CRD's version dropped) is looked up by one it
		// serves, and is gone when its kind is served by none.
		live, err := applier.ReadMetadata(ctx, ref.ObjectRef)
		if apierrors.IsForbidden(err) {
			// NOTE: the restricted profile applies as the controller, so
			// it set no owner reference on what the controller may not
			// read: an object the cluster profile applied before the
			// add-on became restricted (a ClusterRole of an add-on moved
			// out of a trusted namespace), which is left as it is.
			continue
		}
		if err != nil {
			return err
		}
		if live == nil {
			continue
		}
		if err := r.disownObject(ctx, s, applier, live); err != nil {
			return err
		}
	}
	for _, gvk := range guard.AllowedKinds() {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := applier.List(ctx, list, client.InNamespace(s.addon.TargetNamespaceIn(capstanv1.ProfileRestricted)), client.MatchingLabels(s.addon.AppliedLabels())); err != nil {
			return fmt.Errorf("listing the %s objects of the add-on's hooks to leave them running: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			if err := r.disownObject(ctx, s, applier, &list.Items[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// disownObject removes the owner references to the Addon from live, when
// it has any.
func (r *AddonReconciler) disownObject(ctx context.Context, s *scope, applier *apply.Applier, live client.Object) error {
	var kept []metav1.OwnerReference
	for _, o := range live.GetOwnerReferences() {
		if o.UID != s.addon.UID {
			kept = append(kept, o)
		}
	}
	if len(kept) == len(live.GetOwnerReferences()) {
		return nil
	}
	patch := client.MergeFrom(live.DeepCopyObject().(client.Object))
	live.SetOwnerReferences(kept)
	if err := applier.Client.Patch(ctx, live, patch); err != nil {
		gvk := live.GetObjectKind().GroupVersionKind()
		ref := refOf(gvk, live.GetNamespace(), live.GetName())
		return fmt.Errorf("removing the owner reference from %s: %w", ref.Describe(), apply.RefusedWrite(ref, err))
	}
	return nil
}
