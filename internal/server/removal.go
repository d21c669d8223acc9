package server

import capstanv1 "capstan.dev/capstan/api/v1alpha1"

// removal is what removing an Addon does, as its page's Remove form says
// it: the controller's deletion decides from the uninstall mark, then
// spec.deletionPolicy, then the default of the profile the deletion follows
// (Addon.DeletionProfile: cluster when status.profile records it or the
// controller places the add-on in it now; restricted: Delete, cluster:
// Orphan), and deletes the values Secrets and generated values of an add-on
// whose deletion follows the restricted profile unless they are kept.
type removal struct {
	// Says what removal does to the software, and to the values.
	Says string
	// Uninstall offers the uninstall box: only where it changes
	// something, the software staying otherwise.
	Uninstall bool
	// KeepValues offers the keep-values box: only where the values are
	// deleted otherwise (a restricted add-on, or one not placed in a
	// profile yet).
	KeepValues bool
}

// removalOf says what removing a does when the controller places it in
// placed now; "" when this server's controller does not reconcile it (it
// is another shard's), and status.profile stands for it.
func removalOf(a *capstanv1.Addon, placed capstanv1.Profile) removal {
	otherShard := placed == ""
	if otherShard {
		placed = a.Status.Profile
	}
	// NOTE: the policy and the profile are the controller's own rule;
	// only why it holds, and an Addon with no profile yet, are the form's.
	// A restricted add-on whose namespace is trusted now follows the
	// cluster profile, which does less, as the controller's deletion does.
	profile := a.DeletionProfile(placed)
	var policy capstanv1.DeletionPolicy
	why := ""
	switch {
	case a.Annotations[capstanv1.UninstallAnnotation] == "true":
		why = "it is marked " + capstanv1.UninstallAnnotation
	case a.Spec.DeletionPolicy != "":
		why = "its spec.deletionPolicy is " + string(a.Spec.DeletionPolicy)
	case profile != "":
		why = "a " + string(profile) + " add-on's default deletion policy is " + string(a.DeletionPolicyIn(profile))
		if a.Status.Profile == capstanv1.ProfileRestricted && profile == capstanv1.ProfileCluster {
			why = "it was installed restricted, but its namespace is trusted now, and a cluster add-on's default deletion policy is " + string(a.DeletionPolicyIn(profile))
		}
	}
	if why != "" {
		policy = a.DeletionPolicyIn(profile)
	}
	// NOTE: the controller holds the uninstall of a cluster add-on whose
	// namespace it no longer trusts, whether the policy or the box asks
	// for it.
	const held = " It was installed under the cluster profile and its namespace is no longer trusted: an uninstall waits, and deletes nothing, until the namespace is trusted again."
	heldHere := a.Status.Profile == capstanv1.ProfileCluster && placed == capstanv1.ProfileRestricted
	var out removal
	switch policy {
	case capstanv1.DeletionDelete:
		out.Says = "Removing uninstalls the software (" + why + "): its objects are deleted."
		if heldHere {
			out.Says += held
		}
	case capstanv1.DeletionOrphan:
		out.Says = "Removing leaves the software running (" + why + "), unless you tick uninstall."
		if heldHere {
			out.Says += held
		}
		out.Uninstall = true
	default:
		out.Says = "The controller has not placed this add-on in a profile yet: unticked, a restricted add-on is uninstalled anyway, and a cluster add-on is left running."
		out.Uninstall = true
	}
	if otherShard && a.Status.Profile == capstanv1.ProfileRestricted {
		// NOTE: another shard's controller decides, from whether it
		// trusts the namespace now, which this server cannot tell.
		out.Says += " Another shard's controller reconciles it: if it trusts the namespace now, the add-on follows the cluster profile, and is left running with its values unless marked for uninstall."
	}
	switch profile {
	case capstanv1.ProfileRestricted:
		out.Says += " Its values Secrets and generated values are deleted, unless you keep them for a later add-on of this name."
		out.KeepValues = true
	case capstanv1.ProfileCluster:
		out.Says += " Its values Secrets stay."
	default:
		out.KeepValues = true
	}
	return out
}
