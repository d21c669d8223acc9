package hooks

import (
	"cmp"
	"slices"

	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/render"
)

// The delete policies Helm knows.
const (
	// BeforeHookCreation deletes the previous object of a hook before the
	// hook is created again. It is the default when a hook names no policy.
	BeforeHookCreation = "before-hook-creation"
	// HookSucceeded deletes a hook's object once every hook of the event
	// has succeeded.
	HookSucceeded = "hook-succeeded"
	// HookFailed deletes a hook's object when it fails.
	HookFailed = "hook-failed"
)

// Select returns the hooks that run for event, in the order they run.
//
// A hook runs for event when it names it and names no event Helm does not
// know (render.Hook.Runnable). The order is issue 7's, which is also what
// Helm's documentation promises: weight (lowest, that is most negative,
// first), then kind in Helm's install order, then name, then the order of
// the render. Helm v4's code puts name before kind (see docs/hooks.md for
// when the two differ). A weight that is not an integer was already made 0
// by the renderer, as Helm does. Hooks that wait for the applied objects to
// be Current (a folder's Argo CD PostSync hooks) come after all the others,
// as Argo CD runs PostSync after Sync.
func Select(hooks []render.Hook, event string) []render.Hook {
	var out []render.Hook
	for _, h := range hooks {
		if h.Runnable() && slices.Contains(h.Events, event) {
			out = append(out, h)
		}
	}
	rank := make(map[string]int, len(releaseutil.InstallOrder))
	for i, k := range releaseutil.InstallOrder {
		rank[k] = i
	}
	slices.SortStableFunc(out, func(a, b render.Hook) int {
		return cmp.Or(
			compareBools(a.AwaitsHealthy(event), b.AwaitsHealthy(event)),
			cmp.Compare(a.Weight, b.Weight),
			compareKinds(rank, a.Object.GetKind(), b.Object.GetKind()),
			cmp.Compare(a.Object.GetName(), b.Object.GetName()),
		)
	})
	return out
}

// compareBools orders false before true.
func compareBools(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// compareKinds orders kinds as Helm's install order does: listed kinds by
// their place in the list, unlisted kinds after them by name.
func compareKinds(rank map[string]int, a, b string) int {
	ra, aok := rank[a]
	rb, bok := rank[b]
	switch {
	case aok && bok:
		return cmp.Compare(ra, rb)
	case aok:
		return -1
	case bok:
		return 1
	}
	return cmp.Compare(a, b)
}

// DeletePolicies returns a hook's delete policies, with Helm's default,
// before-hook-creation, when it names none.
func DeletePolicies(h render.Hook) []string {
	if len(h.DeletePolicies) == 0 {
		return []string{BeforeHookCreation}
	}
	return h.DeletePolicies
}

// hasPolicy reports whether a hook's object is deleted on policy. A hook
// of a kind Capstan never deletes (apply.Deletable) is never deleted by a
// policy: Helm never deletes a CustomResourceDefinition hook, which would
// delete every object of its kind, and a PersistentVolumeClaim,
// PersistentVolume, StorageClass or Namespace hook holds data, as they do
// when a prune or an uninstall spares them. Such a hook's object from an
// earlier run is applied over, not created anew.
func hasPolicy(h render.Hook, policy string) bool {
	if neverDeleted(h) {
		return false
	}
	return slices.Contains(DeletePolicies(h), policy)
}

// neverDeleted reports whether a hook is of a kind Capstan never deletes.
func neverDeleted(h render.Hook) bool { return neverDeletedRef(capstanv1.RefOf(h.Object)) }

// neverDeletedRef reports whether ref is of a kind Capstan never deletes.
func neverDeletedRef(ref capstanv1.ObjectRef) bool {
	return ref.Kind == "CustomResourceDefinition" || !apply.Deletable(ref)
}
