package render

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/kustomize/api/types"

	"capstan.dev/capstan/internal/source"
)

// TestRenderFindsGeneratedFields renders a chart that generates a
// certificate and a random annotation, and expects exactly those fields
// reported, and nothing of the object that renders the same each time.
func TestRenderFindsGeneratedFields(t *testing.T) {
	ch := loadChart(t, "generated")
	art := &source.Artifact{Chart: &source.Chart{Chart: ch, Name: "generated", Version: "1.0.0"}}
	res, err := Render(context.Background(), art, nil, Options{ReleaseName: "g", Namespace: "apps", Capabilities: testCaps})
	if err != nil {
		t.Fatal(err)
	}
	want := []Generated{
		{APIVersion: "v1", Kind: "Secret", Name: "g-tls", Paths: [][]string{{"data", "ca.crt"}, {"data", "tls.crt"}, {"data", "tls.key"}}},
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "g", Paths: [][]string{{"spec", "template", "metadata", "annotations", "rollme"}}},
	}
	if diff := cmp.Diff(want, res.Generated); diff != "" {
		t.Errorf("generated fields (-want +got):\n%s", diff)
	}
}

// TestAPatchedFieldIsNotGenerated: a patch that sets a field the chart
// generates makes it the patch's: the second render is patched too, so
// the field is no longer reported, and the sync keeps the patch's value.
func TestAPatchedFieldIsNotGenerated(t *testing.T) {
	ch := loadChart(t, "generated")
	art := &source.Artifact{Chart: &source.Chart{Chart: ch, Name: "generated", Version: "1.0.0"}}
	patch := &PostRender{Patches: []types.Patch{{Patch: "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: g\nspec:\n  template:\n    metadata:\n      annotations:\n        rollme: fixed\n"}}}
	res, err := Render(context.Background(), art, nil, Options{ReleaseName: "g", Namespace: "apps", Capabilities: testCaps, PostRender: patch})
	if err != nil {
		t.Fatal(err)
	}
	want := []Generated{
		{APIVersion: "v1", Kind: "Secret", Name: "g-tls", Paths: [][]string{{"data", "ca.crt"}, {"data", "tls.crt"}, {"data", "tls.key"}}},
	}
	if diff := cmp.Diff(want, res.Generated); diff != "" {
		t.Errorf("generated fields (-want +got):\n%s", diff)
	}
}

// TestRenderOnceWithoutGenerators checks that a chart naming no
// generator is not rendered a second time, and reports nothing.
func TestRenderOnceWithoutGenerators(t *testing.T) {
	if mayGenerate(loadChart(t, "web")) {
		t.Error("the web chart names no generator, yet would be rendered twice")
	}
	if !mayGenerate(loadChart(t, "generated")) {
		t.Error("the generated chart names genCA, yet would be rendered once")
	}
}

func TestFieldAt(t *testing.T) {
	obj := map[string]any{"webhooks": []any{map[string]any{"clientConfig": map[string]any{"caBundle": "old"}}}}
	path := []string{"webhooks", "0", "clientConfig", "caBundle"}
	if v, ok := FieldAt(obj, path); !ok || v != "old" {
		t.Fatalf("FieldAt = %v, %v", v, ok)
	}
	if !SetFieldAt(obj, path, "new") {
		t.Fatal("SetFieldAt did not set an existing field")
	}
	if v, _ := FieldAt(obj, path); v != "new" {
		t.Errorf("after SetFieldAt, the field is %v", v)
	}
	for _, bad := range [][]string{{"webhooks", "1", "clientConfig"}, {"webhooks", "x"}, {"missing", "a"}} {
		if SetFieldAt(obj, append(bad, "k"), "v") {
			t.Errorf("SetFieldAt set %v, whose parent does not exist", bad)
		}
	}
}

// TestKeepChompingAsHelmInstall checks block scalars that keep their final
// line breaks (|+): helm install parses each template document followed by
// one more line break, so such a scalar at the end of a document gains
// one; a hook is parsed alone and does not. (helm template prints
// otherwise in two places: it trims the end of its last document and adds
// a line break to each hook; Capstan follows what helm install applies.)
func TestKeepChompingAsHelmInstall(t *testing.T) {
	ch := loadChart(t, "chomping")
	art := &source.Artifact{Chart: &source.Chart{Chart: ch, Name: "chomping", Version: "1.0.0"}}
	res, err := Render(context.Background(), art, nil, Options{ReleaseName: "c", Namespace: "apps", Capabilities: testCaps})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]any{}
	for _, o := range res.Objects {
		got[o.GetName()] = o.Object["data"].(map[string]any)
	}
	for _, h := range res.Hooks {
		got[h.Object.GetName()] = h.Object.Object["data"].(map[string]any)
	}
	want := map[string]map[string]any{
		"c-first": {"kept": "in the middle of a file\n\n\n"},
		"c-last":  {"clipped": "clipped\n", "kept": "at the end of a file\n\n"},
		"c-hook":  {"kept": "in a hook\n"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}
}
