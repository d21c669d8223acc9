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
// newly trusted least of all.
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
	}{
		{"new, restricted", "", nil, capstanv1.ProfileRestricted, false},
		{"cluster, still trusted", capstanv1.ProfileCluster, held, capstanv1.ProfileCluster, false},
		{"cluster, no longer trusted, holding objects", capstanv1.ProfileCluster, held, capstanv1.ProfileRestricted, true},
		{"cluster, no longer trusted, holding nothing", capstanv1.ProfileCluster, nil, capstanv1.ProfileRestricted, false},
		{"restricted, trusted now", capstanv1.ProfileRestricted, held, capstanv1.ProfileCluster, false},
		{"restricted, still", capstanv1.ProfileRestricted, held, capstanv1.ProfileRestricted, false},
	} {
		a := &capstanv1.Addon{}
		a.Namespace, a.Name = "capstan-system", "longhorn"
		a.Status = capstanv1.AddonStatus{Profile: c.recorded, Inventory: c.inventory}
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
			"places namespace capstan-system in the restricted profile", "Nothing is applied, pruned or run", "Trust capstan-system again", "Orphan"} {
			if !strings.Contains(h.message, want) {
				t.Errorf("%s: the message %q does not say %q", c.name, h.message, want)
			}
		}
	}
}
