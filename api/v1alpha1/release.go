package v1alpha1

// ReleaseNameIn is the Helm release name the Addon renders with in
// profile: spec.releaseName or the Addon's name; a restricted add-on's is
// always its name. The controller renders with it, and capstan render
// --restricted too.
func (a *Addon) ReleaseNameIn(profile Profile) string {
	if a.Spec.ReleaseName != "" && profile != ProfileRestricted {
		return a.Spec.ReleaseName
	}
	return a.Name
}

// TargetNamespaceIn is the namespace the Addon installs into in profile:
// its own, or, in the cluster profile, spec.targetNamespace when set. A
// restricted add-on installs into its own namespace only.
func (a *Addon) TargetNamespaceIn(profile Profile) string {
	if profile == ProfileCluster && a.Spec.TargetNamespace != "" {
		return a.Spec.TargetNamespace
	}
	return a.Namespace
}
