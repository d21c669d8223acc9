package v1alpha1

// DeletionPolicyIn is what deleting the Addon does in profile: the
// uninstall annotation means Delete, then spec.deletionPolicy, then the
// profile's default (restricted: Delete, cluster: Orphan). The controller
// deletes by it, and the page's Remove form says it.
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
