package apply

import (
	"context"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// neverDelete are the kinds Capstan never deletes, neither when pruning nor
// when uninstalling: deleting a CRD deletes every resource of its kind, and
// the others hold data.
var neverDelete = map[schema.GroupKind]bool{
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}: true,
	{Kind: "Namespace"}:                             true,
	{Kind: "PersistentVolumeClaim"}:                 true,
	{Kind: "PersistentVolume"}:                      true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}: true,
}

// Deletable reports whether Capstan may ever delete objects of ref's kind.
func Deletable(ref capstanv1.ObjectRef) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false
	}
	return !neverDelete[schema.GroupKind{Group: gv.Group, Kind: ref.Kind}]
}

// Union returns the references in a or b, once each, in a stable order. It is
// the inventory written before an apply, so a crash mid-apply orphans nothing.
func Union(a, b []capstanv1.ObjectRef) []capstanv1.ObjectRef {
	seen := map[string]bool{}
	var out []capstanv1.ObjectRef
	// The newer reference (b) wins, so a changed API version is recorded.
	for _, list := range [][]capstanv1.ObjectRef{b, a} {
		for _, r := range list {
			if k := r.Key(); !seen[k] {
				seen[k] = true
				out = append(out, r)
			}
		}
	}
	Sort(out)
	return out
}

// Subtract returns the references in a that are not in b.
func Subtract(a, b []capstanv1.ObjectRef) []capstanv1.ObjectRef {
	in := map[string]bool{}
	for _, r := range b {
		in[r.Key()] = true
	}
	var out []capstanv1.ObjectRef
	for _, r := range a {
		if !in[r.Key()] {
			out = append(out, r)
		}
	}
	return out
}

// PruneSet returns what pruning would delete: objects in the old inventory
// that the new render no longer has, except the never-delete kinds. An empty
// render never prunes: it is far more likely a broken source than a wish to
// delete everything.
func PruneSet(inventory, rendered []capstanv1.ObjectRef) []capstanv1.ObjectRef {
	if len(rendered) == 0 {
		return nil
	}
	var out []capstanv1.ObjectRef
	for _, r := range Subtract(inventory, rendered) {
		if Deletable(r) {
			out = append(out, r)
		}
	}
	return out
}

// Sort orders references by group, kind, namespace and name.
func Sort(refs []capstanv1.ObjectRef) {
	sort.SliceStable(refs, func(i, j int) bool { return refs[i].Key() < refs[j].Key() })
}

// DeleteAll deletes objects in the order given, skipping the never-delete
// kinds (CRDs and Namespaces among them, so nothing they hold goes first).
// It returns the references it deleted or found gone.
func (a *Applier) DeleteAll(ctx context.Context, refs []capstanv1.ObjectRef) ([]capstanv1.ObjectRef, error) {
	var done []capstanv1.ObjectRef
	for _, r := range refs {
		if !Deletable(r) {
			continue
		}
		if err := a.Delete(ctx, r, metav1.DeletePropagationBackground); err != nil {
			return done, fmt.Errorf("deleting %s: %w", r.Describe(), err)
		}
		done = append(done, r)
	}
	return done, nil
}
