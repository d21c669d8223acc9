package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/values"
)

// applyPlan applies an approved plan in order: the inventory first (so a
// crash orphans nothing), CRDs and Namespaces (hooks may need them), pre
// hooks, the rest, prune, post hooks.
func (r *AddonReconciler) applyPlan(ctx context.Context, s *scope) (bool, error) {
	log := logf.FromContext(ctx)
	rendered := refs(s.objects)
	if union := apply.Union(s.addon.Status.Inventory, rendered); !slices.Equal(union, s.addon.Status.Inventory) {
		s.addon.Status.Inventory = union
		if err := r.checkpointStatus(ctx, s); err != nil {
			return false, err
		}
	}
	var changed []*unstructured.Unstructured
	for i, obj := range s.objects {
		if s.previews[i].Action != capstanv1.ActionUnchanged {
			changed = append(changed, obj)
		}
	}
	// NOTE: on an install, as in Helm, CRDs exist before the pre-install
	// hooks run; so do the Namespaces, which hooks are created in. On an
	// upgrade they wait for the pre-upgrade hooks, like everything else: a
	// migration hook may need the old CRD.
	var first, rest []*unstructured.Unstructured
	if s.lifecycle == LifecycleInstall {
		crds, namespaces, others := apply.Split(changed)
		first, rest = append(crds, namespaces...), others
	} else {
		rest = changed
	}
	applied := 0
	now := time.Now()
	count := func(obj, live *unstructured.Unstructured) {
		applied++
		// The API server's answer is the live object: a dry run of the
		// same manifest against it would find it unchanged.
		key := capstanv1.RefOf(obj).Key()
		s.live[key] = live
		r.verified.note(s.addon, key, verifiedObject{digest: s.digests[key], resourceVersion: live.GetResourceVersion(), at: now})
	}
	defer func() { objectsApplied.Add(float64(applied)) }()
	if err := s.applier.Ordered(ctx, first, count); err != nil {
		return false, err
	}
	pre, post := s.events()
	if err := r.stepHook(ctx, s, "pre-hooks"); err != nil {
		return false, err
	}
	if err := r.runHooks(ctx, s, pre); err != nil {
		what := "nothing was applied"
		if len(first) > 0 {
			what = "nothing but CRDs and Namespaces was applied"
		}
		return false, fmt.Errorf("the %s hook failed, so %s: %w", pre, what, err)
	}
	if err := r.stepHook(ctx, s, "apply"); err != nil {
		return false, err
	}
	if err := s.applier.Ordered(ctx, rest, count); err != nil {
		return false, err
	}
	if crds, _, _ := apply.Split(changed); len(crds) > 0 {
		// New API versions change .Capabilities for the next render.
		_, _ = r.capabilities(true)
	}
	if err := r.stepHook(ctx, s, "prune"); err != nil {
		return false, err
	}
	pruned, err := s.applier.DeleteAll(ctx, s.prune)
	objectsPruned.Add(float64(len(pruned)))
	s.addon.Status.Inventory = apply.Subtract(s.addon.Status.Inventory, pruned)
	if err != nil {
		return false, err
	}
	if len(pruned) > 0 {
		log.Info("Pruned objects", "count", len(pruned))
	}
	if err := r.stepHook(ctx, s, "post-hooks"); err != nil {
		return false, err
	}
	s.addon.Status.AppliedHash = s.render.Hash
	s.addon.Status.AppliedAsUpgrade = s.upgrade
	if s.verdict.HandledSyncRequest {
		s.addon.Status.LastSyncRequest = s.addon.Spec.SyncRequest
	}
	if applied > 0 || len(pruned) > 0 {
		now := metav1.Now()
		s.addon.Status.LastAppliedTime = &now
	}
	if applied > 0 || len(pruned) > 0 || pre != "" || post != "" {
		// The plan in status is what was just applied; a prompt resync
		// replaces it with what runs now.
		s.requeueAfter = r.Config.HealthPoll
	}
	s.addon.Status.PendingHook = nil
	if post != "" && len(hooks.Select(s.hooks, post)) > 0 {
		// NOTE: the apply is recorded before the post hooks run, with the
		// hooks pending: if the controller stops while they run, the next
		// sync runs only them, not the pre hooks again.
		s.addon.Status.PendingHook = &capstanv1.PendingHook{Event: post, Hash: s.render.Hash}
		if err := r.checkpointStatus(ctx, s); err != nil {
			return false, err
		}
	}
	if err := r.runHooks(ctx, s, post); err != nil {
		// NOTE: the objects stay applied. The next sync of this render
		// runs only this event's hooks again; a new render is an upgrade.
		return false, fmt.Errorf("the %s hook failed; the objects are applied, and the next sync runs the %s hooks again: %w", post, post, err)
	}
	s.addon.Status.PendingHook = nil
	if s.profile == capstanv1.ProfileRestricted {
		if _, err := values.Cleanup(ctx, r.Client, s.addon, time.Now()); err != nil {
			log.Error(err, "Cleaning up unreferenced values Secrets failed")
		}
	}
	s.plan = nil
	return false, nil
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
