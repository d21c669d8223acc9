package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/render"
)

// preview dry-runs every object and compares it with what runs. It
// guarantees s.plan. Nothing is previewed when the guardrails or the values
// already block: the plan shows why.
func (r *AddonReconciler) preview(ctx context.Context, s *scope) (bool, error) {
	in := plan.Input{
		Full:             s.fullDiffs,
		Generation:       s.addon.Generation,
		Source:           s.artifact.PlanSource(),
		Violations:       s.violations,
		ValuesErrors:     s.valuesErrors,
		EnsuredNamespace: s.createNamespace,
	}
	if s.render != nil && len(s.violations) == 0 && len(s.valuesErrors) == 0 {
		if err := r.previewObjects(ctx, s); err != nil {
			return false, err
		}
		in.Rendered = s.objects
		in.Objects = s.previews
		if s.addon.Spec.Prune {
			s.prune = apply.PruneSet(s.addon.Status.Inventory, refs(s.objects))
			in.Prune = s.prune
		}
		s.lifecycle = r.lifecycle(s)
		for _, h := range s.plannedHooks() {
			in.Hooks = append(in.Hooks, plan.HookResult{PlannedHook: h, Digest: hookDigest(s.hooks, h.ObjectRef)})
		}
		in.Notices = hookNotices(s.hooks)
	}
	if s.values != nil {
		for _, n := range s.values.Notices {
			in.Notices = append(in.Notices, capstanv1.Notice{Path: n.Path, Message: n.Message})
		}
	}
	s.plan = plan.Build(in)
	s.addon.Status.Plan = s.plan
	return false, nil
}

// lifecycle decides which hooks a sync runs, from Helm's hook table.
func (r *AddonReconciler) lifecycle(s *scope) Lifecycle {
	applied := s.addon.Status.AppliedHash
	switch {
	case applied == "" && s.addon.Spec.Adopt && anyAdopted(s.previews):
		return LifecycleNone
	case applied == "":
		return LifecycleInstall
	case applied != s.render.Hash:
		return LifecycleUpgrade
	case s.addon.Status.PendingHook != nil && s.addon.Status.PendingHook.Hash == applied:
		return LifecycleRetryPost
	}
	return LifecycleNone
}

func anyAdopted(previews []plan.ObjectResult) bool {
	for _, p := range previews {
		if p.Adopted {
			return true
		}
	}
	return false
}

// previewObjects reads every object's live state and runs a server-side
// dry-run apply of it. Objects a dry run found unchanged before, whose
// manifest and live resourceVersion are the same since, are unchanged
// without another dry run (see verifiedObjects); objects the add-on applied
// before are read by label-selected Lists rather than one by one.
func (r *AddonReconciler) previewObjects(ctx context.Context, s *scope) error {
	inventory := map[string]bool{}
	for _, ref := range s.addon.Status.Inventory {
		inventory[ref.Key()] = true
	}
	crdKinds := renderedCRDScopes(s.objects)
	known := r.verified.lookup(s.addon)
	now := time.Now()
	s.digests = make(map[string]string, len(s.objects))
	for _, obj := range s.objects {
		s.digests[capstanv1.RefOf(obj).Key()] = manifestDigest(obj)
	}
	// quiet are the objects a dry run found unchanged, or an apply wrote,
	// whose resourceVersion in the watch cache is still the one then: they
	// are unchanged with no request at all.
	quiet := map[string]bool{}
	s.quiet = quiet
	if watched := r.watchedVersions(ctx, s); len(watched) > 0 {
		for _, obj := range s.objects {
			key := capstanv1.RefOf(obj).Key()
			if v, ok := known[key]; ok {
				rv, ok := watched[key]
				quiet[key] = ok && v.stillUnchanged(s.digests[key], rv, now)
			}
		}
	}
	listed := readLabelled(ctx, s, quiet)
	// A rendered Namespace that does not exist yet holds nothing yet: its
	// objects are creates, with no read and no dry run (which would only
	// answer that the namespace is missing).
	newNamespaces := map[string]bool{}
	for _, obj := range s.objects {
		if obj.GroupVersionKind().GroupKind() != (schema.GroupKind{Kind: "Namespace"}) {
			continue
		}
		key := capstanv1.RefOf(obj).Key()
		if quiet[key] {
			continue // it exists
		}
		live, ok := listed[key]
		if !ok {
			var err error
			if live, err = s.applier.Get(ctx, capstanv1.RefOf(obj)); err != nil {
				return fmt.Errorf("reading %s: %w", key, err)
			}
			listed[key] = live
		}
		if live == nil {
			newNamespaces[obj.GetName()] = true
		}
	}
	verified := map[string]verifiedObject{}
	defer func() { r.verified.store(s.addon, verified) }()
	s.previews = make([]plan.ObjectResult, 0, len(s.objects))
	s.live = make(map[string]*unstructured.Unstructured, len(s.objects))
	for _, obj := range s.objects {
		ref := capstanv1.RefOf(obj)
		key := ref.Key()
		if newNamespaces[obj.GetNamespace()] {
			s.previews = append(s.previews, plan.ObjectResult{Ref: ref, Comparison: plan.Comparison{Action: capstanv1.ActionCreate,
				Digest: plan.CreateDigest(obj), Diff: "(previewed after its Namespace is created)\n"}})
			continue
		}
		if quiet[key] {
			s.previews = append(s.previews, plan.ObjectResult{Ref: ref, Comparison: plan.Comparison{Action: capstanv1.ActionUnchanged}})
			verified[key] = known[key]
			continue
		}
		live, ok := listed[key]
		if !ok {
			var err error
			live, err = s.applier.Get(ctx, ref)
			if err != nil && !apimeta.IsNoMatchError(err) {
				return fmt.Errorf("reading %s: %w", key, err)
			}
		}
		s.live[key] = live
		res := plan.ObjectResult{Ref: ref}
		digest := s.digests[key]
		if v, ok := known[key]; ok && live != nil && v.stillUnchanged(digest, live.GetResourceVersion(), now) && labelledFor(live, s.addon) {
			res.Action = capstanv1.ActionUnchanged
			verified[key] = v
			s.previews = append(s.previews, res)
			continue
		}
		// NOTE: the namespace of createNamespace is created when missing,
		// as helm --create-namespace does; one that exists is not adopted.
		res.Adopted = live != nil && !inventory[key] && !labelledFor(live, s.addon) &&
			!(ref.Kind == "Namespace" && ref.Name == s.createNamespace)
		dry, err := s.applier.DryRun(ctx, obj)
		switch {
		case err != nil && apimeta.IsNoMatchError(err) && definedBy(crdKinds, obj):
			// Its CRD is created first in this very sync, so the API
			// server cannot dry-run it yet.
			res.Comparison = plan.Comparison{Action: capstanv1.ActionCreate, Digest: plan.CreateDigest(obj),
				Diff: "(previewed after its CustomResourceDefinition is created)\n"}
		case err != nil && apierrors.IsNotFound(err) && renders(s.objects, "Namespace", obj.GetNamespace()):
			// Its namespace is created first in this very sync.
			res.Comparison = plan.Comparison{Action: capstanv1.ActionCreate, Digest: plan.CreateDigest(obj),
				Diff: "(previewed after its Namespace is created)\n"}
		case err != nil && apply.IsImmutableJob(obj, err):
			res.Comparison = plan.Comparison{Action: capstanv1.ActionUpdate, Digest: digest,
				Diff: "(the Job's pod template changed: it is deleted and created anew)\n"}
		case err != nil:
			res.Action = capstanv1.ActionCreate
			if live != nil {
				res.Action = capstanv1.ActionUpdate
			}
			res.Error = redactAPIError(obj, err)
		default:
			res.Comparison, err = plan.Compare(obj, live, dry)
			if err != nil {
				return err
			}
			if res.Action == capstanv1.ActionUnchanged && live != nil && inventory[key] && lostLabels(live, s.addon) {
				// Someone removed Capstan's labels from an object this
				// add-on applied: without them the object drops out of the
				// watch and the label-selected reads, so a sync puts them
				// back.
				res.Comparison = plan.Comparison{Action: capstanv1.ActionUpdate, Digest: digest,
					Diff: "(Capstan's labels " + capstanv1.AddonLabel + " and " + capstanv1.AddonNamespaceLabel + " were removed; the sync puts them back)\n"}
			}
			if res.Action == capstanv1.ActionUnchanged && live != nil {
				verified[key] = verifiedObject{digest: digest, resourceVersion: live.GetResourceVersion(), at: now}
			}
		}
		s.previews = append(s.previews, res)
	}
	return nil
}

// redactAPIError keeps the API server's message, except for Secrets, whose
// messages can quote a value.
func redactAPIError(obj *unstructured.Unstructured, err error) string {
	if obj.GetKind() == "Secret" {
		if apierrors.IsInvalid(err) {
			return "the API server refused the Secret as invalid (its message is withheld because it can quote a value)"
		}
		return "the API server refused the Secret: " + string(apierrors.ReasonForError(err))
	}
	return err.Error()
}

func definedBy(crdKinds map[schema.GroupKind]bool, obj *unstructured.Unstructured) bool {
	_, ok := crdKinds[obj.GroupVersionKind().GroupKind()]
	return ok
}

// lostLabels reports whether an object that Capstan applied for this
// add-on (its field manager owns fields of it) has lost some of Capstan's
// labels, with no other add-on's in their place. An object adopted without
// a change was never applied, and has none to lose.
func lostLabels(live *unstructured.Unstructured, addon *capstanv1.Addon) bool {
	l := live.GetLabels()
	if name, ok := l[capstanv1.AddonLabel]; ok && name != addon.Name {
		return false
	}
	if ns, ok := l[capstanv1.AddonNamespaceLabel]; ok && ns != addon.Namespace {
		return false
	}
	if labelledFor(live, addon) && l[capstanv1.ManagedByLabel] == "capstan" {
		return false
	}
	for _, f := range live.GetManagedFields() {
		if f.Manager == capstanv1.FieldManager {
			return true
		}
	}
	return false
}

// labelledFor reports whether Capstan applied obj for this add-on before.
func labelledFor(obj *unstructured.Unstructured, addon *capstanv1.Addon) bool {
	return addon.LabelledFor(obj.GetLabels())
}

// manifestDigest identifies an object's manifest, for plan hashes
// and for what a dry run verified.
func manifestDigest(obj *unstructured.Unstructured) string {
	b, _ := json.Marshal(obj.Object)
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// hookDigest is the digest of a hook's manifest, so a changed hook changes
// the plan's hash.
func hookDigest(hs []render.Hook, ref capstanv1.ObjectRef) string {
	for _, h := range hs {
		if capstanv1.RefOf(h.Object) == ref {
			return manifestDigest(h.Object)
		}
	}
	return ""
}
