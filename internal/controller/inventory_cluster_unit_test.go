package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/remote"
)

// TestInventoryMoved decides whether the inventory is in another cluster
// than the one the add-on targets: a recorded cluster of another endpoint
// (API server URL and TLS server name) is; the same endpoint reached as
// another account, with other groups or another certificate authority, is
// not; a record without an endpoint (written before Capstan recorded one)
// is compared by its server; and a status with none recorded (written by
// an older Capstan still) is taken to be of the target's.
func TestInventoryMoved(t *testing.T) {
	const server = "https://10.0.0.1:6443"
	edge := remote.Endpoint(server, "")
	here := &capstanv1.InventoryCluster{}
	at := func(identity, endpoint, server string) *capstanv1.InventoryCluster {
		return &capstanv1.InventoryCluster{Identity: identity, Endpoint: endpoint, Server: server}
	}
	target := at("sha256:edge", edge, server)
	for _, tc := range []struct {
		name     string
		recorded *capstanv1.InventoryCluster
		target   *capstanv1.InventoryCluster
		moved    bool
	}{
		{"none recorded, local target", nil, here, false},
		{"none recorded, remote target", nil, target, false},
		{"local, still local", here, here, false},
		{"local, kubeConfig added", here, target, true},
		{"remote, kubeConfig removed", target, here, true},
		{"remote, Secret repointed", target, at("sha256:other", remote.Endpoint("https://10.0.0.2:6443", ""), "https://10.0.0.2:6443"), true},
		{"remote, another TLS server name", target, at("sha256:sni", remote.Endpoint(server, "prod.internal"), server), true},
		{"remote, same cluster (a rotated token)", target, target, false},
		{"remote, same cluster as another account or groups", target, at("sha256:groups", edge, server), false},
		{"remote, same cluster spelled otherwise", target, at("sha256:slash", remote.Endpoint("HTTPS://10.0.0.1:6443/", ""), "HTTPS://10.0.0.1:6443/"), false},
		{"recorded before endpoints, same server, another account", at("sha256:old", "", server), at("sha256:groups", edge, server), false},
		{"recorded before endpoints, same server with a slash", at("sha256:old", "", server), at("sha256:groups", remote.Endpoint(server+"/", ""), server+"/"), false},
		{"recorded before endpoints, another server", at("sha256:old", "", server), at("sha256:other", remote.Endpoint("https://10.0.0.2:6443", ""), "https://10.0.0.2:6443"), true},
		{"recorded before endpoints, now local", at("sha256:old", "", server), here, true},
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
// unless an apply took over, with its appliedGeneration cleared, so that
// dependents wait while a gate holds the install; a kubeConfig pointed
// back records the generation again. One with no cluster recorded records
// the target's; a new add-on records nothing before its apply.
func TestPlaceInventory(t *testing.T) {
	applied := metav1.Now()
	installed := func(cluster *capstanv1.InventoryCluster) capstanv1.AddonStatus {
		return capstanv1.AddonStatus{
			InventoryCluster: cluster, Inventory: cms("a", "b"),
			AppliedHash: "sha256:r1", AppliedGeneration: 4, AppliedAsUpgrade: true, LastAppliedTime: &applied, FirstHealthyTime: &applied,
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
		if len(st.Inventory) != 0 || st.AppliedHash != "" || st.AppliedGeneration != 0 || st.AppliedAsUpgrade || st.PendingHook != nil || st.Hook != nil || st.LastAppliedTime != nil || st.FirstHealthyTime != nil {
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
		// No apply took over: the status written is the stored one, but
		// the current generation runs nowhere it asks for, so its
		// dependents wait.
		keepFormer(s)
		kept := stored.DeepCopy()
		kept.AppliedGeneration = 0
		if !equality.Semantic.DeepEqual(s.addon.Status, *kept) {
			t.Errorf("a reconcile that applied nothing changed the stored status:\n%+v\nwant\n%+v", s.addon.Status, *kept)
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
		keepFormer(s)
		if s.former != nil || !equality.Semantic.DeepEqual(s.addon.Status, stored) {
			t.Errorf("the status of the same cluster changed: %+v", s.addon.Status)
		}
	})

	t.Run("kubeConfig pointed back", func(t *testing.T) {
		// A reconcile held while the Secret named another cluster kept
		// this one's status, its appliedGeneration cleared.
		stored := installed(edge.inventoryCluster())
		stored.AppliedGeneration = 0
		s := &scope{addon: &capstanv1.Addon{Status: *stored.DeepCopy()}, cluster: edge}
		placeInventory(s)
		markApplied(&s.addon.Status, stored.AppliedHash, 4)
		if s.former != nil || s.addon.Status.AppliedGeneration != 4 {
			t.Errorf("appliedGeneration %d, former %+v; want 4, the render applied there found again", s.addon.Status.AppliedGeneration, s.former)
		}
	})

	t.Run("the same cluster as another account", func(t *testing.T) {
		const server = "https://10.0.0.1:6443"
		before := &targetCluster{server: server, identity: "sha256:installer", endpoint: remote.Endpoint(server, "")}
		after := &targetCluster{server: server, identity: "sha256:installer-with-groups", endpoint: remote.Endpoint(server, "")}
		for name, recorded := range map[string]*capstanv1.InventoryCluster{
			"recorded with its endpoint": before.inventoryCluster(),
			"recorded before endpoints":  {Identity: before.identity, Server: server},
		} {
			stored := installed(recorded)
			s := &scope{addon: &capstanv1.Addon{Status: *stored.DeepCopy()}, cluster: after}
			placeInventory(s)
			st := s.addon.Status
			if s.former != nil || len(st.Inventory) != 2 || st.AppliedHash != stored.AppliedHash || st.PendingHook == nil {
				t.Errorf("%s: an edited account made the same cluster another one: former %+v, status %+v", name, s.former, st)
			}
			if st.InventoryCluster == nil || *st.InventoryCluster != *after.inventoryCluster() {
				t.Errorf("%s: recorded %+v, want the cluster as the kubeconfig names it now, %+v", name, st.InventoryCluster, after.inventoryCluster())
			}
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
