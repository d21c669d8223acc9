package v1alpha1

// DeletionPolicyIn is what deleting the Addon does in profile: the
// uninstall annotation means Delete, then spec.deletionPolicy, then the
// profile's default (restricted: Delete, cluster: Orphan).
func (a *Addon) DeletionPolicyIn(profile Profile) DeletionPolicy {
	if a.Annotations[UninstallAnnotation] == "true" {
		return DeletionDelete
	}
	if p := a.Spec.DeletionPolicy; p != "" {
		return p
	}
	if profile == ProfileRestricted {
		return DeletionDelete
	}
	return DeletionOrphan
}

// DeletionProfile is the profile whose defaults deleting the Addon follows
// when the controller places it in current: the cluster profile when
// either current or status.profile is cluster, current otherwise. An
// add-on the cluster profile installed stays recorded cluster while it
// holds objects (the controller keeps status.profile so), and its deletion
// never does more than the cluster profile would: moved to a shard or a
// controller that does not trust its namespace, it is not uninstalled, nor
// are its values deleted, unless someone asks for that.
func (a *Addon) DeletionProfile(current Profile) Profile {
	if a.Status.Profile == ProfileCluster {
		return ProfileCluster
	}
	return current
}

// DeletionPolicyFor is what deleting the Addon does when the controller
// places it in current: DeletionPolicyIn of its DeletionProfile. The
// controller deletes by it, and the page's Remove form says it.
func (a *Addon) DeletionPolicyFor(current Profile) DeletionPolicy {
	return a.DeletionPolicyIn(a.DeletionProfile(current))
}
