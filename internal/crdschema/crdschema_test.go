package crdschema

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// crd builds an Addon-like CRD stamped with stamp ("" for none) whose
// status has the given fields.
func crd(stamp string, status ...string) *apiextensionsv1.CustomResourceDefinition {
	props := map[string]apiextensionsv1.JSONSchemaProps{}
	for _, f := range status {
		props[f] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	}
	c := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "addons.capstan.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
			Name: "v1alpha1",
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type:       "object",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{"status": {Type: "object", Properties: props}},
			}},
		}}},
	}
	if stamp != "" {
		c.Annotations = map[string]string{Annotation: stamp}
	}
	return c
}

// TestCompare: only equal stamps match; a CRD that is missing, unstamped
// or lacks the binary's fields is older, one with fields the binary lacks
// is newer, and each message names the CRD, both stamps and what to run.
func TestCompare(t *testing.T) {
	want := crd("sha256:new", "phase", "preHooksDone", "appliedGeneration")
	for _, c := range []struct {
		name    string
		live    *apiextensionsv1.CustomResourceDefinition
		skew    Skew
		message []string
	}{
		{"the same stamp", crd("sha256:new", "phase", "preHooksDone", "appliedGeneration"), Match, nil},
		{"the same stamp, whatever the schema says", crd("sha256:new", "phase"), Match, nil},
		{"not installed", nil, Missing, []string{"addons.capstan.dev is not installed", FixCommand}},
		{"older", crd("sha256:old", "phase"), Older, []string{"addons.capstan.dev is older than this controller",
			"is sha256:old, this controller's sha256:new", "it lacks status.appliedGeneration, status.preHooksDone", FixCommand}},
		{"unstamped", crd("", "phase", "preHooksDone", "appliedGeneration"), Older, []string{"is none, this controller's sha256:new", FixCommand}},
		{"newer, after a rollback", crd("sha256:next", "phase", "preHooksDone", "appliedGeneration", "nextThing"), Newer,
			[]string{"addons.capstan.dev is newer than this controller", "is sha256:next, this controller's sha256:new",
				"does not know status.nextThing", FixCommand}},
		{"neither", crd("sha256:other", "phase", "elsewhere"), Other, []string{"is sha256:other, this controller's sha256:new",
			"it lacks status.appliedGeneration", "does not know status.elsewhere", FixCommand}},
		{"the same fields, another stamp", crd("sha256:other", "phase", "preHooksDone", "appliedGeneration"), Other,
			[]string{"is not the one this controller was built with", FixCommand}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := Compare(want, c.live)
			if c.skew == Match {
				if m != nil {
					t.Fatalf("a mismatch: %v", m)
				}
				return
			}
			if m == nil {
				t.Fatalf("no mismatch; want skew %d", c.skew)
			}
			if m.Skew != c.skew {
				t.Errorf("skew %d, want %d: %v", m.Skew, c.skew, m)
			}
			for _, part := range c.message {
				if !strings.Contains(m.Error(), part) {
					t.Errorf("the message does not say %q:\n%s", part, m.Error())
				}
			}
		})
	}
}

// TestWithinParent: a field listed under a missing parent is not listed
// again, but a sibling whose name begins with the parent's is.
func TestWithinParent(t *testing.T) {
	got := missing(map[string]bool{"v:.status": true, "v:.status.a": true, "v:.statusText": true}, map[string]bool{})
	if strings.Join(got, ",") != "status,statusText" {
		t.Errorf("missing fields %v, want status and statusText", got)
	}
}

// TestStamp: the stamp is the hash of the spec, one line among the
// annotations with the rest of the file unchanged, the same when stamped
// again, and blind to the YAML's layout.
func TestStamp(t *testing.T) {
	doc := []byte("---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  annotations:\n" +
		"    controller-gen.kubebuilder.io/version: v0.23.0\n  name: things.capstan.dev\nspec:\n  group: capstan.dev\n  scope: Namespaced\n")
	out, err := Stamp(doc)
	if err != nil {
		t.Fatal(err)
	}
	hash, err := Hash(map[string]any{"scope": "Namespaced", "group": "capstan.dev"})
	if err != nil {
		t.Fatal(err)
	}
	line := "    " + Annotation + ": " + hash + "\n"
	if string(out) != strings.Replace(string(doc), "  annotations:\n", "  annotations:\n"+line, 1) {
		t.Errorf("stamped:\n%s", out)
	}
	again, err := Stamp(out)
	if err != nil || !bytes.Equal(again, out) {
		t.Errorf("stamped twice: %v\n%s", err, again)
	}
	if _, err := Stamp([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")); err == nil {
		t.Error("a file without a spec was stamped")
	}
}

// TestEmbeddedCRDsAreStamped: the CRDs this binary embeds, and the chart's
// copies, carry the hash of their spec as it is now, so a CRD edited
// without `make generate` fails here.
func TestEmbeddedCRDsAreStamped(t *testing.T) {
	want, err := Expected()
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 2 {
		t.Errorf("%d CRDs embedded, want Addon's and AddonRepository's", len(want))
	}
	for _, c := range want {
		hash, err := Hash(c.Spec)
		if err != nil {
			t.Fatal(err)
		}
		if c.Annotations[Annotation] != hash {
			t.Errorf("CRD %s is stamped %s; its spec hashes to %s: run make generate", c.Name, c.Annotations[Annotation], hash)
		}
	}
	files, err := filepath.Glob("../../config/crd/bases/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("config/crd/bases: %v", err)
	}
	for _, f := range files {
		ours, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		chart, err := os.ReadFile(filepath.Join("../../charts/capstan/crds", filepath.Base(f)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ours, chart) {
			t.Errorf("charts/capstan/crds/%s is not config's: run make generate", filepath.Base(f))
		}
		var doc struct {
			Spec any `json:"spec"`
		}
		if err := yaml.Unmarshal(ours, &doc); err != nil {
			t.Fatal(err)
		}
		hash, err := Hash(doc.Spec)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(ours, []byte(Annotation+": "+hash+"\n")) {
			t.Errorf("%s is not stamped with its spec's hash %s: run make generate", f, hash)
		}
	}
}

// TestHashIgnoresDescriptions: specs that differ only in the descriptions
// of their schemas, at any depth, hash the same, since they prune nothing;
// a property named description, its type, or a description inside a
// default value still count.
func TestHashIgnoresDescriptions(t *testing.T) {
	spec := func(doc string, status map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.CustomResourceDefinitionSpec {
		item := apiextensionsv1.JSONSchemaProps{Type: "object", Description: doc + " item",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": {Type: "string", Description: doc + " name"}}}
		props := map[string]apiextensionsv1.JSONSchemaProps{
			"conditions": {Type: "array", Description: doc + " conditions", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &item}},
			"labels": {Type: "object", Description: doc + " labels", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{
				Allows: true, Schema: &apiextensionsv1.JSONSchemaProps{Type: "string", Description: doc + " value"}}},
		}
		for name, p := range status {
			props[name] = p
		}
		return apiextensionsv1.CustomResourceDefinitionSpec{Group: "capstan.dev", Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
			Name: "v1alpha1",
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", Description: doc + " Addon",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{"status": {Type: "object", Description: doc + " status", Properties: props}},
			}},
		}}}
	}
	hash := func(s apiextensionsv1.CustomResourceDefinitionSpec) string {
		t.Helper()
		h, err := Hash(s)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	base := hash(spec("The", nil))
	if got := hash(spec("Another wording of the", nil)); got != base {
		t.Errorf("specs that differ only in their descriptions hash %s and %s", base, got)
	}
	named := hash(spec("The", map[string]apiextensionsv1.JSONSchemaProps{"description": {Type: "string"}}))
	if named == base {
		t.Error("a property named description does not count")
	}
	if got := hash(spec("The", map[string]apiextensionsv1.JSONSchemaProps{"description": {Type: "integer"}})); got == named {
		t.Error("the type of a property named description does not count")
	}
	withDefault := func(value string) string {
		return hash(spec("The", map[string]apiextensionsv1.JSONSchemaProps{"info": {Type: "object",
			XPreserveUnknownFields: ptr.To(true), Default: &apiextensionsv1.JSON{Raw: []byte(`{"description":"` + value + `"}`)}}}))
	}
	if withDefault("a") == withDefault("b") {
		t.Error("a description inside a default value does not count")
	}
}

// TestForbiddenRead: a CRD the controller may not read says which RBAC it
// needs; another read error does not blame RBAC.
func TestForbiddenRead(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"},
		"addons.capstan.dev", errors.New("no rule"))
	m := &Mismatch{Name: "addons.capstan.dev", ReadError: forbidden}
	for _, part := range []string{"cannot read CRD addons.capstan.dev", "RBAC needs get on customresourcedefinitions", "no add-on is reconciled"} {
		if !strings.Contains(m.Error(), part) {
			t.Errorf("the message does not say %q:\n%s", part, m.Error())
		}
	}
	m.ReadError = apierrors.NewServiceUnavailable("etcd is down")
	if strings.Contains(m.Error(), "RBAC") {
		t.Errorf("an unavailable API server is blamed on RBAC:\n%s", m.Error())
	}
}
