package guard

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// checkOwnership refuses every rendered object that already exists and that
// this Addon does not own: a restricted chart never takes over an object.
func (ck *checker) checkOwnership(ctx context.Context, decoded []*decodedObject) {
	if ck.c.Lookup == nil {
		return
	}
	asked := map[kindName]bool{}
	for _, d := range decoded {
		if d == nil || d.obj == nil || d.ref.Name == "" || !ck.inNamespace(d.ref.Namespace) {
			continue
		}
		key := kindName{d.gvk.Kind, d.ref.Name}
		if asked[key] {
			continue
		}
		asked[key] = true
		exists, owned, err := ck.c.Lookup(ctx, d.gvk, ck.c.Namespace, d.ref.Name)
		switch {
		case err != nil:
			ck.add(d.ref, "metadata.name", RuleOwnershipUnknown,
				fmt.Sprintf("could not read the live %s to check that the Addon owns it (%v); the next sync retries, and if it persists check the controller's access to %s", d.gvk.Kind, err, d.gvk.Kind))
		case exists && !owned:
			ck.add(d.ref, "metadata.name", RuleNotOwned,
				fmt.Sprintf("%s %q already exists in namespace %q and this Addon does not own it; rename the object in the chart, or remove the existing one if it is no longer needed", d.gvk.Kind, d.ref.Name, ck.c.Namespace))
		}
	}
}

// ClientLookup reads live objects through r for the ownership rule. It reads
// metadata only (never a Secret's data). Pass an uncached reader, such as the
// manager's APIReader, so that no cache of every Secret in the cluster is
// started for it.
func ClientLookup(r client.Reader, addon *capstanv1.Addon) LookupFunc {
	return func(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (bool, bool, error) {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, m)
		if apierrors.IsNotFound(err) {
			return false, false, nil
		}
		if err != nil {
			return false, false, fmt.Errorf("get %s %s/%s: %w", gvk.Kind, namespace, name, err)
		}
		return true, OwnedBy(m, addon), nil
	}
}

// OwnedBy reports whether addon owns obj. An object is owned when it has an
// owner reference to the Addon (same name and, when both are known, the same
// UID), or when it carries both Capstan labels naming the Addon and its
// namespace, as every object Capstan applies does.
func OwnedBy(obj metav1.Object, addon *capstanv1.Addon) bool {
	if addon == nil {
		return false
	}
	for _, or := range obj.GetOwnerReferences() {
		group, _, _ := strings.Cut(or.APIVersion, "/")
		if group == capstanv1.GroupVersion.Group && or.Kind == "Addon" && or.Name == addon.Name &&
			(addon.UID == "" || or.UID == "" || or.UID == addon.UID) {
			return true
		}
	}
	return addon.LabelledFor(obj.GetLabels())
}
