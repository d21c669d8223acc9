package guard

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// pvcProtectionFinalizer is the finalizer the API server itself puts on
// every claim, so that a claim a pod still mounts is not deleted under it.
// A chart that renders it asks for nothing the claim would not get anyway.
const pvcProtectionFinalizer = "kubernetes.io/pvc-protection"

// checkFinalizers refuses the finalizers a chart sets on an object (path
// metadata.finalizers) or on a pod template (path <template>.metadata.finalizers,
// with gvk the zero value): removing the Addon must remove everything it
// runs. A finalizer no controller removes keeps a deleted Deployment
// Terminating with its ReplicaSet and pods running, and keeps a sync-wave
// uninstall waiting for it for ever; orphan makes the garbage collector
// strip the owner from what the object owns, so the ReplicaSets of a hook
// Deployment, which only the garbage collector deletes, keep running with
// no owner; on a pod template every pod gets the finalizer and stays
// Terminating, which holds the namespace's deletion.
func (ck *checker) checkFinalizers(ref capstanv1.ObjectRef, path string, gvk schema.GroupVersionKind, finalizers []string) {
	for i, f := range finalizers {
		if gvk == gvkPVC && f == pvcProtectionFinalizer {
			continue
		}
		ck.add(ref, fmt.Sprintf("%s[%d]", path, i), RuleFinalizers,
			fmt.Sprintf("finalizer %q would hold the object in deletion until some controller removes it, or, as %s and %s do, change what deleting it does to the ReplicaSets and pods it owns, so they could keep running once the Addon is removed; remove %s: Capstan deletes the add-on's objects itself",
				f, metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents, path))
	}
}
