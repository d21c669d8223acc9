package apply

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// inertKinds are the kinds whose objects do nothing by being created in a
// namespace that holds nothing else yet: they are data, names and rules for
// what the rest of the add-on will bring, not workloads, volumes, routes or
// anything a controller acts on. Services are inert only while they open
// nothing on the nodes or a cloud's load balancers (see Inert).
var inertKinds = map[schema.GroupKind]bool{
	{Kind: "ConfigMap"}:      true,
	{Kind: "Secret"}:         true,
	{Kind: "ServiceAccount"}: true,
	{Kind: "Service"}:        true,
	{Kind: "LimitRange"}:     true,
	{Kind: "ResourceQuota"}:  true,
	{Group: "rbac.authorization.k8s.io", Kind: "Role"}:        true,
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}: true,
	{Group: "policy", Kind: "PodDisruptionBudget"}:            true,
	{Group: "networking.k8s.io", Kind: "NetworkPolicy"}:       true,
}

// Inert reports whether creating obj in a Namespace made a moment ago has
// no effect that deleting it again would not undo: no code runs, no volume
// is provisioned, nothing is exposed outside the cluster and no controller
// acts on it. An install applies such objects in a new Namespace without a
// dry run first and removes them again if any of them is refused; every
// other object there is dry-run before anything else is applied.
func Inert(obj *unstructured.Unstructured) bool {
	if obj.GetNamespace() == "" || !inertKinds[obj.GroupVersionKind().GroupKind()] {
		return false
	}
	if obj.GetKind() == "Service" {
		switch t, _, _ := unstructured.NestedString(obj.Object, "spec", "type"); t {
		case "", "ClusterIP", "ExternalName":
		default:
			return false // NodePort and LoadBalancer open ports outside the cluster
		}
	}
	return true
}

// createdNow reports whether live, the API server's answer to Capstan's
// apply, is an object that apply created: Capstan's apply is its only
// writer. An object that existed before carries its creator's entry too.
func createdNow(live *unstructured.Unstructured) bool {
	fields := live.GetManagedFields()
	return len(fields) == 1 && fields[0].Manager == capstanv1.FieldManager && fields[0].Operation == metav1.ManagedFieldsOperationApply
}

// created is an object one apply created, to remove again if the install
// stops before the rest of the add-on is applied.
type created struct {
	ref capstanv1.ObjectRef
	uid types.UID
}

// undo deletes the objects this install created, newest first, each only
// while it is still the object created (its UID). It returns those it
// deleted and the first error, a Secret's refusal withheld (RefusedWrite).
func (a *Applier) undo(ctx context.Context, objs []created) ([]capstanv1.ObjectRef, error) {
	var gone []capstanv1.ObjectRef
	var errs []error
	for i := len(objs) - 1; i >= 0; i-- {
		o := objs[i]
		obj := &unstructured.Unstructured{}
		obj.SetAPIVersion(o.ref.APIVersion)
		obj.SetKind(o.ref.Kind)
		obj.SetNamespace(o.ref.Namespace)
		obj.SetName(o.ref.Name)
		uid := o.uid
		err := a.Client.Delete(ctx, obj, client.Preconditions{UID: &uid})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			gone = append(gone, o.ref)
		case apierrors.IsConflict(err):
			// Someone else's object of the same name now: not ours to delete.
		default:
			errs = append(errs, fmt.Errorf("deleting %s: %w", o.ref.Describe(), RefusedWrite(o.ref, err)))
		}
	}
	return gone, errors.Join(errs...)
}
