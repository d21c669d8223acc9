package v1alpha1

import "testing"

// TestDeletionPolicyFor: the default deletion policy is never more
// destructive than the profile status.profile records; the uninstall
// annotation and spec.deletionPolicy still decide when set.
func TestDeletionPolicyFor(t *testing.T) {
	for _, c := range []struct {
		name      string
		recorded  Profile
		current   Profile
		policy    DeletionPolicy
		uninstall bool
		want      DeletionPolicy
	}{
		{"restricted, as recorded", ProfileRestricted, ProfileRestricted, "", false, DeletionDelete},
		{"restricted, nothing recorded yet", "", ProfileRestricted, "", false, DeletionDelete},
		{"cluster, as recorded", ProfileCluster, ProfileCluster, "", false, DeletionOrphan},
		{"cluster, nothing recorded yet", "", ProfileCluster, "", false, DeletionOrphan},
		{"installed cluster, restricted now", ProfileCluster, ProfileRestricted, "", false, DeletionOrphan},
		{"installed restricted, cluster now", ProfileRestricted, ProfileCluster, "", false, DeletionOrphan},
		{"installed cluster, restricted now, spec Delete", ProfileCluster, ProfileRestricted, DeletionDelete, false, DeletionDelete},
		{"installed cluster, restricted now, uninstall", ProfileCluster, ProfileRestricted, "", true, DeletionDelete},
		{"installed cluster, restricted now, uninstall over spec Orphan", ProfileCluster, ProfileRestricted, DeletionOrphan, true, DeletionDelete},
		{"restricted, spec Orphan", ProfileRestricted, ProfileRestricted, DeletionOrphan, false, DeletionOrphan},
	} {
		a := &Addon{Spec: AddonSpec{DeletionPolicy: c.policy}, Status: AddonStatus{Profile: c.recorded}}
		if c.uninstall {
			a.Annotations = map[string]string{UninstallAnnotation: "true"}
		}
		if got := a.DeletionPolicyFor(c.current); got != c.want {
			t.Errorf("%s: DeletionPolicyFor(%s) = %s, want %s", c.name, c.current, got, c.want)
		}
	}
}
