package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/guard"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/render"
	"capstan.dev/capstan/internal/source"
	"capstan.dev/capstan/internal/values"
)

// step is one stage of the pipeline. It returns done when the reconcile
// ends here without error.
type step struct {
	name string
	run  func(ctx context.Context, s *scope) (done bool, err error)
}

// renderSteps fetch the source, resolve the values, render and prepare the
// objects: what the sync, `capstan plan` and the delete hooks share.
func (r *AddonReconciler) renderSteps() []step {
	return []step{{"Fetch", r.fetch}, {"Values", r.resolveValues}, {"Render", r.renderObjects}, {"Prepare", r.prepare}}
}

// planSteps are the render steps, then the guardrails and the preview: what
// the sync and `capstan plan` share.
func (r *AddonReconciler) planSteps() []step {
	return append(r.renderSteps(), step{"Guard", r.checkGuardrails}, step{"Preview", r.preview})
}

// reconcileNormal runs the pipeline for an Addon that is not being deleted.
func (r *AddonReconciler) reconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	steps := append(r.planSteps(),
		step{"Gate", r.gate},
		step{"Drift", r.paceDrift},
		step{"Apply", r.applyPlan},
		step{"Paced", r.recordUndo},
		step{"Health", r.checkHealth},
	)
	for _, st := range steps {
		s.stage = st.name
		done, err := st.run(ctx, s)
		if err != nil || done {
			return r.result(s, err)
		}
	}
	return r.result(s, nil)
}

// fetch fetches the chart or the git tree. It guarantees s.chart or s.tree.
func (r *AddonReconciler) fetch(ctx context.Context, s *scope) (bool, error) {
	spec := s.addon.Spec
	switch {
	case spec.Chart != nil:
		creds, err := r.credentials(ctx, s, spec.Chart.SecretRef)
		if err != nil {
			return false, err
		}
		ch, err := r.Fetcher.Chart(ctx, *spec.Chart, creds)
		if err != nil {
			return false, classifyFetch(err)
		}
		s.chart = ch
		s.addon.Status.Source = chartSourceString(spec.Chart, ch)
		s.addon.Status.Version = ch.Version
	case spec.Git != nil:
		creds, err := r.credentials(ctx, s, spec.Git.SecretRef)
		if err != nil {
			return false, err
		}
		tree, err := r.Fetcher.Git(ctx, *spec.Git, creds)
		if err != nil {
			return false, classifyFetch(err)
		}
		s.tree = tree
		s.addon.Status.Source = strings.TrimSuffix(spec.Git.URL+"//"+spec.Git.Path, "//")
		s.addon.Status.Version = shortCommit(tree.Commit)
	default:
		return false, terminal{errors.New("spec has no source: set spec.chart or spec.git")}
	}
	return false, nil
}

// classifyFetch makes fetch errors a person must fix terminal: a wrong
// digest, an unknown version, a refused address, a broken archive. Network
// trouble stays transient.
func classifyFetch(err error) error {
	var mismatch *source.DigestMismatchError
	var archive *source.ArchiveError
	if errors.As(err, &mismatch) || errors.As(err, &archive) {
		return terminal{err}
	}
	var fe *source.FetchError
	if errors.As(err, &fe) && fe.Status >= 400 && fe.Status < 500 && fe.Status != 408 && fe.Status != 429 {
		return terminal{err}
	}
	return err
}

func (r *AddonReconciler) credentials(ctx context.Context, s *scope, ref *capstanv1.LocalObjectReference) (*source.Credentials, error) {
	if ref == nil {
		return nil, nil
	}
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: s.addon.Namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, terminal{fmt.Errorf("the credentials Secret %s/%s does not exist; create it or remove secretRef", s.addon.Namespace, ref.Name)}
		}
		return nil, err
	}
	creds, err := source.CredentialsFromSecret(secret)
	if err != nil {
		return nil, terminal{err}
	}
	return creds, nil
}

// resolveValues merges the add-on's values in the seeds' precedence and
// validates them. Values problems do not stop the reconcile: they go into
// the plan, which blocks.
func (r *AddonReconciler) resolveValues(ctx context.Context, s *scope) (bool, error) {
	if s.chart == nil {
		if s.addon.Spec.Values != nil || len(s.addon.Spec.ValuesFrom) > 0 {
			s.valuesErrors = append(s.valuesErrors, capstanv1.ValuesError{Path: "spec.values", Rule: "git-source",
				Message: "values and valuesFrom apply to Helm charts only; a git folder is used as it is"})
		}
		return false, nil
	}
	schema, err := values.SchemaForChart(s.chart.Chart)
	if err != nil {
		s.valuesErrors = append(s.valuesErrors, capstanv1.ValuesError{Path: "values.schema.json", Rule: "schema", Message: err.Error()})
		return false, nil
	}
	// NOTE: a plan on demand writes nothing: generated values not kept yet
	// are drawn in memory, and the values objects are adopted by the next
	// sync instead.
	var generated map[string]any
	if s.readOnly {
		generated, err = values.PreviewGenerated(ctx, r.APIReader, s.addon, s.profile, schema)
	} else {
		generated, err = values.EnsureGenerated(ctx, r.Client, s.addon, s.profile, schema)
	}
	if err != nil {
		var inv *values.InvalidError
		if errors.As(err, &inv) {
			s.valuesErrors = append(s.valuesErrors, inv.Errors...)
			return false, nil
		}
		return false, err
	}
	sources, err := values.Read(ctx, r.APIReader, s.addon, s.profile)
	if err != nil {
		var inv *values.InvalidError
		if errors.As(err, &inv) {
			s.valuesErrors = append(s.valuesErrors, inv.Errors...)
			return false, nil
		}
		return false, err
	}
	if s.profile == capstanv1.ProfileRestricted && !s.readOnly {
		// Label and own the values objects this add-on reads, so cleanup
		// and keep-on-remove find them.
		if _, err := values.Adopt(ctx, r.Client, s.addon, s.profile); err != nil {
			return false, err
		}
	}
	if r.Config.PlatformConfigMap != "" {
		s.platform, err = values.LoadPlatform(ctx, r.APIReader, types.NamespacedName{Namespace: r.Config.Namespace, Name: r.Config.PlatformConfigMap}, s.namespace)
		if err != nil {
			return false, err
		}
	} else {
		s.platform = values.Platform{Namespace: s.namespace}
	}
	res, err := values.Compose(values.Inputs{
		Chart: s.chart.Chart, Schema: schema, Generated: generated, Sources: sources,
		Platform: s.platform.Values(), PlatformKey: r.Config.PlatformKey,
	})
	if err != nil {
		var inv *values.InvalidError
		if errors.As(err, &inv) {
			s.valuesErrors = append(s.valuesErrors, inv.Errors...)
			return false, nil
		}
		return false, err
	}
	s.values = res
	s.valuesErrors = append(s.valuesErrors, res.Errors...)
	return false, nil
}

// renderObjects renders the chart or the folder. A chart is rendered for an
// upgrade once the add-on has been applied, so .Release.IsUpgrade matches
// the hooks that run.
func (r *AddonReconciler) renderObjects(ctx context.Context, s *scope) (bool, error) {
	if len(s.valuesErrors) > 0 && s.values == nil && s.chart != nil {
		// Without values there is nothing to render; the plan shows why.
		return false, nil
	}
	var err error
	switch {
	case s.chart != nil:
		caps, cerr := r.capabilities(false)
		if cerr != nil {
			return false, cerr
		}
		identity := render.SourceIdentity{Digest: s.chart.Digest, URL: s.chart.URL, Name: s.chart.Name, Version: s.chart.Version}
		hash, herr := render.Hash(identity, s.values.Values, s.releaseName(), s.namespace)
		if herr != nil {
			return false, terminal{herr}
		}
		// .Release.IsUpgrade follows the hook lifecycle: an install before
		// the first apply, an upgrade when the render changed since, and
		// a resync with nothing new renders as the last apply did.
		applied := s.addon.Status.AppliedHash
		switch {
		case applied == "":
			s.upgrade = false
		case applied != hash:
			s.upgrade = true
		default:
			s.upgrade = s.addon.Status.AppliedAsUpgrade
		}
		s.render, err = render.Helm(ctx, s.chart.Chart, s.values.Values, render.Options{
			ReleaseName: s.releaseName(), Namespace: s.namespace, Capabilities: caps, Upgrade: s.upgrade, Source: identity,
		})
	case s.tree != nil:
		s.render, err = render.Folder(s.tree.FS, s.addon.Spec.Git.Path, render.SourceIdentity{URL: s.addon.Spec.Git.URL, Commit: s.tree.Commit, Path: s.addon.Spec.Git.Path})
	}
	if err != nil {
		return false, terminal{err}
	}
	return false, nil
}

// prepare puts every object into the target namespace, labels it, and, for
// restricted add-ons, hardens pod specs and adds owner references. Jobs
// that are not hooks lose ttlSecondsAfterFinished, since a Job the TTL
// controller deleted would run again on the next sync.
func (r *AddonReconciler) prepare(ctx context.Context, s *scope) (bool, error) {
	if s.render == nil {
		return false, nil
	}
	spec := s.addon.Spec
	if s.profile == capstanv1.ProfileRestricted {
		addonRef := capstanv1.ObjectRef{APIVersion: capstanv1.GroupVersion.String(), Kind: "Addon", Namespace: s.addon.Namespace, Name: s.addon.Name}
		if spec.TargetNamespace != "" && spec.TargetNamespace != s.addon.Namespace {
			s.violations = append(s.violations, capstanv1.Violation{Object: addonRef, Path: "spec.targetNamespace", Rule: "target-namespace",
				Message: "a restricted add-on installs into its own namespace; remove spec.targetNamespace"})
		}
		if spec.CreateNamespace {
			s.violations = append(s.violations, capstanv1.Violation{Object: addonRef, Path: "spec.createNamespace", Rule: "create-namespace",
				Message: "a restricted add-on cannot create namespaces; remove spec.createNamespace"})
		}
	}
	crdScopes := renderedCRDScopes(s.render.Objects)
	objs := make([]*unstructured.Unstructured, 0, len(s.render.Objects)+1)
	if spec.CreateNamespace && s.profile == capstanv1.ProfileCluster && !renders(s.render.Objects, "Namespace", s.namespace) {
		ns := &unstructured.Unstructured{}
		ns.SetAPIVersion("v1")
		ns.SetKind("Namespace")
		ns.SetName(s.namespace)
		objs = append(objs, ns)
		s.createNamespace = s.namespace
	}
	for _, o := range s.render.Objects {
		objs = append(objs, o.DeepCopy())
	}
	s.hooks = make([]render.Hook, 0, len(s.render.Hooks))
	for _, h := range s.render.Hooks {
		h.Object = h.Object.DeepCopy()
		s.hooks = append(s.hooks, h)
	}
	all := make([]*unstructured.Unstructured, 0, len(objs)+len(s.hooks))
	all = append(all, objs...)
	for _, h := range s.hooks {
		all = append(all, h.Object)
	}
	for _, o := range all {
		if err := r.setNamespace(o, s, crdScopes); err != nil {
			return false, err
		}
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[capstanv1.AddonLabel] = s.addon.Name
		labels[capstanv1.AddonNamespaceLabel] = s.addon.Namespace
		labels[capstanv1.ManagedByLabel] = "capstan"
		o.SetLabels(labels)
	}
	for _, o := range objs {
		if o.GetKind() == "Job" && strings.HasPrefix(o.GetAPIVersion(), "batch/") {
			unstructured.RemoveNestedField(o.Object, "spec", "ttlSecondsAfterFinished")
		}
	}
	if s.profile == capstanv1.ProfileRestricted {
		// NOTE: Harden's errors are malformed pod templates, which the
		// guard's Check reports as violations in the plan.
		_ = guard.Harden(all)
		for _, o := range objs {
			if apply.Deletable(capstanv1.RefOf(o)) {
				// Appended, not replaced: owner references the chart sets
				// itself stay, and the guard refuses them.
				o.SetOwnerReferences(append(o.GetOwnerReferences(), ownerRef(s.addon)))
			}
		}
	}
	s.objects = objs
	return false, nil
}

// ownerRef is the owner reference of restricted objects to their Addon.
// It does not block the owner's deletion: Capstan deletes in its own order.
func ownerRef(addon *capstanv1.Addon) metav1.OwnerReference {
	f := false
	return metav1.OwnerReference{APIVersion: capstanv1.GroupVersion.String(), Kind: "Addon", Name: addon.Name, UID: addon.UID, BlockOwnerDeletion: &f}
}

// setNamespace puts a namespaced object without a namespace into the target
// namespace. Scope comes from the API server, or from a CRD in the render.
func (r *AddonReconciler) setNamespace(o *unstructured.Unstructured, s *scope, crdScopes map[schema.GroupKind]bool) error {
	gvk := o.GroupVersionKind()
	namespaced, known := crdScopes[gvk.GroupKind()]
	if !known {
		var err error
		namespaced, err = apiutil.IsGVKNamespaced(gvk, r.Client.RESTMapper())
		if err != nil {
			if apimeta.IsNoMatchError(err) {
				// The dry run names the unknown kind in the plan.
				return nil
			}
			return err
		}
	}
	switch {
	case !namespaced:
		o.SetNamespace("")
	case o.GetNamespace() == "":
		o.SetNamespace(s.namespace)
	}
	return nil
}

// renderedCRDScopes returns, for each kind a rendered CRD defines, whether it
// is namespaced.
func renderedCRDScopes(objs []*unstructured.Unstructured) map[schema.GroupKind]bool {
	out := map[schema.GroupKind]bool{}
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
		scope, _, _ := unstructured.NestedString(o.Object, "spec", "scope")
		out[schema.GroupKind{Group: group, Kind: kind}] = scope != "Cluster"
	}
	return out
}

func renders(objs []*unstructured.Unstructured, kind, name string) bool {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return true
		}
	}
	return false
}

// checkGuardrails runs the guardrails on restricted add-ons, hooks included.
func (r *AddonReconciler) checkGuardrails(ctx context.Context, s *scope) (bool, error) {
	if s.profile != capstanv1.ProfileRestricted || s.render == nil {
		return false, nil
	}
	all := append([]*unstructured.Unstructured{}, s.objects...)
	for _, h := range s.hooks {
		all = append(all, h.Object)
	}
	s.violations = append(s.violations, guard.Check(ctx, all, guard.Context{
		Namespace: s.addon.Namespace,
		AddonName: s.addon.Name,
		Platform:  guard.PlatformRefs{Secrets: s.platform.HandedOverSecrets()},
		Lookup:    guard.ClientLookup(r.APIReader, s.addon),
	})...)
	return false, nil
}

// preview dry-runs every object and compares it with what runs. It
// guarantees s.plan. Nothing is previewed when the guardrails or the values
// already block: the plan shows why.
func (r *AddonReconciler) preview(ctx context.Context, s *scope) (bool, error) {
	in := plan.Input{
		Full:             s.fullDiffs,
		Generation:       s.addon.Generation,
		Source:           s.planSource(),
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

// lifecycle decides which hooks a sync runs, from seed 000's table.
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
	l := obj.GetLabels()
	return l[capstanv1.AddonLabel] == addon.Name && l[capstanv1.AddonNamespaceLabel] == addon.Namespace
}

// gate runs the gates. A plan that may not be applied ends the reconcile
// with the gate's phase.
func (r *AddonReconciler) gate(ctx context.Context, s *scope) (bool, error) {
	s.verdict = plan.Decide(plan.State{
		Plan: s.plan, Suspend: s.addon.Spec.Suspend, Adopt: s.addon.Spec.Adopt, AllowAdoptChanges: s.addon.Spec.AllowAdoptChanges,
		ManualSync: s.addon.Spec.ManualSync, SyncRequest: s.addon.Spec.SyncRequest, ApprovedPlan: s.addon.Spec.ApprovedPlan,
		LastSyncRequest: s.addon.Status.LastSyncRequest,
	})
	if s.verdict.Apply {
		return false, nil
	}
	s.outcome = outcome{Phase: s.verdict.Phase, Reason: s.verdict.Reason, Message: s.verdict.Message,
		Stalled: s.verdict.Phase == capstanv1.PhaseBlocked || s.verdict.Phase == capstanv1.PhaseFailed}
	return true, nil
}

// applyPlan applies an approved plan in order: the inventory first (so a
// crash orphans nothing), CRDs and Namespaces (hooks may need them), pre
// hooks, the rest, prune, post hooks.
func (r *AddonReconciler) applyPlan(ctx context.Context, s *scope) (bool, error) {
	log := logf.FromContext(ctx)
	rendered := refs(s.objects)
	if union := apply.Union(s.addon.Status.Inventory, rendered); !slices.Equal(union, s.addon.Status.Inventory) {
		s.addon.Status.Inventory = union
		if err := r.writeStatusNow(ctx, s); err != nil {
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
		if err := r.writeStatusNow(ctx, s); err != nil {
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

// writeStatusNow patches status in the middle of a reconcile: the
// inventory before an apply, hook progress, and what was applied before the
// post hooks run. It reads the Addon from the API server, so the patch is
// computed against what is stored.
func (r *AddonReconciler) writeStatusNow(ctx context.Context, s *scope) error {
	latest := &capstanv1.Addon{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.addon), latest); err != nil {
		return err
	}
	patch := client.MergeFrom(latest.DeepCopy())
	st := &latest.Status
	st.Inventory = s.addon.Status.Inventory
	st.Hook = s.addon.Status.Hook
	st.Plan = s.addon.Status.Plan
	st.AppliedHash = s.addon.Status.AppliedHash
	st.AppliedAsUpgrade = s.addon.Status.AppliedAsUpgrade
	st.LastSyncRequest = s.addon.Status.LastSyncRequest
	st.LastAppliedTime = s.addon.Status.LastAppliedTime
	st.PendingHook = s.addon.Status.PendingHook
	return r.Client.Status().Patch(ctx, latest, patch)
}

// checkHealth waits, by requeueing, until the applied workloads are ready.
// It reads what the preview read, or the API server's answer to the apply.
func (r *AddonReconciler) checkHealth(ctx context.Context, s *scope) (bool, error) {
	known := r.verified.lookup(s.addon)
	for _, obj := range s.objects {
		if !healthKinds[obj.GetKind()] {
			continue
		}
		key := capstanv1.RefOf(obj).Key()
		if s.quiet[key] && known[key].healthy {
			// Healthy when verified, and not written since.
			continue
		}
		live := s.live[key]
		if live == nil {
			var err error
			if live, err = s.applier.Get(ctx, capstanv1.RefOf(obj)); err != nil {
				return false, err
			}
		}
		ready, why, err := workloadReady(obj, live)
		if err != nil {
			return false, err
		}
		if ready {
			r.verified.markHealthy(s.addon, key, live.GetResourceVersion())
		}
		if !ready {
			s.outcome = outcome{Phase: capstanv1.PhaseProgressing, Reason: "WaitingForWorkloads", Message: why}
			s.requeueAfter = r.Config.HealthPoll
			return true, nil
		}
	}
	msg := "Applied and healthy."
	if s.plan != nil {
		msg = "In sync: nothing to change."
	}
	s.outcome = outcome{Phase: capstanv1.PhaseSynced, Reason: "Synced", Message: msg}
	return true, nil
}

func refs(objs []*unstructured.Unstructured) []capstanv1.ObjectRef {
	out := make([]capstanv1.ObjectRef, 0, len(objs))
	for _, o := range objs {
		out = append(out, capstanv1.RefOf(o))
	}
	return out
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

func (s *scope) planSource() capstanv1.PlanSource {
	switch {
	case s.chart != nil:
		return capstanv1.PlanSource{Chart: s.chart.Name, Version: s.chart.Version, Digest: s.chart.Digest, URL: s.chart.URL}
	case s.tree != nil:
		return capstanv1.PlanSource{URL: s.addon.Spec.Git.URL, Commit: s.tree.Commit, Path: s.addon.Spec.Git.Path}
	}
	return capstanv1.PlanSource{}
}

func chartSourceString(spec *capstanv1.ChartSource, ch *source.Chart) string {
	switch {
	case spec.Repo != "":
		return strings.TrimSuffix(spec.Repo, "/") + "/" + spec.Name
	case spec.OCI != "":
		return spec.OCI
	}
	return ch.URL
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}
