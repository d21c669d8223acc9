package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/remote"
)

// The inventory is in one cluster, status.inventoryCluster. When
// spec.kubeConfig names another one (its Secret repointed, spec.kubeConfig
// added to an add-on installed here, or removed from one installed
// remotely), what status says was applied is not in the cluster Capstan
// now targets: the sync there is a new install, with the install hooks,
// the adoption gate for what already runs there, and nothing pruned or
// deleted on the strength of the former inventory. The former cluster is
// not touched (its kubeconfig may be gone): what runs there is left
// running, unmanaged, and a LeftOnFormerCluster event says so once the
// install there applies. Until then, the stored status still describes the
// former cluster, so an approval that never comes, or a kubeConfig pointed
// back, loses nothing.

// selectTarget is the pipeline's first step: it points the scope at the
// cluster spec.kubeConfig names (selectCluster), then at what status says
// was applied there (placeInventory). What the controller remembers of the
// add-on's objects is of that cluster from here on (verifiedObjects.target).
func (r *AddonReconciler) selectTarget(ctx context.Context, s *scope) (bool, error) {
	if _, err := r.selectCluster(ctx, s); err != nil {
		if classify(err) == classTerminal {
			// The kubeconfig is gone or unusable: the cluster it named
			// was let go of (dropRemote), and so are its stopped watch
			// cache and its client, with that cluster's credentials,
			// here.
			r.verified.release(client.ObjectKeyFromObject(s.addon))
		}
		return false, err
	}
	r.verified.target(s.addon, s.cluster.inventoryCluster(), s.cluster.watched, s.applier)
	placeInventory(s)
	return false, nil
}

// inventoryCluster is how status.inventoryCluster names c: empty fields for
// the controller's own cluster.
func (c *targetCluster) inventoryCluster() *capstanv1.InventoryCluster {
	return &capstanv1.InventoryCluster{Identity: c.identity, Endpoint: c.endpoint, Server: c.server}
}

// sameCluster reports whether two recorded clusters are one: the
// controller's own both, or remote clusters of one endpoint (the API
// server's URL and TLS server name, remote.Config.Endpoint). The account
// Capstan acts as there, its groups and the certificate authority do not
// make another cluster: an administrator who edits them in the kubeconfig
// Secret still points at the cluster that runs the add-on, which is
// upgraded there, not installed anew. A record without an endpoint was
// written by a Capstan that recorded none, and is compared by its server
// alone, so upgrading Capstan reinstalls nothing.
func sameCluster(a, b *capstanv1.InventoryCluster) bool {
	switch {
	case a.Identity == b.Identity:
		// NOTE: the identity covers the server and TLS server name, so
		// an equal one is the same endpoint, recorded or not.
		return true
	case a.Identity == "" || b.Identity == "":
		return false // one is the controller's own cluster
	case a.Endpoint != "" && b.Endpoint != "":
		return a.Endpoint == b.Endpoint
	}
	return remote.NormalServer(a.Server) == remote.NormalServer(b.Server)
}

// inventoryMoved reports whether the inventory of st is in another cluster
// than now, the one the add-on targets (targetCluster.inventoryCluster).
// A status with no cluster recorded was written by a Capstan that recorded
// none, and is taken to be of the cluster the add-on targets now:
// upgrading Capstan changes nothing.
func inventoryMoved(st *capstanv1.AddonStatus, now *capstanv1.InventoryCluster) bool {
	return st.InventoryCluster != nil && !sameCluster(st.InventoryCluster, now)
}

// placeInventory makes the scope's status describe the cluster the add-on
// targets now. A status with something applied and no cluster recorded
// records that cluster, and one of the same cluster reached otherwise
// (another account, certificate authority, or a record without an
// endpoint) records it as the kubeconfig names it now. An inventory in
// another cluster is set aside in s.former, and the status is that of an
// add-on never applied there, so that the steps after this one plan an
// install and prune nothing; patchStatus puts it back unless the apply
// took over (leaveFormer). It is idempotent: a second call finds the
// status of the new cluster.
func placeInventory(s *scope) {
	st := &s.addon.Status
	now := s.cluster.inventoryCluster()
	switch {
	case inventoryMoved(st, now):
		former := &capstanv1.AddonStatus{}
		moveClusterFields(former, st)
		moveClusterFields(st, &capstanv1.AddonStatus{InventoryCluster: now})
		s.former = former
	case st.InventoryCluster == nil && (len(st.Inventory) > 0 || st.AppliedHash != "" || st.PreHooksDone != nil || st.PendingHook != nil):
		st.InventoryCluster = now
	case st.InventoryCluster != nil && *st.InventoryCluster != *now:
		st.InventoryCluster = now
	}
}

// moveClusterFields sets the status fields of dst that describe what runs
// in the inventory's cluster to those of src: the inventory and its
// cluster, the render applied, for which generation and when, and the
// hooks running, pending or done, and a person's sync begun there.
// The history, the sync requests handled and the approvals stay: they are
// the Addon's, whichever cluster it targets.
func moveClusterFields(dst, src *capstanv1.AddonStatus) {
	dst.InventoryCluster, dst.Inventory = src.InventoryCluster, src.Inventory
	dst.AppliedHash, dst.AppliedAsUpgrade, dst.AppliedGeneration = src.AppliedHash, src.AppliedAsUpgrade, src.AppliedGeneration
	dst.LastAppliedTime, dst.FirstHealthyTime = src.LastAppliedTime, src.FirstHealthyTime
	dst.Hook, dst.PendingHook, dst.PreHooksDone, dst.SyncFailHooks = src.Hook, src.PendingHook, src.PreHooksDone, src.SyncFailHooks
	dst.SyncInProgress = src.SyncInProgress
}

// keepFormer puts back the status of the former cluster that
// placeInventory set aside, when no apply took over: a reconcile that
// waits (for an approval, a gate, a dependency) or fails before its apply
// leaves the stored status as it was, but for status.appliedGeneration,
// which it clears. The current generation does not run what it asks for
// in the cluster spec.kubeConfig names: nothing of it runs there yet. A
// kubeconfig Secret repointed is a change with no new generation, and a
// gate that holds the install there (a suspension, an approval) must
// hold the dependents too, or they go on into a cluster their dependency
// is not in. A kubeConfig pointed back finds the render applied again
// there, and markApplied records the generation again.
func keepFormer(s *scope) {
	if s.former != nil {
		moveClusterFields(&s.addon.Status, s.former)
		s.addon.Status.AppliedGeneration = 0
	}
}

// leaveFormer is the apply into a new cluster taking over the status: the
// inventory is this cluster's from here on, and a LeftOnFormerCluster event
// says what stays in the former one, running and unmanaged. action is the
// event's action: Apply, or Uninstall for an Addon deleted after it
// was repointed; now names the cluster spec.kubeConfig names.
func (r *AddonReconciler) leaveFormer(s *scope, action, now string) {
	former := s.former
	s.former = nil
	if former == nil || len(former.Inventory) == 0 || r.Recorder == nil {
		return
	}
	r.Recorder.Eventf(s.addon, nil, corev1.EventTypeWarning, reasonLeftOnFormerCluster, action, "%s", truncate(leftMessage(s.addon, former, now, action), 1000))
}

// reasonLeftOnFormerCluster is the reason of the event that says an
// add-on's objects stay in a cluster spec.kubeConfig no longer names.
const reasonLeftOnFormerCluster = "LeftOnFormerCluster"

// leftMessage says what stays in the former cluster, and how to remove
// it; now names the cluster spec.kubeConfig names, action is the event's.
func leftMessage(a *capstanv1.Addon, former *capstanv1.AddonStatus, now, action string) string {
	refs := capstanv1.RefsOf(former.Inventory)
	names := describeAll(refs)
	if len(names) > 5 {
		names = append(names[:5], fmt.Sprintf("and %d more", len(refs)-5))
	}
	did := "where Capstan installed the add-on anew"
	if action == "Uninstall" {
		did = "where the uninstall had nothing to delete"
	}
	return fmt.Sprintf("%d object(s) of the inventory stay in %s, running and unmanaged, since spec.kubeConfig now names %s, %s; Capstan neither changes nor deletes them (%s). Delete them there by their labels %s=%s,%s=%s if they should go.",
		len(refs), clusterName(former.InventoryCluster.Server), now, did, strings.Join(names, ", "),
		capstanv1.AddonLabel, a.Name, capstanv1.AddonNamespaceLabel, a.Namespace)
}

// formerNotice tells, in the plan, that its sync installs anew and leaves
// the inventory in the former cluster; nil when the inventory is in the
// cluster the add-on targets.
func (s *scope) formerNotice() *capstanv1.Notice {
	if s.former == nil {
		return nil
	}
	return &capstanv1.Notice{Path: "spec.kubeConfig", Message: fmt.Sprintf(
		"the inventory's %d object(s) are in %s, which spec.kubeConfig no longer names: this sync installs anew into %s, with the install hooks, prunes nothing there, and leaves them running in %s, unmanaged. To remove them with their delete hooks, point spec.kubeConfig back and delete the Addon with the %s annotation before this plan is applied",
		len(s.former.Inventory), clusterName(s.former.InventoryCluster.Server), clusterName(s.cluster.server),
		clusterName(s.former.InventoryCluster.Server), capstanv1.UninstallAnnotation)}
}

// clusterName names the cluster of an API server for a message: "" is the
// controller's own.
func clusterName(server string) string {
	if server == "" {
		return "the controller's own cluster"
	}
	return "the remote cluster " + server
}
