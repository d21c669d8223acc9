package guard

import (
	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// CheckSpec refuses what a restricted Addon's own spec asks for beyond its
// profile: another target namespace, or a namespace to create. The
// violations name the Addon and the field to remove.
func CheckSpec(addon *capstanv1.Addon) []capstanv1.Violation {
	ref := capstanv1.ObjectRef{APIVersion: capstanv1.GroupVersion.String(), Kind: "Addon", Namespace: addon.Namespace, Name: addon.Name}
	var out []capstanv1.Violation
	if t := addon.Spec.TargetNamespace; t != "" && t != addon.Namespace {
		out = append(out, capstanv1.Violation{Object: ref, Path: "spec.targetNamespace", Rule: "target-namespace",
			Message: "a restricted add-on installs into its own namespace; remove spec.targetNamespace"})
	}
	if addon.Spec.CreateNamespace {
		out = append(out, capstanv1.Violation{Object: ref, Path: "spec.createNamespace", Rule: "create-namespace",
			Message: "a restricted add-on cannot create namespaces; remove spec.createNamespace"})
	}
	if addon.Spec.Registration != nil {
		out = append(out, capstanv1.Violation{Object: ref, Path: "spec.registration", Rule: "registration-source",
			Message: "a restricted add-on registers from its primary Service only; remove spec.registration"})
	}
	return out
}
