package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestInventoryMoved decides whether the inventory is in another cluster
// than the one the add-on targets: a recorded cluster that is not the
// target's is, and a status with none recorded (written by an older
// Capstan) is taken to be of the target's.
func TestInventoryMoved(t *testing.T) {
	here := &capstanv1.InventoryCluster{}
	edge := &capstanv1.InventoryCluster{Identity: "sha256:edge", Server: "https://10.0.0.1:6443"}
	for _, tc := range []struct {
		name     string
		recorded *capstanv1.InventoryCluster
		target   string
		moved    bool
	}{
		{"none recorded, local target", nil, "", false},
		{"none recorded, remote target", nil, "sha256:edge", false},
		{"local, still local", here, "", false},
		{"local, kubeConfig added", here, "sha256:edge", true},
		{"remote, kubeConfig removed", edge, "", true},
		{"remote, Secret repointed", edge, "sha256:other", true},
		{"remote, same cluster (a rotated token)", edge, "sha256:edge", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &capstanv1.AddonStatus{InventoryCluster: tc.recorded, Inventory: cms("a")}
			if got := inventoryMoved(st, tc.target); got != tc.moved {
				t.Errorf("inventoryMoved = %v, want %v", got, tc.moved)
			}
		})
	}
}

// TestPlaceInventory: an inventory in a former cluster leaves the scope
// with the status of an add-on never applied to the target (an install,
// nothing to prune, no hook pending), and the stored status is put back
// unless an apply took over; one with no cluster recorded records the
// target's; a new add-on records nothing before its apply.
func TestPlaceInventory(t *testing.T) {
	applied := metav1.Now()
	installed := func(cluster *capstanv1.InventoryCluster) capstanv1.AddonStatus {
		return capstanv1.AddonStatus{
			InventoryCluster: cluster, Inventory: cms("a", "b"),
			AppliedHash: "sha256:r1", AppliedAsUpgrade: true, LastAppliedTime: &applied, FirstHealthyTime: &applied,
			PendingHook:     &capstanv1.PendingHook{Event: "post-upgrade", Hash: "sha256:r1"},
			Hook:            &capstanv1.HookProgress{Event: "post-upgrade", Run: "r1"},
			History:         []capstanv1.Revision{{Number: 1}},
			LastSyncRequest: 3,
		}
	}
	local := &targetCluster{}
	edge := &targetCluster{server: "https://10.0.0.1:6443", identity: "sha256:edge"}

	t.Run("kubeConfig added to a local add-on", func(t *testing.T) {
		stored := installed(&capstanv1.InventoryCluster{})
		s := &scope{addon: &capstanv1.Addon{Status: *stored.DeepCopy()}, cluster: edge}
		placeInventory(s)
		placeInventory(s) // the uninstall's render selects the cluster again
		st := s.addon.Status
		want := capstanv1.InventoryCluster{Identity: "sha256:edge", Server: "https://10.0.0.1:6443"}
		if len(st.Inventory) != 0 || st.AppliedHash != "" || st.AppliedAsUpgrade || st.PendingHook != nil || st.Hook != nil || st.LastAppliedTime != nil || st.FirstHealthyTime != nil {
			t.Errorf("the target's status still holds the former cluster's: %+v", st)
		}
		if st.InventoryCluster == nil || *st.InventoryCluster != want {
			t.Errorf("recorded %+v, want %+v", st.InventoryCluster, want)
		}
		if len(st.History) != 1 || st.LastSyncRequest != 3 {
			t.Errorf("the Addon's history and requests were dropped: %+v", st)
		}
		if s.former == nil || len(s.former.Inventory) != 2 || s.former.InventoryCluster.Server != "" {
			t.Fatalf("the former cluster's status was not set aside: %+v", s.former)
		}
		if n := s.formerNotice(); n == nil || n.Path != "spec.kubeConfig" {
			t.Errorf("the plan does not say what stays in the former cluster: %+v", n)
		}
		// No apply took over: the status written is the stored one.
		keepFormer(s)
		if !equality.Semantic.DeepEqual(s.addon.Status, stored) {
			t.Errorf("a reconcile that applied nothing changed the stored status:\n%+v\nwant\n%+v", s.addon.Status, stored)
		}
	})

	t.Run("kubeConfig removed from a remote add-on", func(t *testing.T) {
		s := &scope{addon: &capstanv1.Addon{Status: installed(edge.inventoryCluster())}, cluster: local}
		placeInventory(s)
		if s.former == nil || len(s.addon.Status.Inventory) != 0 || *s.addon.Status.InventoryCluster != (capstanv1.InventoryCluster{}) {
			t.Errorf("the local cluster took the remote inventory as its own: %+v", s.addon.Status)
		}
	})

	t.Run("an older Capstan's status", func(t *testing.T) {
		s := &scope{addon: &capstanv1.Addon{Status: installed(nil)}, cluster: edge}
		placeInventory(s)
		if s.former != nil || len(s.addon.Status.Inventory) != 2 || s.addon.Status.InventoryCluster == nil || s.addon.Status.InventoryCluster.Identity != "sha256:edge" {
			t.Errorf("an unrecorded inventory is not the target's: former %+v, status %+v", s.former, s.addon.Status)
		}
	})

	t.Run("the same cluster", func(t *testing.T) {
		stored := installed(edge.inventoryCluster())
		s := &scope{addon: &capstanv1.Addon{Status: *stored.DeepCopy()}, cluster: edge}
		placeInventory(s)
		if s.former != nil || !equality.Semantic.DeepEqual(s.addon.Status, stored) {
			t.Errorf("the status of the same cluster changed: %+v", s.addon.Status)
		}
	})

	t.Run("a new add-on", func(t *testing.T) {
		s := &scope{addon: &capstanv1.Addon{}, cluster: edge}
		placeInventory(s)
		if s.former != nil || s.addon.Status.InventoryCluster != nil {
			t.Errorf("a new add-on recorded a cluster before its apply: %+v", s.addon.Status.InventoryCluster)
		}
	})
}

// cms is an inventory of ConfigMaps in namespace ns.
func cms(names ...string) []capstanv1.ObjectID {
	var refs []capstanv1.ObjectRef
	for _, n := range names {
		refs = append(refs, capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: n})
	}
	return capstanv1.IDsOf(refs)
}
