package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OwnerLabels are the labels that mark an object as this add-on's: its
// applied objects, its hook namespaces and its values objects.
func (a *Addon) OwnerLabels() map[string]string {
	return map[string]string{AddonLabel: a.Name, AddonNamespaceLabel: a.Namespace}
}

// AppliedLabels are the labels of every object Capstan applies for this
// add-on: its owner labels and app.kubernetes.io/managed-by=capstan.
func (a *Addon) AppliedLabels() map[string]string {
	l := a.OwnerLabels()
	l[ManagedByLabel] = "capstan"
	return l
}

// LabelledFor reports whether labels name this add-on as their owner.
func (a *Addon) LabelledFor(labels map[string]string) bool {
	return a.Name != "" && labels[AddonLabel] == a.Name && labels[AddonNamespaceLabel] == a.Namespace
}

// OwnerReference is the owner reference of a restricted add-on's objects,
// applied and values objects alike, to their Addon. It is not a controller
// reference, and it does not block the Addon's deletion: Capstan deletes in
// its own order, and the garbage collector follows.
func (a *Addon) OwnerReference() metav1.OwnerReference {
	block := false
	return metav1.OwnerReference{APIVersion: GroupVersion.String(), Kind: "Addon", Name: a.Name, UID: a.UID, BlockOwnerDeletion: &block}
}
