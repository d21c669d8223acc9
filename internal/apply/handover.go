package apply

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// formerDeployers are the field managers of the tools an add-on takes
// objects over from: Helm (helm, and Flux's helm-controller), kubectl
// (its client-side apply, its server-side apply, edit, patch, create,
// replace), the owner of what an object held before its first
// server-side apply (before-first-apply), Argo CD (argocd-controller),
// Flux's kustomize-controller and kapp. A field such a tool wrote with the
// same value Capstan applies stays co-owned by it: the API server keeps a
// field that one manager's apply leaves out while another still owns it,
// so a chart's later version that drops it would leave it on the object,
// where Helm's own upgrade removes it. Controllers that share fields for
// their own reasons (the HPA's replicas, a webhook's caBundle) are not
// among them.
var formerDeployers = []string{"helm", "kubectl", "before-first-apply", "argocd", "kustomize-controller", "kapp"}

// formerDeployer reports whether entry is a former deployer's write of
// the object itself (not of a subresource such as status).
func formerDeployer(entry metav1.ManagedFieldsEntry) bool {
	if entry.Subresource != "" || entry.FieldsV1 == nil {
		return false
	}
	for _, p := range formerDeployers {
		if entry.Manager == p || strings.HasPrefix(entry.Manager, p+"-") {
			return true
		}
	}
	return false
}

// handedOver returns the managed fields of an object with the fields of
// owned taken from every former deployer's entry, an entry left with no
// field dropped, and, when claim is set, owned added to Capstan's applied
// entry (one made for it when there is none). changed is false when it
// changes nothing. No value of the object changes: only who owns it.
func handedOver(entries []metav1.ManagedFieldsEntry, owned *fieldpath.Set, claim bool, apiVersion string) (out []metav1.ManagedFieldsEntry, changed bool, err error) {
	ours := -1
	for _, e := range entries {
		if capstanApplied(e) {
			ours = len(out)
		}
		if !formerDeployer(e) {
			out = append(out, e)
			continue
		}
		theirs, err := fieldSet(e.FieldsV1)
		if err != nil {
			return nil, false, fmt.Errorf("reading the fields %s owns: %w", e.Manager, err)
		}
		left := theirs.Difference(owned)
		if left.Equals(theirs) {
			out = append(out, e)
			continue
		}
		changed = true
		if left.Empty() {
			continue
		}
		if e.FieldsV1, err = fieldsOf(left); err != nil {
			return nil, false, err
		}
		out = append(out, e)
	}
	if !claim {
		return out, changed, nil
	}
	if ours < 0 {
		f, err := fieldsOf(owned)
		if err != nil {
			return nil, false, err
		}
		now := metav1.Now()
		return append(out, metav1.ManagedFieldsEntry{Manager: capstanv1.FieldManager, Operation: metav1.ManagedFieldsOperationApply,
			APIVersion: apiVersion, Time: &now, FieldsType: "FieldsV1", FieldsV1: f}), true, nil
	}
	have, err := fieldSet(out[ours].FieldsV1)
	if err != nil {
		return nil, false, err
	}
	if all := have.Union(owned); !all.Equals(have) {
		if out[ours].FieldsV1, err = fieldsOf(all); err != nil {
			return nil, false, err
		}
		changed = true
	}
	return out, changed, nil
}

// capstanLabels are the paths of the labels Capstan's apply puts on every
// object it applies.
var capstanLabels = fieldpath.NewSet(
	fieldpath.MakePathOrDie("metadata", "labels", capstanv1.AddonLabel),
	fieldpath.MakePathOrDie("metadata", "labels", capstanv1.AddonNamespaceLabel),
	fieldpath.MakePathOrDie("metadata", "labels", capstanv1.ManagedByLabel),
)

// AdoptedOnly reports whether obj is an object adopted without a change
// that Capstan has not applied since: its owner labels are the owner
// labels' manager's alone (capstanv1.OwnerLabelsManager), and Capstan's
// entry, if any, holds only the fields its adoption claimed
// (ClaimAdopted), never its labels. An entry it cannot read counts as not
// adopted only.
func AdoptedOnly(obj *unstructured.Unstructured) bool {
	owner := fieldpath.MakePathOrDie("metadata", "labels", capstanv1.AddonLabel)
	labelled := false
	for _, e := range obj.GetManagedFields() {
		if e.Manager != capstanv1.FieldManager && e.Manager != capstanv1.OwnerLabelsManager {
			continue
		}
		set, err := fieldSet(e.FieldsV1)
		if err != nil {
			return false
		}
		switch {
		case e.Manager == capstanv1.FieldManager && set.Has(owner):
			return false
		case e.Manager == capstanv1.OwnerLabelsManager && set.Has(owner):
			labelled = true
		}
	}
	return labelled
}

// fieldSet decodes a managed-fields entry's set.
func fieldSet(f *metav1.FieldsV1) (*fieldpath.Set, error) {
	s := &fieldpath.Set{}
	if f == nil {
		return s, nil
	}
	if err := s.FromJSON(f.GetRawReader()); err != nil {
		return nil, err
	}
	return s, nil
}

// fieldsOf encodes a set as a managed-fields entry's.
func fieldsOf(s *fieldpath.Set) (*metav1.FieldsV1, error) {
	raw, err := s.ToJSON()
	if err != nil {
		return nil, err
	}
	return metav1.NewFieldsV1(string(raw)), nil
}

// capstanApplied reports whether entry is Capstan's apply of the object
// itself.
func capstanApplied(e metav1.ManagedFieldsEntry) bool {
	return e.Manager == capstanv1.FieldManager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == ""
}

// appliedFields returns the fields Capstan's apply owns in obj, or nil
// when it owns none.
func appliedFields(obj *unstructured.Unstructured) (*fieldpath.Set, error) {
	f := AppliedFields(obj)
	if f == nil {
		return nil, nil
	}
	return fieldSet(f)
}

// AppliedFields returns the fields a dry run of Capstan's apply shows it
// would own, as the API server wrote them, or nil when it shows none.
func AppliedFields(dry *unstructured.Unstructured) *metav1.FieldsV1 {
	for _, e := range dry.GetManagedFields() {
		if capstanApplied(e) {
			return e.FieldsV1
		}
	}
	return nil
}

// handOver takes from the former deployers of live, the API server's
// answer to Capstan's apply, the fields that apply owns as well, so that
// the next version of the add-on that leaves one out removes it as Helm
// would, instead of keeping it for a tool that no longer runs. It writes
// nothing when no former deployer shares a field, and returns live then;
// else the object as the API server answered the write, which is bound to
// live's resourceVersion: an object changed meanwhile is left as it is
// (the next apply of it hands over). A failed write fails nothing: what
// the apply applied stands.
func (a *Applier) handOver(ctx context.Context, live *unstructured.Unstructured) *unstructured.Unstructured {
	// NOTE: a clean install has no former deployer: nothing is decoded.
	if !slices.ContainsFunc(live.GetManagedFields(), formerDeployer) {
		return live
	}
	if keep, ok := ctx.Value(keepOwnersKey{}).(func(*unstructured.Unstructured) bool); ok && keep(live) {
		return live
	}
	owned, err := appliedFields(live)
	if err != nil || owned == nil {
		return live
	}
	entries, changed, err := handedOver(live.GetManagedFields(), owned, false, live.GetAPIVersion())
	if err != nil || !changed {
		return live
	}
	out, err := a.writeManagedFields(ctx, live, live.GetUID(), entries)
	if err != nil {
		// NOTE: the write is an update of the whole object to admission,
		// whose refusal of a Secret may quote its data.
		ref := capstanv1.RefOf(live)
		log.FromContext(ctx).Info("handing fields over from a former deployer failed; the next apply tries again", "object", ref.Describe(), "error", RefusedWrite(ref, err).Error())
		return live
	}
	return out
}

// keepOwnersKey holds Sequence.KeepOwners in the context of its applies.
type keepOwnersKey struct{}

// ClaimAdopted makes the fields that Capstan's apply would own of an
// object adopted without a change (owned, from the plan's dry run)
// Capstan's, as if it had applied them, and takes them from the tools that
// deployed it before (formerDeployers); their other fields stay theirs,
// and no value changes. The add-on's next version that leaves one of those
// fields out removes it, as Helm's upgrade of the release would have; a
// field Capstan never rendered is never removed for it. The write is bound
// to uid, and to the object read just before it.
func (a *Applier) ClaimAdopted(ctx context.Context, ref capstanv1.ObjectRef, uid types.UID, owned *metav1.FieldsV1) error {
	if owned == nil {
		return nil
	}
	set, err := fieldSet(owned)
	if err != nil {
		return err
	}
	// NOTE: Capstan's own labels are not claimed: the owner labels are
	// capstan-owner's, and the others are not on an object adopted without
	// a change; a Capstan entry that owns them says the sync applied the object
	// (AdoptedOnly).
	if set = set.Difference(capstanLabels); set.Empty() {
		return nil
	}
	live, err := a.Get(ctx, ref)
	if err != nil || live == nil || live.GetUID() != uid {
		return err // gone or made anew: the plan did not see it
	}
	entries, changed, err := handedOver(live.GetManagedFields(), set, true, live.GetAPIVersion())
	if err != nil || !changed {
		return err
	}
	_, err = a.writeManagedFields(ctx, live, uid, entries)
	return err
}

// writeManagedFields replaces live's managed fields with entries, bound
// to its resourceVersion, and returns the object as the API server
// answered. The API server keeps the list as sent when it changes no
// field (the write itself owns nothing).
func (a *Applier) writeManagedFields(ctx context.Context, live *unstructured.Unstructured, uid types.UID, entries []metav1.ManagedFieldsEntry) (*unstructured.Unstructured, error) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": uid, "resourceVersion": live.GetResourceVersion(), "managedFields": entries,
	}})
	if err != nil {
		return nil, err
	}
	out := &unstructured.Unstructured{}
	out.SetGroupVersionKind(live.GroupVersionKind())
	out.SetNamespace(live.GetNamespace())
	out.SetName(live.GetName())
	if err := a.Client.Patch(ctx, out, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return nil, err
	}
	return out, nil
}
