package controller

import (
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestRecordedProfile: status.profile follows the profile the controller
// places the add-on in, except that one installed under the cluster
// profile stays recorded cluster while its inventory holds objects.
func TestRecordedProfile(t *testing.T) {
	held := []capstanv1.ObjectID{{ObjectRef: capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team", Name: "web-config"}}}
	for _, c := range []struct {
		name      string
		recorded  capstanv1.Profile
		inventory []capstanv1.ObjectID
		current   capstanv1.Profile
		want      capstanv1.Profile
	}{
		{"new, restricted", "", nil, capstanv1.ProfileRestricted, capstanv1.ProfileRestricted},
		{"new, cluster", "", nil, capstanv1.ProfileCluster, capstanv1.ProfileCluster},
		{"cluster, still trusted", capstanv1.ProfileCluster, held, capstanv1.ProfileCluster, capstanv1.ProfileCluster},
		{"cluster, no longer trusted, holding objects", capstanv1.ProfileCluster, held, capstanv1.ProfileRestricted, capstanv1.ProfileCluster},
		{"cluster, no longer trusted, holding nothing", capstanv1.ProfileCluster, nil, capstanv1.ProfileRestricted, capstanv1.ProfileRestricted},
		{"restricted, trusted now", capstanv1.ProfileRestricted, held, capstanv1.ProfileCluster, capstanv1.ProfileCluster},
		{"restricted, still", capstanv1.ProfileRestricted, held, capstanv1.ProfileRestricted, capstanv1.ProfileRestricted},
	} {
		st := &capstanv1.AddonStatus{Profile: c.recorded, Inventory: c.inventory}
		if got := recordedProfile(st, c.current); got != c.want {
			t.Errorf("%s: recordedProfile = %s, want %s", c.name, got, c.want)
		}
	}
}
