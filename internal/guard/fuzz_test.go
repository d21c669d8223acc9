package guard

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// FuzzCheck feeds arbitrary YAML documents to Harden and Check. Neither may
// panic; Harden must stay idempotent; and every object whose kind is not
// allowed must be refused.
func FuzzCheck(f *testing.F) {
	files, _ := filepath.Glob("testdata/charts/*.yaml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		for _, doc := range splitDocs(string(data)) {
			f.Add([]byte(doc))
		}
	}
	for _, cases := range podCases {
		for _, tc := range cases {
			f.Add([]byte(deployment(tc.manifest)))
		}
	}
	for _, s := range []string{
		"apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: Secret}]",
		"[{apiVersion: v1, kind: Secret, metadata: {name: a}}, 7, null, {kind: Pod}]",
		"apiVersion: apps/v1\nkind: Deployment\nspec: {template: {spec: {containers: [{securityContext: {capabilities: {drop: 5}}}]}}}",
		"apiVersion: batch/v1\nkind: Job\nspec: {template: {spec: {volumes: [{projected: {sources: [{serviceAccountToken: {}}]}}]}}}",
		"apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c}\nspec: {dataSourceRef: {kind: PersistentVolumeClaim, name: c}}",
	} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		var doc any
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return
		}
		var objs []*unstructured.Unstructured
		switch d := doc.(type) {
		case map[string]any:
			objs = append(objs, &unstructured.Unstructured{Object: d})
		case []any:
			for _, item := range d {
				m, _ := item.(map[string]any)
				objs = append(objs, &unstructured.Unstructured{Object: m})
			}
		default:
			return
		}

		c := testContext()
		c.Lookup = func(context.Context, schema.GroupVersionKind, string, string) (bool, bool, error) {
			return true, false, nil
		}
		vs := Check(context.Background(), objs, c)

		refusedKinds := 0
		for _, o := range objs {
			if o.Object == nil {
				refusedKinds++
				continue
			}
			gv, err := schema.ParseGroupVersion(o.GetAPIVersion())
			if err != nil || !IsAllowedKind(gv.WithKind(o.GetKind())) {
				refusedKinds++
			}
		}
		kindViolations := 0
		for _, v := range vs {
			if v.Rule == "" || v.Message == "" {
				t.Fatalf("violation without rule or message: %+v", v)
			}
			if v.Rule == RuleKindNotAllowed || v.Rule == RuleMalformedObject && (v.Path == "" || v.Path == "apiVersion" || v.Path == "kind" || v.Path == "apiVersion,kind") {
				kindViolations++
			}
		}
		if kindViolations < refusedKinds {
			t.Fatalf("%d objects have a kind that is not allowed but only %d were refused for it: %+v", refusedKinds, kindViolations, vs)
		}
		// Every allowed object exists here and is not owned, so any object
		// with a name must be refused.
		if len(objs) > 0 && len(vs) == 0 {
			t.Fatalf("an object passed although the live state says another owner holds it: %v", objs[0].Object)
		}

		once := make([]*unstructured.Unstructured, len(objs))
		for i, o := range objs {
			once[i] = o.DeepCopy()
		}
		_ = Harden(once)
		twice := make([]*unstructured.Unstructured, len(once))
		for i, o := range once {
			twice[i] = o.DeepCopy()
		}
		_ = Harden(twice)
		if !reflect.DeepEqual(once, twice) {
			t.Fatalf("Harden is not idempotent")
		}
		Check(context.Background(), once, c)

		// With nothing live, only the objects that break a rule of their
		// own are left out; CheckWithout must not panic on what is left.
		c.Lookup = func(context.Context, schema.GroupVersionKind, string, string) (bool, bool, error) {
			return false, false, nil
		}
		for _, v := range CheckWithout(context.Background(), once, Check(context.Background(), once, c), c) {
			if v.Rule == "" || v.Message == "" {
				t.Fatalf("violation without rule or message: %+v", v)
			}
		}
	})
}
