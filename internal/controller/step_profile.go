package controller

import (
	"context"
	"fmt"
	"strings"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// ReasonProfileChanged is the Ready reason of an add-on installed under
// the cluster profile that this controller places in the restricted
// profile, whose sync is held (profileChange). The operations that approve
// a plan (internal/addons) refuse an add-on with this reason.
const ReasonProfileChanged = "ProfileChanged"

// checkProfile stops the sync of an add-on installed under the cluster
// profile that this controller now places in the restricted profile, before
// anything is fetched, written or applied (profileChange). It guarantees
// that no reconcile applies, prunes, runs hooks or undoes drift under a
// profile the add-on was not installed under; its deletion is not a sync,
// and goes on as the recorded profile decides (reconcileDelete).
//
// It also guarantees that no approval outlives the hold: a sync request
// pending while the add-on is held is answered by the hold and recorded as
// handled, with its approval used up (useUpSyncRequest).
func (r *AddonReconciler) checkProfile(_ context.Context, s *scope) (bool, error) {
	h := profileChange(r.Config, s.addon, s.profile)
	if h == nil {
		return false, nil
	}
	s.found.profileChanged = h
	if !s.readOnly {
		useUpSyncRequest(&s.addon.Status, s.addon.Spec)
	}
	return true, nil
}

// useUpSyncRequest records the pending sync request of a held add-on as
// handled, and its approval as used up (plan.State.LastApprovedPlan).
//
// NOTE: the plan in status, which the hold leaves there, was computed
// under the cluster profile, and its hash does not name a profile: once
// the namespace is trusted again, the first plan has the same hash when
// nothing else changed. An approval written while the add-on was held
// (with kubectl, or one that raced the hold's first look; the operations
// refuse one once the hold is recorded) would then apply at once, whenever
// the trust came back, with nobody having looked at the add-on since. Used
// up here, it applies nothing: the plan waits for an approval given after
// the hold, as a manual sync's plan does.
func useUpSyncRequest(st *capstanv1.AddonStatus, spec capstanv1.AddonSpec) {
	if spec.SyncRequest > st.LastSyncRequest {
		st.LastSyncRequest, st.LastApprovedPlan = spec.SyncRequest, spec.ApprovedPlan
	}
}

// profileChange holds an add-on that status.profile records as installed
// under the cluster profile, that still holds objects, and that the
// controller places in the restricted profile now: its namespace is no
// longer trusted (the Addon moved to a shard whose controller does not
// trust it, or --trusted-namespaces changed). A restricted sync would apply
// it as the controller into the Addon's own namespace, with owner
// references, and prune what the cluster profile applied and the new
// render lacks: running cluster software changed and deleted by a relabel
// or a flag that nobody meant as an uninstall. Only a person can say which
// profile the add-on belongs to, so it is Blocked until one acts. The
// other way, restricted to cluster, is not held: the admin trusted the
// namespace, and the cluster profile only widens what the add-on may do.
func profileChange(c Config, addon *capstanv1.Addon, current capstanv1.Profile) *hold {
	st := addon.Status
	if current != capstanv1.ProfileRestricted || st.Profile != capstanv1.ProfileCluster || len(st.Inventory) == 0 {
		return nil
	}
	placed := placement(c)
	ns := addon.Namespace
	return &hold{reason: ReasonProfileChanged, blocked: true,
		message: fmt.Sprintf("Installed under the cluster profile, but this controller (%s) places namespace %s in the restricted profile, "+
			"where a sync would apply the add-on as the controller into %s and prune what the cluster profile applied (%d objects in the inventory). "+
			"Nothing is applied, pruned or run, and its software runs as it was; its plan cannot be approved while it is held, and a sync request made meanwhile is used up by the hold. Trust %s again (add it to the --trusted-namespaces of the controller "+
			"that selects this Addon, or move the Addon back to a shard that trusts it) and review the plan that follows, or delete the Addon and create it again where it belongs. %s",
			placed, ns, ns, len(st.Inventory), ns, deletionAdvice(addon, current))}
}

// placement names what decides the profiles of this controller: its
// --trusted-namespaces, and its shard's --watch-label-selector.
func placement(c Config) string {
	placed := "--trusted-namespaces " + strings.Join(c.TrustedNamespaces, ",")
	if c.Selector != nil && !c.Selector.Empty() {
		placed = "shard --watch-label-selector " + c.Selector.String() + ", " + placed
	}
	return placed
}

// deletionAdvice says what deleting a held add-on does to its software,
// as the controller's deletion decides it (Addon.DeletionPolicyFor): the
// way out that the hold offers besides trusting the namespace again must
// not uninstall the software of someone who asked for it to stay, nor keep
// quiet that it will.
func deletionAdvice(addon *capstanv1.Addon, current capstanv1.Profile) string {
	if addon.DeletionPolicyFor(current) == capstanv1.DeletionOrphan {
		why := "the cluster profile's default deletion policy, Orphan, still holds"
		if addon.Spec.DeletionPolicy == capstanv1.DeletionOrphan {
			why = "spec.deletionPolicy is Orphan"
		}
		return "Deleting it leaves its software running: " + why + "."
	}
	if addon.Annotations[capstanv1.UninstallAnnotation] == "true" {
		keep := "remove that annotation first"
		if addon.Spec.DeletionPolicy == capstanv1.DeletionDelete {
			keep = "remove that annotation and set spec.deletionPolicy: Orphan first"
		}
		return "Deleting it uninstalls its software, as the " + capstanv1.UninstallAnnotation + ` annotation asks, ` + heldUninstall + `: to leave the software running, ` + keep + "."
	}
	return "Deleting it uninstalls its software, as spec.deletionPolicy: Delete asks, " + heldUninstall + ": to leave the software running, set spec.deletionPolicy: Orphan first."
}

// heldUninstall says when the uninstall of a held add-on runs
// (uninstallHeld).
const heldUninstall = "but only once its namespace is trusted again: until then the deletion waits and deletes nothing"
