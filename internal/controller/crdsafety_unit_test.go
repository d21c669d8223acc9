package controller

import (
	"context"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// crdOf is a CRD with versions, each a name, whether it is served and
// stored, and the type of its one field.
func crdOf(versions ...crdVersion) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "gadgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Kind: "Gadget"}}}
	for _, v := range versions {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
			Name: v.name, Served: v.served, Storage: v.storage,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: v.size}}}},
			AdditionalPrinterColumns: v.columns,
		})
	}
	return crd
}

type crdVersion struct {
	name            string
	served, storage bool
	size            string
	columns         []apiextensionsv1.CustomResourceColumnDefinition
}

// TestVersionsToCheck decides which CRD changes put stored objects at
// stake: none when only what no object is judged by changes, the changed
// version's schema, and every version when the served or storage versions
// change.
func TestVersionsToCheck(t *testing.T) {
	v1 := crdVersion{name: "v1", served: true, storage: true, size: "integer"}
	v1String := crdVersion{name: "v1", served: true, storage: true, size: "string"}
	v1Column := v1
	v1Column.columns = []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Size", Type: "integer", JSONPath: ".size"}}
	v1Old := crdVersion{name: "v1", served: true, size: "integer"}
	v2 := crdVersion{name: "v2", served: true, storage: true, size: "integer"}
	v2Old := crdVersion{name: "v2", served: true, size: "integer"}
	for _, tc := range []struct {
		name      string
		cur, next *apiextensionsv1.CustomResourceDefinition
		check     []string
		changed   bool
	}{
		{"the same", crdOf(v1), crdOf(v1), nil, false},
		{"a printer column", crdOf(v1), crdOf(v1Column), nil, false},
		{"a schema", crdOf(v1), crdOf(v1String), []string{"v1"}, true},
		{"one schema of two", crdOf(v1String, v2Old), crdOf(v1, v2Old), []string{"v1"}, true},
		{"a version added", crdOf(v1), crdOf(v1, v2Old), []string{"v1", "v2"}, true},
		{"the storage version moved", crdOf(v1, v2Old), crdOf(v1Old, v2), []string{"v1", "v2"}, true},
		{"a version dropped", crdOf(v1), crdOf(v2), []string{"v2"}, true},
	} {
		check, changed := versionsToCheck(tc.cur, tc.next)
		if changed != tc.changed || !slices.Equal(check, tc.check) {
			t.Errorf("%s: check %v, changed %v; want %v, %v", tc.name, check, changed, tc.check, tc.changed)
		}
	}
}

// TestShadowsAreTheirAddons: two add-ons that render one CRD make shadows
// of their own, with names and groups apart, each labelled for its
// add-on, and an Addon made anew under the same name another one; each is
// a shadow that isShadow recognises, so the sweep can clean it.
func TestShadowsAreTheirAddons(t *testing.T) {
	crd := crdOf(crdVersion{name: "v1", served: true, storage: true, size: "integer"})
	addon := func(ns, name, uid string) *capstanv1.Addon {
		a := &capstanv1.Addon{}
		a.Namespace, a.Name, a.UID = ns, name, types.UID("uid-"+uid)
		return a
	}
	seen := map[string]bool{}
	for _, a := range []*capstanv1.Addon{addon("one", "gadgets", "1"), addon("two", "gadgets", "2"), addon("one", "gadgets", "3")} {
		owner := shadowOwner(a)
		shadow, err := newShadow(crd, owner)
		if err != nil {
			t.Fatal(err)
		}
		if seen[shadow.Name] || seen[shadow.Spec.Group] {
			t.Errorf("%s/%s (%s) shares the shadow %s", a.Namespace, a.Name, a.UID, shadow.Name)
		}
		seen[shadow.Name], seen[shadow.Spec.Group] = true, true
		if shadow.Labels[shadowLabel] != owner || len(shadow.Name) > 253 {
			t.Errorf("the shadow %s is labelled %v", shadow.Name, shadow.Labels)
		}
		if !isShadow(shadow) {
			t.Errorf("the shadow %s (labelled %v) is not one isShadow recognises: it would never be cleaned", shadow.Name, shadow.Labels)
		}
	}
	again, _ := newShadow(crd, shadowOwner(addon("one", "gadgets", "1")))
	if !seen[again.Name] {
		t.Errorf("the same add-on's shadow of the same CRD is named anew (%s): a crash's leftover would not be found", again.Name)
	}
}

// TestValidateInControllerDefaultsFirst: a new required field with a
// default breaks no stored object, since the API server defaults an object
// as it reads it; without a default it does.
func TestValidateInControllerDefaultsFirst(t *testing.T) {
	crd := crdOf(crdVersion{name: "v1", served: true, storage: true, size: "integer"})
	stored := []unstructured.Unstructured{{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": map[string]any{"name": "a", "namespace": "ns"},
		"spec": map[string]any{"size": int64(3)}}}}
	next := func(def *apiextensionsv1.JSON) apiextensionsv1.CustomResourceDefinitionVersion {
		v := crd.Spec.Versions[0]
		v.Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"spec": {Type: "object", Required: []string{"mode"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"size": {Type: "integer"}, "mode": {Type: "string", Default: def}}}}}}
		return v
	}
	for _, tc := range []struct {
		name    string
		def     *apiextensionsv1.JSON
		invalid int
	}{
		{"with a default", &apiextensionsv1.JSON{Raw: []byte(`"fast"`)}, 0},
		{"without one", nil, 1},
	} {
		checked, invalid, first, err := validateInController(crd, next(tc.def), stored)
		if err != nil || checked != 1 || invalid != tc.invalid {
			t.Errorf("%s: checked %d, invalid %d (%s), %v; want %d invalid", tc.name, checked, invalid, first, err, tc.invalid)
		}
	}
}

// TestValidateInControllerFindsPrunedFields: a stored field that the new
// schema no longer names, or no longer keeps as unknown, makes the object
// invalid, since the API server would prune it; one a subtree still keeps,
// and one in status, do not.
func TestValidateInControllerFindsPrunedFields(t *testing.T) {
	crd := crdOf(crdVersion{name: "v1", served: true, storage: true, size: "integer"})
	stored := []unstructured.Unstructured{{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": map[string]any{"name": "a", "namespace": "ns"},
		"spec":   map[string]any{"size": int64(3), "colour": "red", "options": map[string]any{"fast": true}},
		"status": map[string]any{"phase": "Ready"}}}}
	object := func(props map[string]apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
		return &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
	}
	open := true
	version := func(spec map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.CustomResourceDefinitionVersion {
		v := crd.Spec.Versions[0]
		v.Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: object(map[string]apiextensionsv1.JSONSchemaProps{
			"spec": *object(spec), "status": {Type: "object"}})}
		return v
	}
	for _, tc := range []struct {
		name  string
		v     apiextensionsv1.CustomResourceDefinitionVersion
		drops string
	}{
		{"every field named", version(map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}, "colour": {Type: "string"},
			"options": {Type: "object", XPreserveUnknownFields: &open}}), ""},
		{"a field removed", version(map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"},
			"options": {Type: "object", XPreserveUnknownFields: &open}}), "spec.colour"},
		{"unknown fields no longer kept", version(map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}, "colour": {Type: "string"},
			"options": {Type: "object"}}), "spec.options.fast"},
	} {
		checked, invalid, first, err := validateInController(crd, tc.v, stored)
		want := 0
		if tc.drops != "" {
			want = 1
		}
		if err != nil || checked != 1 || invalid != want || !strings.Contains(first, tc.drops) {
			t.Errorf("%s: checked %d, invalid %d (%q), %v; want %d invalid naming %q", tc.name, checked, invalid, first, err, want, tc.drops)
		}
	}
}

// TestStorageMoveUnsafe decides when a storage version change with no
// conversion webhook is refused: only when the new storage version's
// schema differs from the old one's, prose aside, since the API server
// then changes nothing but the apiVersion of what it reads.
func TestStorageMoveUnsafe(t *testing.T) {
	v1 := crdVersion{name: "v1", served: true, storage: true, size: "integer"}
	v1Old := crdVersion{name: "v1", served: true, size: "integer"}
	v2 := crdVersion{name: "v2", served: true, storage: true, size: "integer"}
	v2String := crdVersion{name: "v2", served: true, storage: true, size: "string"}
	described := func(crd *apiextensionsv1.CustomResourceDefinition, version, text string) *apiextensionsv1.CustomResourceDefinition {
		for i, v := range crd.Spec.Versions {
			if v.Name == version {
				s := crd.Spec.Versions[i].Schema.OpenAPIV3Schema
				s.Description = "Gadget " + text
				size := s.Properties["size"]
				size.Description, size.Example = "The size, in "+text, &apiextensionsv1.JSON{Raw: []byte(`3`)}
				s.Properties["size"] = size
			}
		}
		return crd
	}
	webhook := func(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter}
		return crd
	}
	none := func(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
		return crd
	}
	for _, tc := range []struct {
		name      string
		cur, next *apiextensionsv1.CustomResourceDefinition
		unsafe    bool
	}{
		{"no move", crdOf(v1), crdOf(v1), false},
		{"to a new version of the same schema", crdOf(v1), crdOf(v1Old, v2), false},
		{"to a new version of the same schema, conversion None", crdOf(v1), none(crdOf(v1Old, v2)), false},
		{"to a version of the same schema but its prose", described(crdOf(v1), "v1", "v1"), described(crdOf(v1Old, v2), "v2", "v2"), false},
		{"to a version of another schema", crdOf(v1), crdOf(v1Old, v2String), true},
		{"to a version of another schema, conversion None", crdOf(v1), none(crdOf(v1Old, v2String)), true},
		{"to a version of another schema, with a webhook", crdOf(v1), webhook(crdOf(v1Old, v2String)), false},
		{"to a dropped version's same schema", crdOf(v1), crdOf(v2), false},
	} {
		if _, _, unsafe := storageMoveUnsafe(tc.cur, tc.next); unsafe != tc.unsafe {
			t.Errorf("%s: unsafe %v; want %v", tc.name, unsafe, tc.unsafe)
		}
	}
}

// TestReadAsVersion: the existing objects are listed as the version they
// are validated in when the live CRD serves it, and as the old storage
// version for a new storage version that converts with no webhook.
func TestReadAsVersion(t *testing.T) {
	v1 := crdVersion{name: "v1", served: true, storage: true, size: "integer"}
	v1Old := crdVersion{name: "v1", served: true, size: "integer"}
	v2 := crdVersion{name: "v2", served: true, storage: true, size: "integer"}
	v2Old := crdVersion{name: "v2", served: true, size: "integer"}
	v1Unserved := crdVersion{name: "v1", size: "integer"}
	stored := func(crd *apiextensionsv1.CustomResourceDefinition, versions ...string) *apiextensionsv1.CustomResourceDefinition {
		crd.Status.StoredVersions = versions
		return crd
	}
	webhook := crdOf(v1Old, v2)
	webhook.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter}
	for _, tc := range []struct {
		name, version, readAs string
		cur, next             *apiextensionsv1.CustomResourceDefinition
	}{
		{"a version served", "v1", "v1", crdOf(v1), crdOf(v1)},
		{"a new storage version", "v2", "v1", crdOf(v1), crdOf(v1Old, v2)},
		{"a new storage version, with a webhook", "v2", "", crdOf(v1), webhook},
		{"a new version not stored", "v2", "", crdOf(v1), crdOf(v1, v2Old)},
		{"an unserved version objects are stored in", "v1", "v2", stored(crdOf(v1Unserved, v2), "v1", "v2"), crdOf(v1Unserved, v2)},
		{"an unserved version no object is stored in", "v1", "", stored(crdOf(v1Unserved, v2), "v2"), crdOf(v1Unserved, v2)},
	} {
		if got := readAsVersion(tc.cur, tc.next, tc.version); got != tc.readAs {
			t.Errorf("%s: read as %q; want %q", tc.name, got, tc.readAs)
		}
	}
}

// TestConversionRemoved: a chart that turns a CRD's conversion webhook
// off, with the versions and schemas as they were, makes the API server
// read the objects stored in the other versions with only their
// apiVersion changed: refused while a stored version's schema differs
// from the storage version's, allowed when every stored version is the
// storage version or has its schema.
func TestConversionRemoved(t *testing.T) {
	v1alpha1 := crdVersion{name: "v1alpha1", served: true, size: "string"}
	v1alpha1Same := crdVersion{name: "v1alpha1", served: true, size: "integer"}
	v1 := crdVersion{name: "v1", served: true, storage: true, size: "integer"}
	crd := func(strategy apiextensionsv1.ConversionStrategyType, stored []string, versions ...crdVersion) *apiextensionsv1.CustomResourceDefinition {
		c := crdOf(versions...)
		c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: strategy}
		c.Status.StoredVersions = stored
		return c
	}
	const webhook, none = apiextensionsv1.WebhookConverter, apiextensionsv1.NoneConverter
	// unrendered is a rendered CRD that says nothing of spec.conversion.
	unrendered := func() *apiextensionsv1.CustomResourceDefinition { return crdOf(v1alpha1, v1) }
	ownedByCapstan := func(c *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
		c.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: capstanv1.FieldManager, Operation: metav1.ManagedFieldsOperationApply,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:conversion":{"f:strategy":{}}}}`)}}
		return c
	}
	both := []string{"v1alpha1", "v1"}
	for _, tc := range []struct {
		name      string
		cur, next *apiextensionsv1.CustomResourceDefinition
		refused   bool
	}{
		{"the webhook removed, objects stored in another schema", crd(webhook, both, v1alpha1, v1), crd(none, nil, v1alpha1, v1), true},
		{"the webhook removed, objects stored in the same schema", crd(webhook, both, v1alpha1Same, v1), crd(none, nil, v1alpha1Same, v1), false},
		{"the webhook removed, objects stored only as the storage version", crd(webhook, []string{"v1"}, v1alpha1, v1), crd(none, nil, v1alpha1, v1), false},
		{"the webhook kept", crd(webhook, both, v1alpha1, v1), crd(webhook, nil, v1alpha1, v1), false},
		{"not rendered, the webhook another manager's", crd(webhook, both, v1alpha1, v1), unrendered(), false},
		{"not rendered, the webhook Capstan's", ownedByCapstan(crd(webhook, both, v1alpha1, v1)), unrendered(), true},
		{"a webhook added", crd(none, both, v1alpha1, v1), crd(webhook, nil, v1alpha1, v1), false},
	} {
		live, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tc.cur)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tc.next)
		if err != nil {
			t.Fatal(err)
		}
		ref := capstanv1.ObjectRef{Kind: "CustomResourceDefinition", Name: tc.cur.Name}
		vs, _, err := (&AddonReconciler{}).crdChange(context.Background(), nil, ref,
			&unstructured.Unstructured{Object: obj}, &unstructured.Unstructured{Object: live}, func() bool { return false })
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		refused := slices.ContainsFunc(vs, func(v capstanv1.Violation) bool { return v.Rule == "crd-conversion-removed" })
		if refused != tc.refused || len(vs) > 1 {
			t.Errorf("%s: violations %+v; want crd-conversion-removed %v", tc.name, vs, tc.refused)
		}
	}
}

// TestValidateInControllerLeavesStatusOut: an object's status is not
// judged, as the shadow's dry-run create does not judge it: a create
// cannot carry it, and its controller writes it again. A status the new
// schema would refuse breaks nothing stored.
func TestValidateInControllerLeavesStatusOut(t *testing.T) {
	crd := crdOf(crdVersion{name: "v1", served: true, storage: true, size: "integer"})
	v := crd.Spec.Versions[0]
	v.Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}},
			"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"conditions": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Required: []string{"type", "message"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"type": {Type: "string"}, "message": {Type: "string"}}}}}}}}}}
	stored := []unstructured.Unstructured{{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": map[string]any{"name": "a", "namespace": "ns"},
		"spec":   map[string]any{"size": int64(3)},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready"}}}}}}
	checked, invalid, first, err := validateInController(crd, v, stored)
	if err != nil || checked != 1 || invalid != 0 {
		t.Errorf("checked %d, invalid %d (%s), %v; want 1 checked, none invalid", checked, invalid, first, err)
	}
}
