package controller

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestProfileChange: the sync of an add-on installed under the cluster
// profile, holding objects, that the controller places in the restricted
// profile now is held, and the message names the namespace, what this
// controller trusts and what to do; nothing else is held, a namespace
// newly trusted least of all. What the message says deleting the Addon
// does follows its deletion policy: left running by default, uninstalled
// when spec.deletionPolicy or the uninstall annotation says Delete.
func TestProfileChange(t *testing.T) {
	held := []capstanv1.ObjectID{{ObjectRef: capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "longhorn-system", Name: "longhorn"}}}
	shard, err := labels.Parse("capstan.dev/shard=a")
	if err != nil {
		t.Fatal(err)
	}
	conf := Config{Namespace: "capstan-shard-a", Selector: shard}.WithDefaults()
	for _, c := range []struct {
		name      string
		recorded  capstanv1.Profile
		inventory []capstanv1.ObjectID
		current   capstanv1.Profile
		holds     bool
		policy    capstanv1.DeletionPolicy
		uninstall bool
		says      []string
		not       []string
	}{
		{"new, restricted", "", nil, capstanv1.ProfileRestricted, false, "", false, nil, nil},
		{"cluster, still trusted", capstanv1.ProfileCluster, held, capstanv1.ProfileCluster, false, "", false, nil, nil},
		{"cluster, no longer trusted, holding objects", capstanv1.ProfileCluster, held, capstanv1.ProfileRestricted, true, "", false,
			[]string{"Deleting it leaves its software running", "default deletion policy, Orphan"}, []string{"uninstalls"}},
		{"cluster, no longer trusted, spec.deletionPolicy Orphan", capstanv1.ProfileCluster, held, capstanv1.ProfileRestricted, true, capstanv1.DeletionOrphan, false,
			[]string{"Deleting it leaves its software running", "spec.deletionPolicy is Orphan"}, []string{"uninstalls"}},
		{"cluster, no longer trusted, spec.deletionPolicy Delete", capstanv1.ProfileCluster, held, capstanv1.ProfileRestricted, true, capstanv1.DeletionDelete, false,
			[]string{"Deleting it uninstalls its software", "spec.deletionPolicy: Delete", "set spec.deletionPolicy: Orphan first", "only once its namespace is trusted again"}, []string{"left running", "leaves its software running"}},
		{"cluster, no longer trusted, uninstall annotation", capstanv1.ProfileCluster, held, capstanv1.ProfileRestricted, true, "", true,
			[]string{"Deleting it uninstalls its software", "capstan.dev/uninstall annotation", "remove that annotation first", "only once its namespace is trusted again"}, []string{"left running", "leaves its software running"}},
		{"cluster, no longer trusted, annotation and spec Delete", capstanv1.ProfileCluster, held, capstanv1.ProfileRestricted, true, capstanv1.DeletionDelete, true,
			[]string{"Deleting it uninstalls its software", "capstan.dev/uninstall annotation", "remove that annotation and set spec.deletionPolicy: Orphan first", "only once its namespace is trusted again"}, []string{"leaves its software running"}},
		{"cluster, no longer trusted, holding nothing", capstanv1.ProfileCluster, nil, capstanv1.ProfileRestricted, false, "", false, nil, nil},
		{"restricted, trusted now", capstanv1.ProfileRestricted, held, capstanv1.ProfileCluster, false, "", false, nil, nil},
		{"restricted, still", capstanv1.ProfileRestricted, held, capstanv1.ProfileRestricted, false, "", false, nil, nil},
	} {
		a := &capstanv1.Addon{}
		a.Namespace, a.Name = "capstan-system", "longhorn"
		a.Status = capstanv1.AddonStatus{Profile: c.recorded, Inventory: c.inventory}
		a.Spec.DeletionPolicy = c.policy
		if c.uninstall {
			a.Annotations = map[string]string{capstanv1.UninstallAnnotation: "true"}
		}
		h := profileChange(conf, a, c.current)
		if (h != nil) != c.holds {
			t.Errorf("%s: held = %v, want %v", c.name, h != nil, c.holds)
			continue
		}
		if h == nil {
			continue
		}
		if h.reason != "ProfileChanged" || !h.blocked {
			t.Errorf("%s: hold %s blocked=%v; want ProfileChanged, blocked", c.name, h.reason, h.blocked)
		}
		for _, want := range []string{"Installed under the cluster profile", "capstan.dev/shard=a", "--trusted-namespaces capstan-shard-a",
			"places namespace capstan-system in the restricted profile", "Nothing is applied, pruned or run", "Trust capstan-system again"} {
			if !strings.Contains(h.message, want) {
				t.Errorf("%s: the message %q does not say %q", c.name, h.message, want)
			}
		}
		for _, want := range c.says {
			if !strings.Contains(h.message, want) {
				t.Errorf("%s: the message %q does not say %q", c.name, h.message, want)
			}
		}
		for _, not := range c.not {
			if strings.Contains(h.message, not) {
				t.Errorf("%s: the message %q says %q", c.name, h.message, not)
			}
		}
	}
}

// TestUseUpSyncRequest: a hold uses up a pending sync request and its
// approval, so that neither applies once the hold ends; with no request
// pending (none raised, or a spec.syncRequest below the last one handled,
// as an older manifest applied again leaves it) status keeps what it
// recorded.
func TestUseUpSyncRequest(t *testing.T) {
	for _, c := range []struct {
		name         string
		spec         capstanv1.AddonSpec
		last         int64
		lastApproved string
		wantLast     int64
		wantApproved string
	}{
		{"an approval pending", capstanv1.AddonSpec{SyncRequest: 3, ApprovedPlan: "sha256:new"}, 2, "sha256:old", 3, "sha256:new"},
		{"a bare request pending", capstanv1.AddonSpec{SyncRequest: 3}, 2, "sha256:old", 3, ""},
		{"nothing pending", capstanv1.AddonSpec{SyncRequest: 2, ApprovedPlan: "sha256:old"}, 2, "sha256:old", 2, "sha256:old"},
		{"a request below the last handled", capstanv1.AddonSpec{SyncRequest: 1, ApprovedPlan: "sha256:new"}, 2, "sha256:old", 2, "sha256:old"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := capstanv1.AddonStatus{LastSyncRequest: c.last, LastApprovedPlan: c.lastApproved}
			useUpSyncRequest(&st, c.spec)
			if st.LastSyncRequest != c.wantLast || st.LastApprovedPlan != c.wantApproved {
				t.Errorf("status.lastSyncRequest %d, lastApprovedPlan %q; want %d and %q", st.LastSyncRequest, st.LastApprovedPlan, c.wantLast, c.wantApproved)
			}
		})
	}
}
