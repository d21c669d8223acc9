// Package plan computes what a sync would change: it previews every object
// with a server-side dry-run apply, diffs the result with the live object,
// hides Secret data, and decides through the gates whether the plan may be
// applied.
package plan

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// ownLabels are the labels Capstan puts on every object it applies. They are
// left out of comparisons, so adopting an object is not a change.
var ownLabels = []string{capstanv1.AddonLabel, capstanv1.AddonNamespaceLabel, capstanv1.ManagedByLabel}

// Normalize returns a copy of obj without what always differs between a
// dry-run result and a live object, or that Capstan owns itself: managed
// fields, resourceVersion, generation, uid, creationTimestamp, status and
// Capstan's labels.
func Normalize(obj *unstructured.Unstructured) *unstructured.Unstructured {
	if obj == nil {
		return nil
	}
	out := obj.DeepCopy()
	meta, ok := out.Object["metadata"].(map[string]any)
	if ok {
		for _, f := range []string{"managedFields", "resourceVersion", "generation", "uid", "creationTimestamp", "selfLink"} {
			delete(meta, f)
		}
		if labels, ok := meta["labels"].(map[string]any); ok {
			for _, l := range ownLabels {
				delete(labels, l)
			}
			if len(labels) == 0 {
				delete(meta, "labels")
			}
		}
		if annotations, ok := meta["annotations"].(map[string]any); ok && len(annotations) == 0 {
			delete(meta, "annotations")
		}
	}
	delete(out.Object, "status")
	return out
}
