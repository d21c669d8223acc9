package guard

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsjson "sigs.k8s.io/json"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// decodedObject is one rendered object, decoded into its typed API struct.
type decodedObject struct {
	ref  capstanv1.ObjectRef
	gvk  schema.GroupVersionKind
	obj  any                // *appsv1.Deployment, *corev1.Secret, ...; nil when it did not decode
	meta *metav1.ObjectMeta // obj's metadata; nil when obj is nil
}

// newTyped returns an empty typed object for an allowed kind.
func newTyped(gvk schema.GroupVersionKind) (any, *metav1.ObjectMeta) {
	switch gvk {
	case gvkDeployment:
		o := &appsv1.Deployment{}
		return o, &o.ObjectMeta
	case gvkJob:
		o := &batchv1.Job{}
		return o, &o.ObjectMeta
	case gvkService:
		o := &corev1.Service{}
		return o, &o.ObjectMeta
	case gvkConfigMap:
		o := &corev1.ConfigMap{}
		return o, &o.ObjectMeta
	case gvkSecret:
		o := &corev1.Secret{}
		return o, &o.ObjectMeta
	case gvkSA:
		o := &corev1.ServiceAccount{}
		return o, &o.ObjectMeta
	case gvkPVC:
		o := &corev1.PersistentVolumeClaim{}
		return o, &o.ObjectMeta
	}
	return nil, nil
}

// decode checks that object i has a kind the restricted profile allows and
// decodes it strictly into its typed struct: unknown or duplicate fields and
// fields of the wrong type are violations. It returns nil only for an empty
// object; otherwise obj is nil when the object cannot be checked further.
//
// NOTE: strict decoding refuses fields that k8s.io/api at our pinned version
// does not know, even when a newer API server would accept them. That is on
// purpose: a field the guard cannot read is a field it cannot vouch for.
func (ck *checker) decode(i int, u *unstructured.Unstructured) *decodedObject {
	if u == nil || u.Object == nil {
		ck.add(capstanv1.ObjectRef{}, "", RuleMalformedObject,
			fmt.Sprintf("object %d of the render is empty; remove the empty document from the chart", i+1))
		return nil
	}
	// The unstructured getters return "" for a missing field or one of the
	// wrong type, and never panic.
	d := &decodedObject{ref: capstanv1.ObjectRef{
		APIVersion: u.GetAPIVersion(),
		Kind:       u.GetKind(),
		Namespace:  u.GetNamespace(),
		Name:       u.GetName(),
	}}
	if d.ref.APIVersion == "" || d.ref.Kind == "" {
		var missing []string
		if d.ref.APIVersion == "" {
			missing = append(missing, "apiVersion")
		}
		if d.ref.Kind == "" {
			missing = append(missing, "kind")
		}
		ck.add(d.ref, strings.Join(missing, ","), RuleMalformedObject,
			fmt.Sprintf("object %d of the render has no %s (or not as a string); every object needs both, such as apiVersion: v1 and kind: ConfigMap",
				i+1, strings.Join(missing, " and ")))
		return d
	}
	gv, err := schema.ParseGroupVersion(d.ref.APIVersion)
	if err != nil {
		ck.add(d.ref, "apiVersion", RuleMalformedObject,
			fmt.Sprintf("apiVersion %q is not group/version or version; use the kind's API version, such as apps/v1", d.ref.APIVersion))
		return d
	}
	d.gvk = gv.WithKind(d.ref.Kind)
	if !IsAllowedKind(d.gvk) {
		ck.add(d.ref, "kind", RuleKindNotAllowed, kindMessage(d.gvk, u))
		return d
	}

	data, err := json.Marshal(u.Object)
	if err != nil {
		ck.add(d.ref, "", RuleMalformedObject,
			fmt.Sprintf("the object cannot be encoded as JSON (%s); render plain YAML values", describeEncodeError(err)))
		return d
	}
	obj, meta := newTyped(d.gvk)
	strictErrs, err := sigsjson.UnmarshalStrict(data, obj)
	if err != nil {
		path, msg := describeDecodeError(err, d.gvk)
		ck.add(d.ref, path, RuleMalformedObject, msg)
		return d
	}
	for _, se := range strictErrs {
		path := ""
		var fe sigsjson.FieldError
		if errors.As(se, &fe) {
			path = fe.FieldPath()
		}
		rule, what := RuleUnknownField, "is not a field of"
		if strings.Contains(se.Error(), "duplicate field") {
			rule, what = RuleMalformedObject, "appears twice in"
		}
		ck.add(d.ref, path, rule,
			fmt.Sprintf("%s %s %s %s; remove it or fix its spelling and indentation (the guard refuses fields it cannot check)",
				fieldName(path), what, d.gvk.GroupVersion(), d.gvk.Kind))
	}
	d.obj, d.meta = obj, meta
	// The typed metadata is what the API server would see.
	d.ref.Namespace, d.ref.Name = meta.Namespace, meta.Name
	return d
}

// kindMessage explains why a kind is refused and what to do instead.
func kindMessage(gvk schema.GroupVersionKind, u *unstructured.Unstructured) string {
	if gvk.Kind == "List" || (strings.HasSuffix(gvk.Kind, "List") && u.Object["items"] != nil) {
		return fmt.Sprintf("%s %s is a list; lists are not expanded, render each item as an object of its own", gvk.GroupVersion(), gvk.Kind)
	}
	for _, k := range AllowedKinds() {
		if k.Kind == gvk.Kind {
			return fmt.Sprintf("%s is allowed only as %s, not %s; render it with apiVersion: %s", gvk.Kind, k.GroupVersion(), gvk.GroupVersion(), k.GroupVersion())
		}
	}
	return fmt.Sprintf("%s %s may not be created by a restricted Addon, which may create only Deployments (apps/v1), Jobs (batch/v1), and Services, ConfigMaps, Secrets, ServiceAccounts and PersistentVolumeClaims (v1); remove the object or disable it in the chart's values",
		gvk.GroupVersion(), gvk.Kind)
}

// typeErrorRE takes the field and the Go type out of a JSON type error, and
// leaves out the value it quotes: a value may be a secret.
var typeErrorRE = regexp.MustCompile(`^json: cannot unmarshal (string|number|bool|array|object|null)\b.* into Go struct field (\S+) of type (.+)$`)

// valueErrorRE is a JSON type error without a field.
var valueErrorRE = regexp.MustCompile(`cannot unmarshal (string|number|bool|array|object|null)\b.* into Go value of type (.+)$`)

// describeDecodeError turns a decode error into a path and a message that
// carry no value from the object.
func describeDecodeError(err error, gvk schema.GroupVersionKind) (path, msg string) {
	if m := typeErrorRE.FindStringSubmatch(err.Error()); m != nil {
		path = jsonPath(m[2])
		if m[1] == "number" && goTypeName(m[3]) == "a number" {
			return path, fmt.Sprintf("%s holds a number out of range for %s %s (%s); fix the chart's template for this field",
				fieldName(path), gvk.GroupVersion(), gvk.Kind, m[3])
		}
		return path, fmt.Sprintf("%s is a JSON %s but %s %s needs %s there; fix the chart's template for this field",
			fieldName(path), m[1], gvk.GroupVersion(), gvk.Kind, goTypeName(m[3]))
	}
	if m := valueErrorRE.FindStringSubmatch(err.Error()); m != nil {
		// A custom decoder (IntOrString, Quantity) passed on a type error
		// without its field.
		return "", fmt.Sprintf("a field is a JSON %s but %s %s needs %s there; fix the chart's template for this field",
			m[1], gvk.GroupVersion(), gvk.Kind, goTypeName(m[2]))
	}
	if gvk == gvkSecret {
		// Custom decoders may quote the value they refuse.
		return "", fmt.Sprintf("the object does not decode as %s %s; check that data holds base64 strings and stringData plain strings", gvk.GroupVersion(), gvk.Kind)
	}
	return "", fmt.Sprintf("the object does not decode as %s %s (%v); fix the value this describes", gvk.GroupVersion(), gvk.Kind, err)
}

// jsonPath turns the field of a type error, "Deployment.spec.template.spec.
// volumes.VolumeSource.hostPath", into the JSON path: it drops the names of Go
// structs, which start with a capital letter where JSON fields do not.
func jsonPath(field string) string {
	var keep []string
	for _, seg := range strings.Split(field, ".") {
		if seg != "" && (seg[0] < 'A' || seg[0] > 'Z') {
			keep = append(keep, seg)
		}
	}
	return strings.Join(keep, ".")
}

// describeEncodeError names why an object cannot be encoded, without a value.
func describeEncodeError(err error) string {
	var ute *json.UnsupportedTypeError
	if errors.As(err, &ute) {
		return "a field holds a Go " + ute.Type.String()
	}
	var uve *json.UnsupportedValueError
	if errors.As(err, &uve) {
		return "a field holds a number JSON cannot express, such as NaN or Inf"
	}
	return "a field holds a value JSON cannot express"
}

// goTypeName describes a Go type from k8s.io/api in words a chart author knows.
func goTypeName(t string) string {
	switch {
	case strings.HasPrefix(t, "[]") && t != "[]uint8":
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "a map"
	case t == "string" || isStringType(t):
		return "a string"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint") || strings.HasPrefix(t, "float"):
		return "a number"
	case t == "[]uint8":
		return "a base64 string"
	}
	return "an object (" + t + ")"
}

// stringTypes are named string types of k8s.io/api that show up in type errors.
var stringTypes = map[string]bool{
	"v1.Protocol": true, "v1.PullPolicy": true, "v1.ServiceType": true, "v1.SecretType": true,
	"v1.RestartPolicy": true, "v1.DNSPolicy": true, "v1.ProcMountType": true, "v1.SeccompProfileType": true,
	"v1.AppArmorProfileType": true, "v1.TolerationOperator": true, "v1.TaintEffect": true,
	"v1.NodeSelectorOperator": true, "v1.PersistentVolumeAccessMode": true, "v1.Capability": true,
	"v1.ResourceName": true, "v1.StorageMedium": true, "v1.HostPathType": true, "v1.URIScheme": true,
}

func isStringType(t string) bool { return stringTypes[t] }

// fieldName quotes a field path for a message, or says "a field".
func fieldName(path string) string {
	if path == "" {
		return "a field"
	}
	return "field " + path
}
