package controller

import (
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestRecordedProfile: status.profile records the profile of the last
// reconcile that changed the add-on's objects. One that changed nothing
// keeps what status records while the inventory holds objects, so a
// controller that trusts a namespace for a while flips no restricted
// add-on to cluster; an add-on that holds nothing takes the profile of now.
func TestRecordedProfile(t *testing.T) {
	held := []capstanv1.ObjectID{{ObjectRef: capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team", Name: "web-config"}}}
	for _, c := range []struct {
		name      string
		recorded  capstanv1.Profile
		inventory []capstanv1.ObjectID
		current   capstanv1.Profile
		changed   bool
		want      capstanv1.Profile
	}{
		{"new, restricted", "", nil, capstanv1.ProfileRestricted, false, capstanv1.ProfileRestricted},
		{"new, cluster", "", nil, capstanv1.ProfileCluster, false, capstanv1.ProfileCluster},
		{"new, applied restricted", "", held, capstanv1.ProfileRestricted, true, capstanv1.ProfileRestricted},
		{"new, applied cluster", "", held, capstanv1.ProfileCluster, true, capstanv1.ProfileCluster},
		{"cluster, still trusted", capstanv1.ProfileCluster, held, capstanv1.ProfileCluster, false, capstanv1.ProfileCluster},
		{"cluster, still trusted, applied", capstanv1.ProfileCluster, held, capstanv1.ProfileCluster, true, capstanv1.ProfileCluster},
		{"cluster, no longer trusted, holding objects", capstanv1.ProfileCluster, held, capstanv1.ProfileRestricted, false, capstanv1.ProfileCluster},
		{"cluster, no longer trusted, holding nothing", capstanv1.ProfileCluster, nil, capstanv1.ProfileRestricted, false, capstanv1.ProfileRestricted},
		{"restricted, trusted now, nothing applied", capstanv1.ProfileRestricted, held, capstanv1.ProfileCluster, false, capstanv1.ProfileRestricted},
		{"restricted, trusted now, applied under cluster", capstanv1.ProfileRestricted, held, capstanv1.ProfileCluster, true, capstanv1.ProfileCluster},
		{"restricted, trusted now, holding nothing", capstanv1.ProfileRestricted, nil, capstanv1.ProfileCluster, false, capstanv1.ProfileCluster},
		{"restricted, still", capstanv1.ProfileRestricted, held, capstanv1.ProfileRestricted, false, capstanv1.ProfileRestricted},
		{"restricted, still, applied", capstanv1.ProfileRestricted, held, capstanv1.ProfileRestricted, true, capstanv1.ProfileRestricted},
	} {
		st := &capstanv1.AddonStatus{Profile: c.recorded, Inventory: c.inventory}
		if got := recordedProfile(st, c.current, c.changed); got != c.want {
			t.Errorf("%s: recordedProfile = %s, want %s", c.name, got, c.want)
		}
	}
}
