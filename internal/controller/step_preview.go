package controller

import (
	"context"
	"fmt"
	"maps"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/prepare"
	"capstan.dev/capstan/internal/render"
)

// preview dry-runs every object and compares it with what runs. It
// guarantees s.plan. Nothing is previewed when the guardrails or the values
// already block: the plan shows why.
func (r *AddonReconciler) preview(ctx context.Context, s *scope) (bool, error) {
	s.adoptFormerHash()
	if s.render != nil {
		markApplied(&s.addon.Status, s.render.Hash, s.addon.Generation)
	}
	in := plan.Input{
		Full:             s.fullDiffs,
		Generation:       s.addon.Generation,
		Source:           s.artifact.PlanSource(),
		Violations:       s.violations,
		ValuesErrors:     s.valuesErrors,
		EnsuredNamespace: s.createNamespace,
		Cluster:          s.cluster.identity,
	}
	if m := s.mask(); m != nil {
		in.Mask = m.String
	}
	if s.render != nil && len(s.violations) == 0 && len(s.valuesErrors) == 0 {
		if err := r.previewObjects(ctx, s); err != nil {
			return false, err
		}
		in.Rendered = s.objects
		in.Objects = s.previews
		s.kept, s.confirm, s.notOurs, s.claimsKept, s.claimsGo, s.pruneUIDs = s.leftOutOfInventory(), nil, nil, nil, nil, nil
		// NOTE: whether the add-on prunes or not: these kinds are never
		// deleted, and one the inventory kept would hold off another
		// add-on that renders it now (markOtherAddons). The Namespace
		// spec.createNamespace adds counts as rendered here, unlike for
		// the prune's empty-render guard: the add-on holds it while it
		// asks for it.
		s.released = apply.Subtract(apply.Released(capstanv1.RefsOf(s.addon.Status.Inventory), refs(s.objects)), sparedRefs(s.kept))
		// A restricted add-on always prunes: what a new render no longer
		// holds goes, as the tenant's chart decides.
		if s.addon.Spec.Prune || s.profile == capstanv1.ProfileRestricted {
			s.prune = apply.Subtract(apply.PruneSet(capstanv1.RefsOf(s.addon.Status.Inventory), prepare.RenderedRefs(s.objects, s.createNamespace)), sparedRefs(s.kept))
			if err := r.keptFromPrune(ctx, s); err != nil {
				return false, err
			}
			in.Prune, in.Confirm, in.PruneUIDs = s.prune, s.confirm, s.pruneUIDs
		}
		s.lifecycle = r.lifecycle(s)
		if s.appliesNothing() {
			s.addon.Status.AppliedGeneration = s.addon.Generation
		}
		generatedHooks := s.generatedFor(true)
		for _, h := range s.plannedHooks() {
			in.Hooks = append(in.Hooks, hookResult(s.hooks, h, generatedHooks))
		}
		in.Notices = hookNotices(s.hooks)
		if n := s.adoptionSkipsHooks(); n != nil {
			in.Notices = append(in.Notices, *n)
		}
		in.Notices = append(in.Notices, plan.ClaimNotices(s.previews, s.live)...)
		s.changes = plan.Changes(in)
		// NOTE: the CRD check comes last, once the plan but its
		// violations is known: whether it may make a shadow CRD depends on
		// whether that plan would be applied now, and its violations can
		// only hold the plan back.
		checked, applies := false, false
		v, n, err := r.crdSafety(ctx, s, func() bool {
			if !checked {
				checked, applies = true, r.appliesNow(ctx, s, in)
			}
			return applies
		})
		if err != nil {
			return false, err
		}
		if !s.addon.Spec.AllowUnsafeCRDChanges {
			s.violations = append(s.violations, v...)
			in.Violations = s.violations
		}
		s.crdNotices = n
	}
	if s.values != nil {
		for _, n := range s.values.Notices {
			in.Notices = append(in.Notices, capstanv1.Notice{Path: n.Path, Message: n.Message})
		}
	}
	if s.render != nil {
		for _, n := range s.render.Notices {
			in.Notices = append(in.Notices, capstanv1.Notice{Path: n.Path, Message: n.Message})
		}
	}
	if n := ignoredNotice(s.left, s.keepFrom(apply.Pruning) != apply.NoKeep); n != nil {
		in.Notices = append(in.Notices, *n)
	}
	if len(s.kept) > 0 {
		in.Notices = append(in.Notices, capstanv1.Notice{Path: "objects", Message: fmt.Sprintf(
			"%d object(s) the render no longer applies are marked to be kept, or never to be applied, so the sync leaves them running and drops them from the inventory, as Helm, Flux and Argo CD do: %s",
			len(s.kept), describeKept(s.kept, 5))})
	}
	if len(s.released) > 0 {
		in.Notices = append(in.Notices, capstanv1.Notice{Path: "objects", Message: fmt.Sprintf(
			"%d object(s) of a kind Capstan never deletes (CRDs, Namespaces, volumes) that the render no longer has leave the inventory and stay running, not deleted; another add-on that renders one may then adopt it: %s",
			len(s.released), describeKept(refsSpared(s.released), 5))})
	}
	if len(s.notOurs) > 0 {
		in.Notices = append(in.Notices, capstanv1.Notice{Path: "objects", Message: fmt.Sprintf(
			"%d object(s) of the inventory that the render no longer applies are not this add-on's: another Addon's labels are on them, or neither this add-on's labels nor a field it applied are (someone else made them under a name the inventory held); the prune does not delete them, and the sync leaves them running and drops them from the inventory: %s",
			len(s.notOurs), describeKept(s.notOurs, 5))})
	}
	if len(s.claimsKept) > 0 {
		in.Notices = append(in.Notices, capstanv1.Notice{Path: "objects", Message: fmt.Sprintf(
			"%d StatefulSet(s) that the prune deletes would have their PersistentVolumeClaims deleted with them (persistentVolumeClaimRetentionPolicy.whenDeleted: Delete); Capstan never deletes a claim, so it sets the policy to Retain first, and the claims and their volumes stay: %s",
			len(s.claimsKept), describeKept(s.claimsKept, 5))})
	}
	if len(s.claimsGo) > 0 {
		in.Notices = append(in.Notices, capstanv1.Notice{Path: "objects", Message: fmt.Sprintf(
			"%d object(s) that the prune deletes are named as owner by PersistentVolumeClaims, which the garbage collector then deletes, and with a Delete reclaim policy their volumes; Capstan keeps only a StatefulSet's claims from its delete. To keep them, mark the owner helm.sh/resource-policy: keep, or take its owner reference off the claims, before the prune: %s",
			len(s.claimsGo), describeKept(s.claimsGo, 5))})
	}
	in.Notices = append(in.Notices, s.generatedNotices...)
	in.Notices = append(in.Notices, s.crdNotices...)
	in.Notices = append(in.Notices, s.ignoreNotices...)
	if s.artifact != nil && s.artifact.Stale != "" {
		in.Notices = append(in.Notices, capstanv1.Notice{Path: "spec.chart.repo", Message: s.artifact.Stale})
	}
	if s.signedBy != "" {
		in.Notices = append(in.Notices, capstanv1.Notice{Path: "spec.chart.verify", Message: "the chart's signature is made by " + s.signedBy + " and names this chart"})
	}
	if s.cluster.server != "" {
		in.Notices = append(in.Notices, capstanv1.Notice{Path: "spec.kubeConfig", Message: "installs into the remote cluster " + s.cluster.server + " as " + s.cluster.as})
	}
	if n := s.formerNotice(); n != nil {
		in.Notices = append(in.Notices, *n)
	}
	if n := s.watchNotice(r.Config.ResyncInterval.String()); n != nil {
		in.Notices = append(in.Notices, *n)
	}
	s.plan = plan.Build(in)
	// The plan's text is masked here (its listed problems already, before
	// Build cut them): the status, its checkpoints and the plan on demand
	// all carry this plan.
	s.mask().Plan(s.plan)
	s.addon.Status.Plan = s.plan
	return false, nil
}

// adoptFormerHash records the render hash of a folder applied by a
// Capstan whose hash left the namespace out (render.Result.FormerHash) as
// this render's, when that render is this one: the same inputs, and every
// object it applies is in the inventory, where that apply put it. The
// upgrade of Capstan is then no new render, and adds no revision to
// status.history. A namespace changed meanwhile moves the objects out of
// the inventory's places, and stays a new render, with its hooks.
func (s *scope) adoptFormerHash() {
	st := &s.addon.Status
	if s.render == nil || s.render.FormerHash == "" || st.AppliedHash != s.render.FormerHash {
		return
	}
	if len(apply.Subtract(prepare.RenderedRefs(s.objects, s.createNamespace), capstanv1.RefsOf(st.Inventory))) > 0 {
		return
	}
	st.AppliedHash = s.render.Hash
	if p := st.PendingHook; p != nil && p.Hash == s.render.FormerHash {
		p.Hash = s.render.Hash
	}
}

// markApplied records in status.appliedGeneration whether the render this
// reconcile made of the current generation (hash) is the one applied: the
// generation when it is, so that its dependents need not wait for a gate
// that holds only a drift repair (notReady). When it is not, the
// generation no longer runs what it asks for, although an earlier render
// of it was applied: a valuesFrom ConfigMap or Secret edited, a new chart
// version that a semver range matches, or a new commit of the git branch
// it follows changes the render with no new generation. The field is
// cleared then, so that a gate holding that render holds the dependents
// too, as it holds them for a change of spec, until a sync applies it
// (recordApply). An older generation's value is kept: it is not the
// current one either way. A render that would change no object and run no
// hook counts as applied once the preview has shown it (appliesNothing).
//
// NOTE: a preview with no render (values errors, inputs missing) leaves
// the field as it is, as does a render that failed, whose reconcile ends
// before the preview: the first ends Blocked, the second Failed, and
// either phase holds the dependents whatever the field says (notReady);
// the next render decides again.
func markApplied(st *capstanv1.AddonStatus, hash string, generation int64) {
	switch {
	case st.AppliedHash != "" && hash == st.AppliedHash:
		st.AppliedGeneration = generation
	case st.AppliedGeneration == generation:
		st.AppliedGeneration = 0
	}
}

// appliesNothing reports whether this reconcile's render, although it is
// not the render applied (status.appliedHash), would apply nothing: it
// creates, updates and deletes no object and runs no hook (runsNoHook).
// The current generation then runs what it asks for, and markApplied's
// clearing of status.appliedGeneration is undone, whatever the source. A
// render's hash covers more than what it applies: a folder's names the
// commit, and any commit of the repository, in any folder, changes it; a
// chart's covers every value, the platform facts under `capstan` that a
// chart without a schema receives among them, and a valuesFrom key the
// chart never reads. A gate that holds an add-on whose objects would not
// change must not hold its dependents: one platform fact added, or one
// shared values key edited, would otherwise take every add-on below a
// suspended one out of Synced until it resumes. A change of an object is a
// change: one the render adds or edits is a create or an update, and one
// it drops a delete once the add-on prunes. One it drops from an add-on
// that does not prune counts as nothing: the sync would leave the object
// running as it is.
//
// NOTE: the comparison is with the live objects, since the objects of the
// render applied are not recorded. A drift repair pending on a held
// add-on is an update too, so a new render then holds the dependents
// until the add-on syncs: not knowing which of the two the update is, it
// is counted as a change. Called once lifecycle is decided; a preview
// that did not run (guardrails or values already block, or it failed)
// leaves markApplied's answer.
func (s *scope) appliesNothing() bool {
	return s.render != nil && s.addon.Status.AppliedHash != "" && !s.objectsChange() && s.runsNoHook()
}

// runsNoHook reports whether a sync of this render would run no hook. A
// folder's render that changes no object runs none (LifecycleNone). A
// chart's new render is an upgrade whatever it changes, as in Helm, so it
// runs none only when the chart has no pre- or post-upgrade hook, and no
// test that spec.test.enable runs after it (plannedHooks): a hook may do
// anything, a migration say, and a test may fail, so a render that runs
// one is a change its dependents wait for. Pre-upgrade hooks of this render
// that ran before a stop are hooks of a sync begun, and count too. Post
// hooks still pending (LifecycleRetryPost) run.
func (s *scope) runsNoHook() bool {
	switch s.lifecycle {
	case LifecycleNone:
		return true
	case LifecycleUpgrade:
		d := s.addon.Status.PreHooksDone
		return len(s.plannedHooks()) == 0 && (d == nil || d.Hash != s.render.Hash)
	}
	return false
}

// objectsChange reports whether the plan creates, updates or deletes an
// object.
func (s *scope) objectsChange() bool {
	if len(s.prune) > 0 {
		return true
	}
	for _, p := range s.previews {
		if p.Action != capstanv1.ActionUnchanged {
			return true
		}
	}
	return false
}

// lifecycle decides which hooks a sync runs, from Helm's hook table. A
// folder's new render that changes no object runs none.
func (r *AddonReconciler) lifecycle(s *scope) Lifecycle {
	applied := s.addon.Status.AppliedHash
	switch {
	case applied == "" && s.addon.Spec.Adopt && anyAdopted(s.previews):
		return LifecycleNone
	case installBegun(&s.addon.Status, s.render.Hash):
		return LifecycleUpgrade
	case applied == "":
		return LifecycleInstall
	case applied != s.render.Hash && s.render.Folder && !s.objectsChange():
		// NOTE: a folder's render changes with every commit of its
		// repository, and its hooks are Argo CD's, which run only on a
		// sync that changes something. Post hooks still pending run, and
		// only they.
		if s.addon.Status.PendingHook != nil {
			return LifecycleRetryPost
		}
		return LifecycleNone
	case applied != s.render.Hash:
		return LifecycleUpgrade
	case s.addon.Status.PendingHook != nil && s.addon.Status.PendingHook.Hash == applied:
		return LifecycleRetryPost
	}
	return LifecycleNone
}

// installBegun reports whether an install ran its pre-install hooks and
// then stopped before its apply was recorded, and the render is no longer
// the one it began with: its objects may be live. The release exists, as
// Helm would say, so the render is an upgrade, and the pre-install hooks,
// which must not run after their main apply, never run again.
//
// Pre-upgrade hooks done with nothing recorded as applied can only follow
// such an install, and the checkpoint that says so replaced the
// pre-install one: that install has begun too, whatever the render.
func installBegun(st *capstanv1.AddonStatus, hash string) bool {
	d := st.PreHooksDone
	if st.AppliedHash != "" || d == nil {
		return false
	}
	switch d.Event {
	case hookEvents[LifecycleInstall][0]:
		return d.Hash != hash
	case hookEvents[LifecycleUpgrade][0]:
		return true
	}
	return false
}

// adoptionSkipsHooks is the notice of a first sync that adopts objects
// that already run and also creates objects. With spec.adopt it is an
// adoption (lifecycle), which runs no install hook, and since the syncs
// after it are upgrades, no pre-install or post-install hook runs ever.
// Adopting a running database must not run its pre-install initdb over
// it, so one adopted object is enough to skip them; but when the adopted
// object is only shared (a CRD or a ClusterRole installed apart), the
// chart's install hooks may be what its software needs to start. The
// plan names the hooks that will not run, and what to do, from the plan
// that waits for spec.adopt on, so that it is read before the adoption.
func (s *scope) adoptionSkipsHooks() *capstanv1.Notice {
	if s.addon.Status.AppliedHash != "" || s.lifecycle == LifecycleUpgrade {
		return nil
	}
	var adopted []string
	created := 0
	for _, p := range s.previews {
		switch {
		case p.Adopted:
			adopted = append(adopted, p.Ref.Describe())
		case p.Action == capstanv1.ActionCreate:
			created++
		}
	}
	if len(adopted) == 0 || created == 0 {
		return nil
	}
	var skipped []string
	for _, event := range hookEvents[LifecycleInstall] {
		for _, h := range hooks.Select(s.hooks, event) {
			skipped = append(skipped, event+" "+capstanv1.RefOf(h.Object).Describe())
		}
	}
	if len(skipped) == 0 {
		return nil
	}
	return &capstanv1.Notice{Path: "spec.adopt", Message: fmt.Sprintf(
		"with spec.adopt, this first sync adopts %d object(s) that already run (%s) and creates %d; an adoption of what already runs runs no hooks, and the syncs after it are upgrades, so these install hooks never run: %s. "+
			"Capstan cannot run them later. If the software already runs, that is right: its install hooks must not run again. "+
			"If what already runs is only shared with the chart (a CRD or a ClusterRole installed apart) and the chart needs its install hooks, "+
			"leave those objects out of the render (with the chart's values that skip them) and sync with spec.adopt false: that sync is an install, and runs them",
		len(adopted), describeFirst(adopted, 3), created, describeFirst(skipped, 5))}
}

// describeFirst joins the first n of items, and says how many more there are.
func describeFirst(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

func anyAdopted(previews []plan.ObjectResult) bool {
	for _, p := range previews {
		if p.Adopted {
			return true
		}
	}
	return false
}

// previewObjects previews every object with plan.PreviewObjects, from
// what the controller remembers: the dry runs verified before and the watch
// cache's resourceVersions. It keeps what this preview verified.
func (r *AddonReconciler) previewObjects(ctx context.Context, s *scope) error {
	p, err := plan.PreviewObjects(ctx, s.applier, plan.PreviewInput{
		Addon: s.addon, Objects: s.objects, CreatedNamespace: s.createNamespace,
		Known: r.verified.lookup(s.addon), Watched: r.watchedVersions(ctx, s), Now: time.Now(),
		Hides: s.mask().holder(), Recreate: s.addon.Spec.Recreate, Generated: s.generatedFor(false), FullDiffs: s.fullDiffs,
		Grace: &r.dryRunGrace,
	})
	if p != nil {
		r.verified.store(s.addon, p.Verified)
	}
	if err != nil {
		return err
	}
	s.previews, s.live, s.quiet, s.digests = p.Objects, p.Live, p.Quiet, p.Digests
	return r.markOtherAddons(ctx, s)
}

// keptFromPrune takes out of s.prune the objects a mark keeps from a
// prune (apply.KeptBy: Helm's resource policy, Flux's prune: disabled,
// kapp's delete-strategy: orphan, Argo CD's Prune=false), reading each one's metadata as the applying
// identity: the author marked them to outlive the manifests. Only in the
// cluster profile (keepFrom). It takes out too, into s.notOurs, the
// objects that the prune's holder leaves running, in both profiles:
// another Addon holds them, or their live metadata does not show them to
// be this add-on's (apply.NotOurs). It also finds those the prune deletes
// only with a person's confirmation (apply.ConfirmPrune), and the
// StatefulSets whose claims it keeps from their delete (s.claimsKept), in
// both profiles, and keeps the UID of each object it leaves in s.prune,
// which the plan's hash binds the delete to. A read that fails fails the
// preview, to be retried: an object whose mark was not read must not be
// pruned without its confirmation.
func (r *AddonReconciler) keptFromPrune(ctx context.Context, s *scope) error {
	if len(s.prune) == 0 {
		return nil
	}
	keep, holder := s.keepFrom(apply.Pruning), r.holder(s)
	var prune []capstanv1.ObjectRef
	owners := map[types.UID]capstanv1.ObjectRef{}
	for _, ref := range s.prune {
		m, err := s.applier.ReadMetadata(ctx, ref)
		if err != nil {
			return fmt.Errorf("reading %s, which the prune would delete: %w", ref.Describe(), err)
		}
		if m != nil {
			if by := apply.KeptBy(m, keep); by != "" {
				s.kept = append(s.kept, apply.Spared{Ref: ref, KeptBy: by})
				continue
			}
			// NOTE: decided by the prune's own holder, after KeptBy as the
			// prune decides, from the read the marks need already, so that
			// the plan lists no delete the prune would not make. The prune
			// reads the object again: one that is this add-on's by then is
			// still only dropped from the inventory, never deleted without
			// a plan that showed its delete.
			h, err := holder(ctx, ref, m)
			if err != nil {
				return err
			}
			if h != (apply.Hold{}) {
				s.notOurs = append(s.notOurs, apply.Spared{Ref: ref, Holder: h.Addon, NotOurs: h.NotOurs})
				continue
			}
			if apply.ConfirmPrune(m) {
				s.confirm = append(s.confirm, ref)
			}
			claimsGo, err := r.deletesClaims(ctx, s, ref)
			if err != nil {
				return err
			}
			if claimsGo {
				s.claimsKept = append(s.claimsKept, apply.Spared{Ref: ref})
			}
			if !apply.IsStatefulSet(ref) && !isPod(ref) {
				owners[m.GetUID()] = ref
			}
			if s.pruneUIDs == nil {
				s.pruneUIDs = map[string]types.UID{}
			}
			s.pruneUIDs[ref.Key()] = m.GetUID()
		}
		prune = append(prune, ref)
	}
	s.prune = prune
	s.claimsGo = ownedClaims(ctx, s, owners)
	return nil
}

// ownedClaims names the objects of owners (the prune's deletes by UID)
// that a PersistentVolumeClaim names as owner, each with the first such
// claim: the garbage collector deletes the claim with its owner, as after
// Helm's or Flux's delete of it (an operator's custom resource that owns
// its database's claims). A claim may name an owner in its own namespace
// or a cluster-scoped one, so the claims of each namespaced owner's
// namespace are read once, and of every namespace only when a
// cluster-scoped owner is among them. The notice is the only use of these
// reads: a list the identity may not make, or one that fails, names
// nothing and is logged, and never fails the sync.
//
// NOTE: a StatefulSet's claims are kept from its delete (releaseClaims),
// and a Pod's are its generic ephemeral volumes, made to go with it: both
// are left out of owners.
func ownedClaims(ctx context.Context, s *scope, owners map[types.UID]capstanv1.ObjectRef) []apply.Spared {
	if len(owners) == 0 {
		return nil
	}
	namespaces := map[string]bool{}
	for _, ref := range owners {
		namespaces[ref.Namespace] = true
	}
	claimOf := map[types.UID]string{}
	read := func(ns string) bool {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaimList"))
		if err := s.applier.List(ctx, list, client.InNamespace(ns)); err != nil {
			if !apierrors.IsForbidden(err) {
				logf.FromContext(ctx).Info("Cannot list the PersistentVolumeClaims the prune's deletes may own; the plan names none of them there",
					"namespace", ns, "error", s.mask().String(err.Error()))
			}
			return false
		}
		for _, c := range list.Items {
			for _, o := range c.GetOwnerReferences() {
				if _, ok := owners[o.UID]; ok && claimOf[o.UID] == "" {
					claimOf[o.UID] = c.Namespace + "/" + c.Name
				}
			}
		}
		return true
	}
	// Every namespace at once when a cluster-scoped owner asks for it; the
	// namespaced owners' own namespaces when that list is not to be had.
	if !namespaces[""] || !read("") {
		for _, ns := range slices.Sorted(maps.Keys(namespaces)) {
			if ns != "" {
				read(ns)
			}
		}
	}
	var out []apply.Spared
	for uid, ref := range owners {
		if claim := claimOf[uid]; claim != "" {
			out = append(out, apply.Spared{Ref: ref, KeptBy: "owner of PersistentVolumeClaim " + claim})
		}
	}
	slices.SortFunc(out, func(a, b apply.Spared) int { return strings.Compare(a.Ref.Key(), b.Ref.Key()) })
	return out
}

// isPod reports whether ref names a Pod.
func isPod(ref capstanv1.ObjectRef) bool {
	return ref.APIVersion == "v1" && ref.Kind == "Pod"
}

// deletesClaims reports whether ref is a StatefulSet whose delete would
// take its claims with it (apply.DeletesClaims): the prune releases them
// first, and the plan says so. Only a StatefulSet is read in full.
func (r *AddonReconciler) deletesClaims(ctx context.Context, s *scope, ref capstanv1.ObjectRef) (bool, error) {
	if !apply.IsStatefulSet(ref) {
		return false, nil
	}
	live, err := s.applier.Get(ctx, ref)
	if err != nil {
		return false, fmt.Errorf("reading %s, which the prune would delete: %w", ref.Describe(), err)
	}
	return apply.DeletesClaims(live), nil
}

// leftOutOfInventory is what of the inventory the render holds but does
// not apply: a folder's objects that are hooks now, objects Skip leaves
// out, and objects marked never to be applied (leftOut). An earlier render
// applied them as plain objects (Capstan read no folder hooks before, or
// the mark is new), and they leave the inventory running, whether the
// add-on prunes or not, so that neither a prune nor the uninstall deletes
// them: a hook's object is the hook runner's now, which would otherwise
// create it and the prune delete it in one sync, and neither Argo CD nor
// Flux deletes what it was told to leave alone. In the restricted profile
// an object left out is pruned, as everything a tenant's render drops is.
func (s *scope) leftOutOfInventory() []apply.Spared {
	if s.render == nil || len(s.left) == 0 && !slices.ContainsFunc(s.hooks, s.appliedBefore) {
		return nil
	}
	var out []apply.Spared
	for _, ref := range apply.Subtract(capstanv1.RefsOf(s.addon.Status.Inventory), refs(s.objects)) {
		if by, hook := s.leftOut(ref); hook || by != "" && s.keepFrom(apply.Pruning) != apply.NoKeep {
			out = append(out, apply.Spared{Ref: ref, KeptBy: by})
		}
	}
	return out
}

// appliedBefore says whether the hook h may have been applied as a plain
// object by an earlier Capstan: a folder's hook (Capstan read no folder
// hooks before), or an item of a chart's List with a hook annotation (a
// Capstan that read each item's own annotations applied it). A chart's
// other hooks are Helm's, and were never applied as plain objects.
//
// NOTE: a restricted add-on prunes what its chart leaves out, so a tenant
// cannot keep an object running past the prune by wrapping it in a hook
// List.
func (s *scope) appliedBefore(h render.Hook) bool {
	return s.render.Folder || h.List && s.profile == capstanv1.ProfileCluster
}

// leftOut names what makes an object of the inventory one that this
// render holds but does not apply, and whether it is a hook now that may
// have been applied as a plain object: a folder's, or an item of a
// chart's List that is a hook; "" when it is neither.
func (s *scope) leftOut(ref capstanv1.ObjectRef) (by string, hook bool) {
	for _, h := range s.hooks {
		if s.appliedBefore(h) && capstanv1.RefOf(h.Object).Key() == ref.Key() {
			events := h.Object.GetAnnotations()[h.Annotation]
			if h.List {
				events = strings.Join(h.Events, ",") // the List's, not the item's
			}
			return h.Annotation + ": " + events + " (a hook now)", true
		}
	}
	for _, obj := range s.left {
		if capstanv1.RefOf(obj).Key() != ref.Key() {
			continue
		}
		if by := apply.Ignored(obj); by != "" {
			return by, false
		}
		if v, ok := obj.GetAnnotations()[render.ArgoHookAnnotation]; ok {
			return render.ArgoHookAnnotation + ": " + v, false
		}
		return "helm.sh/hook: " + obj.GetAnnotations()["helm.sh/hook"], false
	}
	return "", false
}

// ignoredNotice names the objects marked never to be applied, or nil when
// there are none: the plan lists no change for them, and the author
// should see that they are left alone; or, in the restricted profile
// (kept false), that one an earlier render applied is pruned.
func ignoredNotice(left []*unstructured.Unstructured, kept bool) *capstanv1.Notice {
	var names []string
	for _, obj := range left {
		if apply.Ignored(obj) != "" {
			names = append(names, capstanv1.RefOf(obj).Describe())
		}
	}
	if len(names) == 0 {
		return nil
	}
	what := "so, as in Flux, Capstan neither applies, changes nor deletes them"
	if !kept {
		what = "so Capstan does not apply them; one an earlier render applied is pruned, as everything a restricted add-on's render drops is"
	}
	return &capstanv1.Notice{Path: "objects", Message: fmt.Sprintf("%d object(s) are marked %s: Ignore, %s: %s",
		len(names), apply.FluxSSAAnnotation, what, strings.Join(names, ", "))}
}

// keepFrom is what annotations may keep this add-on's objects from: the
// deletion d in the cluster profile, nothing in the restricted one. A
// restricted add-on's objects are all owned by its Addon and go with it,
// so a tenant's manifests cannot leave objects behind in the namespace.
func (s *scope) keepFrom(d apply.Deletion) apply.Deletion {
	if s.profile != capstanv1.ProfileCluster {
		return apply.NoKeep
	}
	return d
}

// sparedRefs are the references of spared objects.
func sparedRefs(spared []apply.Spared) []capstanv1.ObjectRef {
	refs := make([]capstanv1.ObjectRef, 0, len(spared))
	for _, sp := range spared {
		refs = append(refs, sp.Ref)
	}
	return refs
}

// refsSpared are refs as spared objects, with nothing that keeps them.
func refsSpared(refs []capstanv1.ObjectRef) []apply.Spared {
	out := make([]apply.Spared, 0, len(refs))
	for _, r := range refs {
		out = append(out, apply.Spared{Ref: r})
	}
	return out
}

// describeAll names each of refs.
func describeAll(refs []capstanv1.ObjectRef) []string {
	var out []string
	for _, ref := range refs {
		out = append(out, ref.Describe())
	}
	return out
}

// describeKept names at most n spared objects, each with the annotation
// that keeps it or the Addon that holds it, when one does, and counts the
// rest.
func describeKept(kept []apply.Spared, n int) string {
	var names []string
	for i, k := range kept {
		if i == n {
			names = append(names, fmt.Sprintf("and %d more", len(kept)-n))
			break
		}
		name := k.Ref.Describe()
		switch {
		case k.KeptBy != "":
			name += " (" + k.KeptBy + ")"
		case k.Holder != "":
			name += " (Addon " + k.Holder + ")"
		}
		names = append(names, name)
	}
	return strings.Join(names, ", ")
}

// managedByIndex indexes Addons by the "namespace/name" of each other
// Addon their plan names on an object (plan.objects[].managedBy), so that
// the removal of that Addon wakes them.
const managedByIndex = "status.plan.objects.managedBy"

// managedByKeys are the keys an Addon is indexed under in managedByIndex.
func managedByKeys(a *capstanv1.Addon) []string {
	if a.Status.Plan == nil {
		return nil
	}
	var keys []string
	for _, o := range a.Status.Plan.Objects {
		if o.ManagedBy != "" && !slices.Contains(keys, o.ManagedBy) {
			keys = append(keys, o.ManagedBy)
		}
	}
	return keys
}

// markOtherAddons names, on each object the preview read, another Addon
// that applied it (its owner labels say so), targets the same cluster and
// still holds it in its inventory, for the OtherAddons gate: an object to
// adopt, or one of this add-on's own that the other's apply took since
// (two add-ons created at once can both create it; the one whose labels
// the object no longer carries is blocked). An Addon that is gone, or that
// let the object go, holds nothing: the object can be adopted as any
// other. Kinds an uninstall never deletes (CRDs, Namespaces, volumes) may
// be shared, since neither add-on deletes them: one held by another Addon
// is marked only when this plan would change it (the two would undo each
// other's fields on every sync, all applied by one field manager); one
// it leaves as it is goes into s.sharedWith, and an adoption writes no
// owner labels over the other's. The Addons are read from the manager's
// cache, and from the API server when the cache has not one (a shard's
// cache holds only its own). An
// Addon that cannot be read is an error, not an Addon that is gone: the
// object is not free until its owner is known to have let it go.
func (r *AddonReconciler) markOtherAddons(ctx context.Context, s *scope) error {
	s.sharedWith = nil
	for i := range s.previews {
		p := &s.previews[i]
		live := s.live[p.Ref.Key()]
		if live == nil {
			continue
		}
		if apply.Deletable(p.Ref) {
			by, err := r.heldBy(ctx, s, p.Ref, live)
			if err != nil {
				return err
			}
			p.ManagedBy = by
			continue
		}
		by, err := r.holding(ctx, s, p.Ref, live)
		switch {
		case err != nil:
			return err
		case by == "":
		case p.Action != capstanv1.ActionUnchanged:
			p.ManagedBy = by
		default:
			if s.sharedWith == nil {
				s.sharedWith = map[string]string{}
			}
			s.sharedWith[p.Ref.Key()] = by
		}
	}
	return nil
}

// heldBy names, as "namespace/name", another Addon that an object's owner
// labels name, that targets the same cluster and that still holds the
// object in its inventory; "" when none does, or the object is of a kind
// an uninstall never deletes.
func (r *AddonReconciler) heldBy(ctx context.Context, s *scope, ref capstanv1.ObjectRef, obj metav1.Object) (string, error) {
	if !apply.Deletable(ref) {
		return "", nil
	}
	return r.holding(ctx, s, ref, obj)
}

// holding is heldBy for an object of any kind.
func (r *AddonReconciler) holding(ctx context.Context, s *scope, ref capstanv1.ObjectRef, obj metav1.Object) (string, error) {
	labels := obj.GetLabels()
	key := client.ObjectKey{Namespace: labels[capstanv1.AddonNamespaceLabel], Name: labels[capstanv1.AddonLabel]}
	if key.Name == "" || key.Namespace == "" || key == client.ObjectKeyFromObject(s.addon) {
		return "", nil
	}
	other := &capstanv1.Addon{}
	err := r.Client.Get(ctx, key, other)
	if apierrors.IsNotFound(err) && r.APIReader != nil {
		err = r.APIReader.Get(ctx, key, other)
	}
	switch {
	case apierrors.IsNotFound(err):
		return "", nil // gone: nothing holds the object
	case err != nil:
		return "", fmt.Errorf("reading Addon %s, whose labels are on %s: %w", key, ref.Describe(), err)
	case !sameTarget(s, other):
		return "", nil // another cluster's
	}
	for _, held := range capstanv1.RefsOf(other.Status.Inventory) {
		if held.Key() == ref.Key() {
			return key.String(), nil
		}
	}
	return "", nil
}

// hookResult is a planned hook with the digest of its manifest, so a
// changed hook changes the plan's hash; what its chart generates at
// random is covered as a person can review it (plan.Generated), or a hook
// with a random password or name would make every approval stale.
func hookResult(hs []render.Hook, planned capstanv1.PlannedHook, generated plan.Generated) plan.HookResult {
	out := plan.HookResult{PlannedHook: planned}
	for _, h := range hs {
		if capstanv1.RefOf(h.Object) == planned.ObjectRef {
			out.Digest, out.RandomName = generated.ManifestDigest(h.Object), generated.RandomName(h.Object)
			break
		}
	}
	return out
}

// generatedFor is what the render's chart generates at random
// (s.generated) in the prepared objects, or with hooks in the hooks, by
// the prepared object's key, for the plan's hash (plan.Generated).
func (s *scope) generatedFor(hooks bool) plan.Generated {
	out := plan.Generated{}
	if s.render == nil || len(s.generated) == 0 {
		return out
	}
	out.Inputs = s.render.Hash
	for _, g := range s.generated {
		if g.Hook != hooks {
			continue
		}
		obj := s.renderedObject(g)
		if obj == nil {
			continue
		}
		if out.Paths == nil {
			out.Paths = map[string][][]string{}
		}
		key := capstanv1.RefOf(obj).Key()
		out.Paths[key] = append(out.Paths[key], g.Paths...)
	}
	return out
}

// sameTarget reports whether other's inventory is in the cluster s
// targets. Where other recorded its inventory's cluster, that record
// answers, by the rule that tells a moved inventory (sameCluster): two
// Secrets, or two keys, with one cluster's kubeconfig are one cluster.
// Otherwise the two spec.kubeConfig references are compared, the default
// key filled in.
func sameTarget(s *scope, other *capstanv1.Addon) bool {
	if c := other.Status.InventoryCluster; c != nil {
		return sameCluster(c, s.cluster.inventoryCluster())
	}
	a, b := other.Spec.KubeConfig, s.addon.Spec.KubeConfig
	if a == nil || b == nil {
		return a == b
	}
	return a.SecretRef.Name == b.SecretRef.Name && kubeConfigKey(a) == kubeConfigKey(b)
}
