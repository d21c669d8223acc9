package v1alpha1

import "k8s.io/apimachinery/pkg/runtime/schema"

// typedObject is an object that knows its own type, as an unstructured
// object does.
type typedObject interface {
	GetAPIVersion() string
	GetKind() string
	GetNamespace() string
	GetName() string
}

// RefOf returns the reference of an object that knows its type.
func RefOf(obj typedObject) ObjectRef {
	return ObjectRef{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// Key identifies the object whatever version of its API names it: group,
// kind, namespace and name.
func (r ObjectRef) Key() string {
	gv, _ := schema.ParseGroupVersion(r.APIVersion)
	return gv.Group + "/" + r.Kind + "/" + r.Namespace + "/" + r.Name
}

// Describe names the object in messages: "Kind namespace/name", or
// "Kind name" when it is cluster-scoped.
// NOTE: not String: types that embed ObjectRef would print as it alone.
func (r ObjectRef) Describe() string {
	if r.Namespace != "" {
		return r.Kind + " " + r.Namespace + "/" + r.Name
	}
	return r.Kind + " " + r.Name
}
