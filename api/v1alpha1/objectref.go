package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

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

// ObjectID names one object in one string: "apiVersion Kind
// namespace/name", or "apiVersion Kind name" for a cluster-scoped object,
// such as "apps/v1 Deployment web/frontend". The inventory stores its
// objects this way: no part of a Kubernetes object's name holds a space,
// and one string per object keeps an Addon of hundreds of objects small,
// and cheap for the API server to check, store and send to its watchers,
// where four fields per object cost it about twice as much.
// +kubebuilder:validation:Pattern=`^[^ /]+(/[^ /]+)? [^ /]+ ([^ /]+/)?[^ /]+$`
// +kubebuilder:validation:MaxLength=1024
type ObjectID struct {
	ObjectRef `json:",inline"`
	// Unreadable holds, as stored, an entry that names no object: an
	// entry of an older form, which the API server hands back as {}.
	// UnmarshalJSON keeps it here instead of failing, because one such
	// Addon would otherwise fail the decoding of every Addon listed with
	// it, and stall the controller for all of them. The controller
	// refuses to act on an inventory that holds one (UnreadableEntries).
	Unreadable string `json:"-"`
}

// MarshalText writes the one string, or an unreadable entry as it was
// read, so that a status written back unchanged stays unchanged.
func (id ObjectID) MarshalText() ([]byte, error) {
	if id.Unreadable != "" {
		return []byte(id.Unreadable), nil
	}
	return []byte(id.APIVersion + " " + id.Describe()), nil
}

// UnmarshalJSON reads the one string. An entry that is not one, or not
// in the form, is kept in Unreadable as its JSON rather than refused; see
// there.
func (id *ObjectID) UnmarshalJSON(data []byte) error {
	var text string
	if err := json.Unmarshal(data, &text); err == nil && id.UnmarshalText([]byte(text)) == nil {
		return nil
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		return err
	}
	*id = ObjectID{Unreadable: compact.String()}
	return nil
}

// UnreadableEntries returns the inventory's entries that name no object,
// as they were stored, with their index: "[3] {}".
func UnreadableEntries(ids []ObjectID) []string {
	var bad []string
	for i, id := range ids {
		if id.Unreadable != "" {
			bad = append(bad, fmt.Sprintf("[%d] %s", i, id.Unreadable))
		}
	}
	return bad
}

// UnmarshalText reads the one string.
func (id *ObjectID) UnmarshalText(text []byte) error {
	parts := strings.Split(string(text), " ")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return fmt.Errorf("object %q: want \"apiVersion Kind namespace/name\" or \"apiVersion Kind name\"", text)
	}
	ref := ObjectRef{APIVersion: parts[0], Kind: parts[1], Name: parts[2]}
	if ns, name, ok := strings.Cut(parts[2], "/"); ok {
		if ns == "" || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("object %q: want namespace/name after the kind", text)
		}
		ref.Namespace, ref.Name = ns, name
	}
	// NOTE: the whole ID: a decoder that reuses an element must not keep
	// an Unreadable it held before.
	*id = ObjectID{ObjectRef: ref}
	return nil
}

// IDsOf names each reference as an ObjectID.
func IDsOf(refs []ObjectRef) []ObjectID {
	if refs == nil {
		return nil
	}
	ids := make([]ObjectID, len(refs))
	for i, r := range refs {
		ids[i] = ObjectID{ObjectRef: r}
	}
	return ids
}

// RefsOf is the references that ids name.
func RefsOf(ids []ObjectID) []ObjectRef {
	if ids == nil {
		return nil
	}
	refs := make([]ObjectRef, len(ids))
	for i, id := range ids {
		refs[i] = id.ObjectRef
	}
	return refs
}
