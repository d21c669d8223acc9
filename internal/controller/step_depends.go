package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// An add-on with spec.dependsOn waits, planned but applying nothing, until
// every add-on it names is Ready for its current generation. A dependency
// that becomes Ready wakes its dependents (the dependsOn index). A cycle
// and a missing dependency are conditions, never a crash; a removal with
// uninstall waits until no other add-on depends on the one removed.

// dependsOnIndex indexes Addons by the "namespace/name" of each add-on
// they depend on.
const dependsOnIndex = "spec.dependsOn"

// dependencyRecheck is how soon an add-on that waits for a dependency
// looks again, besides the wake-up when a dependency changes.
const dependencyRecheck = 30 * time.Second

// maxDependencyDepth bounds the walk that looks for a cycle.
const maxDependencyDepth = 64

// dependencyKeys are the keys an Addon is indexed under: the add-ons it
// depends on (dependencies), so that a restricted add-on's entry for
// another namespace wakes nothing and holds no uninstall.
func (c Config) dependencyKeys(a *capstanv1.Addon) []string {
	deps := c.dependencies(a)
	keys := make([]string, 0, len(deps))
	for _, d := range deps {
		keys = append(keys, d.String())
	}
	return keys
}

// dependencies are the add-ons a depends on, as the controller reads them:
// every entry of spec.dependsOn, but for a restricted add-on only those in
// its own namespace. A tenant may not reach past its namespace: it would
// read another add-on's phase and reason into its own status, learn which
// add-ons exist elsewhere from DependencyNotFound, and hold a platform
// add-on's uninstall for as long as it names it. Its entries for another
// namespace are the guardrail dependency-namespace (guard.CheckSpec),
// which blocks it; here they do not exist.
func (c Config) dependencies(a *capstanv1.Addon) []types.NamespacedName {
	restricted := c.Profile(a) == capstanv1.ProfileRestricted
	out := make([]types.NamespacedName, 0, len(a.Spec.DependsOn))
	for _, d := range a.Spec.DependsOn {
		ns := d.Namespace
		if ns == "" {
			ns = a.Namespace
		}
		if restricted && ns != a.Namespace {
			continue
		}
		out = append(out, types.NamespacedName{Namespace: ns, Name: d.Name})
	}
	return out
}

// hold is why a sync stops before it applies anything: a dependency not
// Ready, or a chart whose signature is missing or wrong.
type hold struct {
	reason, message string
	blocked         bool // a cycle or a missing add-on: a person must act
	// err is the error the hold stands for, when there is one (the
	// signature check's): a plan on demand returns it as it is, so its
	// callers tell it by its type.
	err error
}

// checkDependencies stops the sync before the gate while a dependency is
// not Ready. The plan is made first, so it shows what would change, and
// says what the add-on waits for.
func (r *AddonReconciler) checkDependencies(ctx context.Context, s *scope) (bool, error) {
	f, err := r.dependencyState(ctx, s.addon)
	if err != nil {
		return false, err
	}
	if f == nil {
		return false, nil
	}
	s.found.dependency = f
	if s.plan != nil {
		s.plan.Notices = append(s.plan.Notices, capstanv1.Notice{Path: "spec.dependsOn", Message: f.message})
	}
	if !f.blocked {
		s.requeueSoon(dependencyRecheck)
	}
	return true, nil
}

// dependencyState reads the dependencies: nil when every one is Ready, or
// when a depends on none. One the shard's cache does not hold is read from
// the API server, to tell one that does not exist from one of another
// shard.
func (r *AddonReconciler) dependencyState(ctx context.Context, a *capstanv1.Addon) (*hold, error) {
	deps := r.Config.dependencies(a)
	if len(deps) == 0 {
		return nil, nil
	}
	self := types.NamespacedName{Namespace: a.Namespace, Name: a.Name}
	if cycle := r.dependencyCycle(ctx, a, self); cycle != nil {
		names := make([]string, len(cycle))
		for i, k := range cycle {
			names[i] = k.String()
		}
		return &hold{reason: "DependencyCycle", blocked: true,
			message: "spec.dependsOn makes a cycle (" + strings.Join(names, " → ") + "): remove one of these dependencies"}, nil
	}
	var missing, outside, waiting []string
	for _, key := range deps {
		dep := &capstanv1.Addon{}
		err := r.Client.Get(ctx, key, dep)
		if apierrors.IsNotFound(err) && r.APIReader != nil {
			// NOTE: the shard's cache holds only the Addons its selector
			// matches (and one created a moment ago may not be in it
			// yet): the API server says whether the dependency exists.
			err = r.APIReader.Get(ctx, key, dep)
			if err == nil && !r.Config.Selects(dep.Labels) {
				outside = append(outside, key.String())
				continue
			}
		}
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, key.String())
			continue
		case err != nil:
			return nil, fmt.Errorf("reading the dependency %s: %w", key, err)
		}
		if why := notReady(dep); why != "" {
			waiting = append(waiting, key.String()+" ("+why+")")
		}
	}
	switch {
	case len(missing) > 0:
		return &hold{reason: "DependencyNotFound", blocked: true,
			message: "spec.dependsOn names add-ons that do not exist: " + strings.Join(missing, ", ") + "; create them, or remove them from spec.dependsOn"}, nil
	case len(outside) > 0:
		// NOTE: never waited for: this controller would not see them
		// change, nor hold their uninstall for this add-on.
		return &hold{reason: "DependencyInAnotherShard", blocked: true,
			message: "spec.dependsOn names add-ons that exist but belong to another controller shard (this controller's --watch-label-selector " + r.Config.Selector.String() + " does not select them): " +
				strings.Join(outside, ", ") + "; an add-on may depend only on add-ons of its own shard: label them for this shard, move this add-on to theirs, or remove them from spec.dependsOn"}, nil
	case len(waiting) > 0:
		return &hold{reason: "DependencyNotReady",
			message: "waits, applying nothing, until these add-ons are Ready: " + strings.Join(waiting, ", ")}, nil
	}
	return nil, nil
}

// notReady says why an add-on does not yet run what its current
// generation asks for, so that the add-ons that depend on it wait, or ""
// when it does. Ready counts, and so does Degraded: its latest spec is
// applied and was healthy, and an object of it that stopped being Current
// since is for its own status to report, not a reason to hold every add-on
// that depends on it, and theirs in turn; neither counts while a sync
// applies a new render of its generation (applying). So does an add-on
// that a gate holds (OutOfSync: an approval, a closed sync window, a prune
// to confirm, a drift fought; or Suspended), and one paused
// (capstan.dev/paused), once its current generation's render is the one
// applied (status.appliedGeneration) and its objects are Healthy for that
// generation, or, paused, were found healthy since that apply
// (status.firstHealthyTime): what the gate holds is a drift repair or a prune, and what
// the pause freezes is the software as it runs, not what its dependents
// wait for; holding them would spread one add-on's gate or pause to every
// add-on below it. Flux keeps a suspended dependency Ready for the same
// reason.
//
// NOTE: a paused look renders and judges nothing: a values object edited
// during the pause does not clear status.appliedGeneration, and the
// Healthy condition is the last look's before it.
func notReady(a *capstanv1.Addon) string {
	c := apimeta.FindStatusCondition(a.Status.Conditions, capstanv1.ConditionReady)
	switch {
	case a.DeletionTimestamp != nil:
		return "being removed"
	case c == nil:
		return "not reconciled yet"
	case c.ObservedGeneration != a.Generation:
		return "its latest change is not synced yet"
	case (c.Status == metav1.ConditionTrue || a.Status.Phase == capstanv1.PhaseDegraded) && applying(a):
		return string(a.Status.Phase) + ": " + c.Reason + ", with its latest change being applied"
	case c.Status == metav1.ConditionTrue || a.Status.Phase == capstanv1.PhaseDegraded:
		return ""
	case a.Status.Phase != capstanv1.PhaseOutOfSync && a.Status.Phase != capstanv1.PhaseSuspended && a.Status.Phase != capstanv1.PhasePaused:
		return string(a.Status.Phase) + ": " + c.Reason
	case a.Status.AppliedGeneration != a.Generation:
		return string(a.Status.Phase) + ": " + c.Reason + ", with its latest change not applied yet"
	case a.Status.PendingHook != nil:
		// NOTE: appliedGeneration is recorded before the post hooks run;
		// one that failed (a migration) is still to succeed.
		return string(a.Status.Phase) + ": " + c.Reason + ", with its " + a.Status.PendingHook.Event + " hooks not done"
	}
	if a.Status.Phase == capstanv1.PhasePaused && a.Status.FirstHealthyTime != nil {
		// NOTE: a pause, often during an incident, freezes the add-on
		// as it runs: one found healthy since its last apply and
		// Degraded or lapsing since counts Ready, as a Degraded one does.
		return ""
	}
	h := apimeta.FindStatusCondition(a.Status.Conditions, capstanv1.ConditionHealthy)
	if h == nil || h.Status != metav1.ConditionTrue || h.ObservedGeneration != a.Generation {
		return string(a.Status.Phase) + ": " + c.Reason + ", with its objects not all Healthy"
	}
	return ""
}

// applying reports whether a sync is applying a render of the add-on's
// current generation that is not the one applied: a values object edited,
// a new chart version or commit, with no new generation. The sync cleared
// status.appliedGeneration (markApplied) and wrote it so before it
// applies (checkpointStatus), while Ready stays as the last sync left it
// until this one ends, through a wave's wait of up to spec.healthTimeout.
// An add-on never applied (no status.appliedHash) has no render to
// replace; every sync that ends Ready records the generation it applied.
func applying(a *capstanv1.Addon) bool {
	return a.Status.AppliedHash != "" && a.Status.AppliedGeneration != a.Generation
}

// dependencyCycle walks the dependencies depth first and returns the path
// back to self, if there is one.
func (r *AddonReconciler) dependencyCycle(ctx context.Context, a *capstanv1.Addon, self types.NamespacedName) []types.NamespacedName {
	seen := map[types.NamespacedName]bool{}
	var walk func(a *capstanv1.Addon, path []types.NamespacedName) []types.NamespacedName
	walk = func(a *capstanv1.Addon, path []types.NamespacedName) []types.NamespacedName {
		if len(path) > maxDependencyDepth {
			return nil
		}
		for _, key := range r.Config.dependencies(a) {
			next := append(slices.Clip(path), key)
			if key == self {
				return next
			}
			if seen[key] {
				continue
			}
			seen[key] = true
			dep := &capstanv1.Addon{}
			if err := r.Client.Get(ctx, key, dep); err != nil {
				continue
			}
			if cycle := walk(dep, next); cycle != nil {
				return cycle
			}
		}
		return nil
	}
	return walk(a, []types.NamespacedName{self})
}

// dependents lists the Addons whose removal a's uninstall waits for: those
// that depend on a, those being removed too, since a dependent must be gone
// before a is uninstalled. A restricted Addon of another namespace that
// names a is none of them (dependencies): it is Blocked, and a tenant holds
// no other namespace's uninstall. Nor is a itself, when its spec.dependsOn
// names it with its namespace: that one-add-on cycle would hold it for
// ever. Add-ons uninstalled together that depend on each other in a cycle
// would each wait for the others; cycleGoesFirst lets one of them go.
// staying says whether one of them is not being removed, which only a
// person moves on; stuck names those being removed whose own removal is
// Stalled (a failed pre-delete hook, a dependent of theirs that stays),
// which only a person moves on too; the others leave on their own.
func (r *AddonReconciler) dependents(ctx context.Context, a *capstanv1.Addon) (out []string, staying bool, stuck []string, err error) {
	list := &capstanv1.AddonList{}
	self := types.NamespacedName{Namespace: a.Namespace, Name: a.Name}
	if err := r.Client.List(ctx, list, client.MatchingFields{dependsOnIndex: self.String()}); err != nil {
		return nil, false, nil, fmt.Errorf("listing the add-ons that depend on %s: %w", self, err)
	}
	var cycle map[types.NamespacedName]bool
	for i := range list.Items {
		d := &list.Items[i]
		key := types.NamespacedName{Namespace: d.Namespace, Name: d.Name}
		if key == self {
			continue
		}
		if r.uninstalls(d) {
			if cycle == nil {
				cycle = cycleGoesFirst(self, func(k types.NamespacedName) ([]types.NamespacedName, bool) {
					if k == self {
						return r.Config.dependencies(a), true
					}
					dep := &capstanv1.Addon{}
					if err := r.Client.Get(ctx, k, dep); err != nil || !r.uninstalls(dep) {
						return nil, false
					}
					return r.Config.dependencies(dep), true
				})
			}
			if cycle[key] {
				continue
			}
		}
		out = append(out, key.String())
		staying = staying || d.DeletionTimestamp == nil
		if removalStalled(d) {
			stuck = append(stuck, key.String())
		}
	}
	slices.Sort(out)
	slices.Sort(stuck)
	return out, staying, stuck, nil
}

// removalStalled reports whether d is being removed and its removal waits
// for a person: Stalled, as written by a reconcile that saw the removal.
// The API server bumps an Addon's generation when it marks it deleted, so
// a Stalled left from before the removal (a failed install) is of an
// older generation, and says nothing of the removal.
func removalStalled(d *capstanv1.Addon) bool {
	c := apimeta.FindStatusCondition(d.Status.Conditions, capstanv1.ConditionStalled)
	return d.DeletionTimestamp != nil && c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == d.Generation
}

// uninstalls reports whether a is being removed with uninstall, and so
// waits for its dependents.
func (r *AddonReconciler) uninstalls(a *capstanv1.Addon) bool {
	return a.DeletionTimestamp != nil && a.DeletionPolicyFor(r.Config.Profile(a)) == capstanv1.DeletionDelete
}

// cycleGoesFirst breaks a cycle among add-ons uninstalled together. Each of
// them waits for its dependents, so add-ons that depend on each other in a
// cycle would wait for each other for ever. self's cycle is every add-on
// it reaches through spec.dependsOn and that reaches it back, all of them
// being uninstalled (deps returns an add-on's dependencies, and false for
// one that is not uninstalled). The first of the cycle by namespace/name
// goes first: cycleGoesFirst returns the others when self is that one, and
// nil otherwise. Once it is gone the rest is no longer a cycle, or a
// smaller one, and its add-ons go in their order, dependents first.
func cycleGoesFirst(self types.NamespacedName, deps func(types.NamespacedName) ([]types.NamespacedName, bool)) map[types.NamespacedName]bool {
	// What self reaches, walking only add-ons that are uninstalled.
	edges := map[types.NamespacedName][]types.NamespacedName{}
	queue := []types.NamespacedName{self}
	for len(queue) > 0 {
		k := queue[0]
		queue = queue[1:]
		if _, seen := edges[k]; seen {
			continue
		}
		next, ok := deps(k)
		if !ok {
			next = nil
		}
		edges[k] = next
		for _, n := range next {
			if _, seen := edges[n]; !seen {
				queue = append(queue, n)
			}
		}
	}
	// Of those, the ones that reach self back: self's cycle.
	back := map[types.NamespacedName][]types.NamespacedName{}
	for k, next := range edges {
		for _, n := range next {
			back[n] = append(back[n], k)
		}
	}
	cycle := map[types.NamespacedName]bool{}
	queue = []types.NamespacedName{self}
	for len(queue) > 0 {
		k := queue[0]
		queue = queue[1:]
		for _, p := range back[k] {
			if p != self && !cycle[p] {
				cycle[p] = true
				queue = append(queue, p)
			}
		}
	}
	for k := range cycle {
		if k.String() < self.String() {
			return nil
		}
	}
	return cycle
}
