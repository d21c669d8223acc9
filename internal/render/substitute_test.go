package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/resid"

	"capstan.dev/capstan/internal/source"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"name": "prod", "empty": "", "n": "3"}
	for _, tc := range []struct {
		in, want string
		problem  string
	}{
		{in: "cluster-${name}", want: "cluster-prod"},
		{in: "${name}${n}", want: "prod3"},
		{in: "${missing:=dflt}", want: "dflt"},
		{in: "${missing:-dflt}", want: "dflt"},
		{in: "${empty:=dflt}", want: "dflt"},
		{in: "${empty=dflt}", want: ""},
		{in: "${empty-dflt}", want: ""},
		{in: "${missing=dflt}", want: "dflt"},
		{in: "${name:=dflt}", want: "prod"},
		{in: "${missing:=}", want: ""},
		{in: "$${name} and $name", want: "${name} and $name"},
		{in: "echo $HOME $1", want: "echo $HOME $1"},
		{in: "${missing}", problem: "${missing} is not defined"},
		{in: "${ARR[@]}", problem: "${ARR[@]} is not a variable Capstan substitutes"},
		{in: "${#name}", problem: "${#name} is not a variable"},
		{in: "${1abc}", problem: "${1abc} is not a variable"},
		{in: "${name:=${n}}", problem: "nests a variable"},
		{in: "${name", problem: "${name has no closing brace"},
	} {
		got, problems := expand(tc.in, vars, newSubstituteBudget())
		if tc.problem != "" {
			if len(problems) != 1 || !strings.Contains(problems[0], tc.problem) {
				t.Errorf("expand(%q): problems %q, want one with %q", tc.in, problems, tc.problem)
			}
			continue
		}
		if problems != nil || got != tc.want {
			t.Errorf("expand(%q) = %q %q, want %q", tc.in, got, problems, tc.want)
		}
	}
}

// substituteRepo is a folder of plain YAML and a kustomization over the
// same objects, each using variables as a Flux repository does.
func substituteRepo() fstest.MapFS {
	objects := `
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings-${cluster}
  namespace: apps
data:
  cluster: ${cluster}
  port: "${port}"
  banner: ${banner}
  literal: $${cluster} costs $5
  fallback: ${region:=eu-west-1}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: apps
spec:
  replicas: ${replicas}
  template:
    spec:
      containers:
        - name: web
          image: registry.example/web:1.0.0
          env:
            - name: PORT
              value: "${port}"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: script
  namespace: apps
  annotations:
    kustomize.toolkit.fluxcd.io/substitute: disabled
data:
  run.sh: |
    for a in "${ARGS[@]}"; do echo "${a}"; done
`
	return fstest.MapFS{
		"plain/objects.yaml": file(objects),
		"kust/objects.yaml":  file(objects),
		"kust/kustomization.yaml": file(`
resources:
  - objects.yaml
`),
	}
}

func TestFolderSubstitutes(t *testing.T) {
	vars := map[string]string{"cluster": "prod", "port": "8080", "replicas": "3", "banner": "line one\nkind: Secret\nline: three"}
	for _, dir := range []string{"plain", "kust"} {
		t.Run(dir, func(t *testing.T) {
			res, err := FolderWith(substituteRepo(), dir, SourceIdentity{Commit: "abc"}, FolderInputs{Variables: vars})
			if err != nil {
				t.Fatal(err)
			}
			byName := map[string]*unstructured.Unstructured{}
			for _, o := range res.Objects {
				byName[o.GetName()] = o
			}
			cm := byName["settings-prod"]
			if cm == nil {
				t.Fatalf("no ConfigMap settings-prod: the name was not substituted: %v", names(res.Objects))
			}
			want := map[string]any{
				"cluster":  "prod",
				"port":     "8080",
				"banner":   vars["banner"],
				"literal":  "${cluster} costs $5",
				"fallback": "eu-west-1",
			}
			if diff := cmp.Diff(want, cm.Object["data"]); diff != "" {
				t.Errorf("ConfigMap data (-want +got):\n%s", diff)
			}
			// NOTE: unquoted, the replica count is a number again; quoted,
			// the port stays the string the API server wants.
			replicas, _, _ := unstructured.NestedFieldNoCopy(byName["web"].Object, "spec", "replicas")
			if replicas != int64(3) {
				t.Errorf("replicas = %#v, want the number 3", replicas)
			}
			containers, _, _ := unstructured.NestedSlice(byName["web"].Object, "spec", "template", "spec", "containers")
			env := containers[0].(map[string]any)["env"].([]any)[0].(map[string]any)
			if env["value"] != "8080" {
				t.Errorf("env value = %#v, want the string 8080", env["value"])
			}
			script, _, _ := unstructured.NestedString(byName["script"].Object, "data", "run.sh")
			if !strings.Contains(script, `"${ARGS[@]}"`) {
				t.Errorf("the annotated ConfigMap was changed: %q", script)
			}
		})
	}
}

func TestFolderSubstituteProblems(t *testing.T) {
	for _, dir := range []string{"plain", "kust"} {
		t.Run(dir, func(t *testing.T) {
			res, err := FolderWith(substituteRepo(), dir, SourceIdentity{}, FolderInputs{Variables: map[string]string{"cluster": "prod"}})
			var se *SubstituteError
			if !errors.As(err, &se) {
				t.Fatalf("got %v, %v; want a SubstituteError", res, err)
			}
			msg := err.Error()
			for _, want := range []string{
				"ConfigMap apps/settings-${cluster}: ${port} is not defined",
				"${banner} is not defined",
				"Deployment apps/web: ${replicas} is not defined",
				"spec.substitute",
				"$${",
				"kustomize.toolkit.fluxcd.io/substitute: disabled",
			} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q\nlacks %q", msg, want)
				}
			}
			if strings.Count(msg, "${port} is not defined") != 2 {
				t.Errorf("want ${port} once per object that uses it: %q", msg)
			}
		})
	}
}

func TestFolderWithoutVariablesIsUnchanged(t *testing.T) {
	plain, err := Folder(substituteRepo(), "plain", SourceIdentity{Commit: "abc"})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Objects[0].GetName() != "settings-${cluster}" {
		t.Errorf("without variables the text stays: %s", plain.Objects[0].GetName())
	}
	vars := map[string]string{"cluster": "prod", "port": "1", "replicas": "1", "banner": "b"}
	one, err := FolderWith(substituteRepo(), "plain", SourceIdentity{Commit: "abc"}, FolderInputs{Variables: vars})
	if err != nil {
		t.Fatal(err)
	}
	vars["replicas"] = "2"
	two, err := FolderWith(substituteRepo(), "plain", SourceIdentity{Commit: "abc"}, FolderInputs{Variables: vars})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Hash == one.Hash || one.Hash == two.Hash {
		t.Errorf("hashes %s, %s, %s: a variable's value must change the render hash", plain.Hash, one.Hash, two.Hash)
	}
}

func TestSubstitutedPatchesAndImages(t *testing.T) {
	art := &source.Artifact{Tree: &source.Tree{FS: substituteRepo()}, Path: "kust", Identity: SourceIdentity{Commit: "abc"}}
	vars := map[string]string{"cluster": "prod", "port": "8080", "replicas": "3", "banner": "b", "tag": "2.0.0", "team": "blue", "registry": "registry.example", "app": "web"}
	post := &PostRender{
		Patches: []types.Patch{{Patch: `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: any
  labels:
    team: ${team}
`, Target: &types.Selector{ResId: resid.ResId{Name: "${app}"}}}},
		Images: []types.Image{{Name: "${registry}/web", NewTag: "${tag}"}},
	}
	res, err := Render(context.Background(), art, nil, Options{ReleaseName: "x", Namespace: "apps", PostRender: post, Variables: vars})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Objects {
		if o.GetName() != "web" {
			continue
		}
		if o.GetLabels()["team"] != "blue" {
			t.Errorf("labels %v: the patch's variable was not substituted", o.GetLabels())
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if img := containers[0].(map[string]any)["image"]; img != "registry.example/web:2.0.0" {
			t.Errorf("image %v: the image's variable was not substituted", img)
		}
	}
	delete(vars, "team")
	if _, err := Render(context.Background(), art, nil, Options{ReleaseName: "x", Namespace: "apps", PostRender: post, Variables: vars}); err == nil ||
		!strings.Contains(err.Error(), "spec.patches[0]: ${team} is not defined") {
		t.Errorf("a patch's undefined variable: %v", err)
	}
}

// TestSubstitutedPatchOfSeveralDocuments: a patch of several documents
// with a variable in its first is substituted in each and kept whole: the
// second, which deletes a ConfigMap, is applied, not dropped; an alias in
// the second is still refused.
func TestSubstitutedPatchOfSeveralDocuments(t *testing.T) {
	art := &source.Artifact{Tree: &source.Tree{FS: substituteRepo()}, Path: "kust", Identity: SourceIdentity{Commit: "abc"}}
	vars := map[string]string{"cluster": "prod", "port": "8080", "replicas": "3", "banner": "b", "team": "blue"}
	patch := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: apps\n  labels:\n    team: ${team}\n" +
		"---\n$patch: delete\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: script\n  namespace: apps\n"
	post := &PostRender{Patches: []types.Patch{{Patch: patch}}}
	res, err := Render(context.Background(), art, nil, Options{ReleaseName: "x", Namespace: "apps", PostRender: post, Variables: vars})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(res.Objects); !slices.Equal(got, []string{"ConfigMap/apps/settings-prod", "Deployment/apps/web"}) {
		t.Errorf("objects %v; want the ConfigMap script deleted by the patch's second document", got)
	}
	for _, o := range res.Objects {
		if o.GetName() == "web" && o.GetLabels()["team"] != "blue" {
			t.Errorf("labels %v: the first document's variable was not substituted", o.GetLabels())
		}
	}

	post.Patches[0].Patch = patch + "  labels: &l {a: b}\n  annotations: *l\n"
	if _, err := Render(context.Background(), art, nil, Options{ReleaseName: "x", Namespace: "apps", PostRender: post, Variables: vars}); err == nil ||
		!strings.Contains(err.Error(), "document 2 of the patch uses YAML anchors or aliases") {
		t.Errorf("an alias in the second document: %v", err)
	}
}

// TestSubstitutionKeepsTheBuild checks that a kustomization read through
// the substitution, with nothing to substitute, gives the objects the
// build gives: kustomize's own marks do not leak into them.
func TestSubstitutionKeepsTheBuild(t *testing.T) {
	for _, dir := range []string{"apps/prod", "plain"} {
		want, err := Folder(repo(), dir, SourceIdentity{Commit: "abc"})
		if err != nil {
			t.Fatal(err)
		}
		got, err := FolderWith(repo(), dir, SourceIdentity{Commit: "abc"}, FolderInputs{Variables: map[string]string{}})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want.Objects, got.Objects); diff != "" {
			t.Errorf("%s (-build +substituted):\n%s", dir, diff)
		}
	}
}

// FuzzSubstituteDocument feeds any document and text to the substitution:
// it never panics, and a YAML document it substitutes is JSON.
func FuzzSubstituteDocument(f *testing.F) {
	f.Add([]byte("kind: ConfigMap\nmetadata: {name: a}\ndata: {a: \"${x}\", b: ${y:=1}, c: $${z}}\n"), "v\nkind: Secret")
	f.Add([]byte("kind: List\nitems:\n- {kind: ConfigMap, metadata: {name: '${x}'}}\n"), "")
	f.Add([]byte("a: &a ${x}\nb: *a\n"), "${x}")
	f.Fuzz(func(t *testing.T, doc []byte, value string) {
		var in any
		if yamlv3.Unmarshal(doc, &in) != nil {
			return
		}
		out, problems, err := substituteDocument(doc, map[string]string{"x": value, "y": value}, newSubstituteBudget())
		if err != nil || problems != nil || !bytes.Contains(doc, []byte("${")) {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("substituted document is not JSON:\n%s", out)
		}
	})
}

// TestSubstitutionReadsValuesAsTheBuild checks that the values around a
// variable are read as the folder is read without variables: YAML 1.1's
// words in a plain folder and kyaml's reading in a kustomization, folded
// blocks with their indented lines, and an object with a variable beside
// one without.
func TestSubstitutionReadsValuesAsTheBuild(t *testing.T) {
	object := func(name, extra string) string {
		return `apiVersion: v1
kind: ConfigMap
metadata:
  name: ` + name + `
  annotations:
    day: 2024-01-01
data:
  enabled: on
  plainyes: yes
  on: "x"
  mode: "0755"
  policy: >-
    first line
      indented more
    last line
  folded: >
    para one
     indented
    more
` + extra
	}
	withVar := object("with", "  cluster: ${cluster}\n")
	without := object("without", "  cluster: prod\n")
	fsys := fstest.MapFS{
		"plain/a.yaml":            file(withVar + "---\n" + without),
		"kust/a.yaml":             file(withVar + "---\n" + without),
		"kust/kustomization.yaml": file("resources: [a.yaml]\n"),
	}
	for _, dir := range []string{"plain", "kust"} {
		t.Run(dir, func(t *testing.T) {
			built, err := Folder(fsys, dir, SourceIdentity{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := FolderWith(fsys, dir, SourceIdentity{}, FolderInputs{Variables: map[string]string{"cluster": "prod"}})
			if err != nil {
				t.Fatal(err)
			}
			// Without variables, "with" keeps ${cluster}; with them, it must
			// read as "without" does, name aside, and "without" as built.
			want := built.Objects[1].DeepCopy()
			want.SetName("with")
			if diff := cmp.Diff(want.Object, got.Objects[0].Object); diff != "" {
				t.Errorf("the object with a variable reads differently (-as built +substituted):\n%s", diff)
			}
			if diff := cmp.Diff(built.Objects[1].Object, got.Objects[1].Object); diff != "" {
				t.Errorf("the object without a variable changed (-as built +substituted):\n%s", diff)
			}
		})
	}
}

func TestSubstitutionKeepsKeysApart(t *testing.T) {
	fsys := fstest.MapFS{
		"plain/a.yaml":            file("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  a: one\n  ${k}: two\n"),
		"kust/a.yaml":             file("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  a: one\n  ${k}: two\n"),
		"kust/kustomization.yaml": file("resources: [a.yaml]\n"),
	}
	for _, dir := range []string{"plain", "kust"} {
		if _, err := FolderWith(fsys, dir, SourceIdentity{}, FolderInputs{Variables: map[string]string{"k": "a"}}); err == nil || !strings.Contains(err.Error(), `two keys are "a" once substituted`) {
			t.Errorf("%s: a key made into another: %v", dir, err)
		}
		res, err := FolderWith(fsys, dir, SourceIdentity{}, FolderInputs{Variables: map[string]string{"k": "b"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Objects[0].Object["data"]; !cmp.Equal(got, map[string]any{"a": "one", "b": "two"}) {
			t.Errorf("%s: a key with a variable: %v", dir, got)
		}
	}
}

// TestPlainSubstitutionEdges: a plain folder keeps a large integer's
// digits, reads "#alerts" as text, and refuses a variable a merge key
// reaches through an alias.
func TestPlainSubstitutionEdges(t *testing.T) {
	fsys := fstest.MapFS{
		"plain/a.yaml": file("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nspec:\n  lit: 9007199254740993\n  id: ${id}\n  channel: ${ch}\n"),
		"merge/a.yaml": file("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nbase: &b\n  k: ${v}\nmerged:\n  <<: *b\n"),
	}
	res, err := FolderWith(fsys, "plain", SourceIdentity{}, FolderInputs{Variables: map[string]string{"id": "9007199254740993", "ch": "#alerts"}})
	if err != nil {
		t.Fatal(err)
	}
	spec := res.Objects[0].Object["spec"].(map[string]any)
	if spec["lit"] != int64(9007199254740993) || spec["id"] != int64(9007199254740993) || spec["channel"] != "#alerts" {
		t.Errorf("spec %#v", spec)
	}
	if _, err := FolderWith(fsys, "merge", SourceIdentity{}, FolderInputs{Variables: map[string]string{"v": "x"}}); err == nil || !strings.Contains(err.Error(), "merge key") {
		t.Errorf("a merge key's variable: %v", err)
	}
}

// TestSubstituteDisabled: Flux leaves an object as it is when its label
// or its annotation says so, and so does Capstan, with its own key too.
func TestSubstituteDisabled(t *testing.T) {
	for _, tc := range []struct {
		name, metadata string
		want           bool
	}{
		{"nothing", "name: s\n", false},
		{"flux annotation", "annotations: {kustomize.toolkit.fluxcd.io/substitute: disabled}\n", true},
		{"capstan annotation", "annotations: {capstan.dev/substitute: Disabled}\n", true},
		{"flux label", "labels: {kustomize.toolkit.fluxcd.io/substitute: disabled}\n", true},
		{"capstan label", "labels: {capstan.dev/substitute: disabled}\n", true},
		{"another value", "labels: {kustomize.toolkit.fluxcd.io/substitute: enabled}\n", false},
		{"another label", "labels: {app: disabled}\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var doc yamlv3.Node
			if err := yamlv3.Unmarshal([]byte("kind: ConfigMap\nmetadata:\n  "+strings.ReplaceAll(tc.metadata, "\n", "\n  ")), &doc); err != nil {
				t.Fatal(err)
			}
			if got := disabled(doc.Content[0]); got != tc.want {
				t.Errorf("disabled = %v, want %v", got, tc.want)
			}
		})
	}
	// The label leaves a shell script's defaults as they are written.
	script := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: script\n  labels:\n    kustomize.toolkit.fluxcd.io/substitute: disabled\ndata:\n  run.sh: PORT=${PORT:-8080}\n"
	fsys := fstest.MapFS{
		"plain/a.yaml":            file(script),
		"kust/a.yaml":             file(script),
		"kust/kustomization.yaml": file("resources: [a.yaml]\n"),
	}
	for _, dir := range []string{"plain", "kust"} {
		res, err := FolderWith(fsys, dir, SourceIdentity{}, FolderInputs{Variables: map[string]string{}})
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if got, _, _ := unstructured.NestedString(res.Objects[0].Object, "data", "run.sh"); got != "PORT=${PORT:-8080}" {
			t.Errorf("%s: the labelled script became %q", dir, got)
		}
	}
}

// TestUnquotedVariableTypes: a variable written without quotes takes the
// same type in a kustomize folder as in a plain one, YAML 1.1's as Flux
// reads it (yes is true, a date stays text), whatever the folder's build.
func TestUnquotedVariableTypes(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  any
	}{
		{"yes", true},
		{"on", true},
		{"y", true},
		{"No", false},
		{"off", false},
		{"true", true},
		{"2024-01-02", "2024-01-02"},
		{"2024-01-02T10:00:00Z", "2024-01-02T10:00:00Z"},
		{"3", int64(3)},
		{"-7", int64(-7)},
		{"0x1F", int64(31)},
		{"1_000", int64(1000)},
		{"1.5", 1.5},
		{"null", nil},
		{"~", nil},
		{"", nil},
		{"prod", "prod"},
		{"#alerts", "#alerts"},
		{"[a, b]", "[a, b]"},
		{"a: b", "a: b"},
	} {
		t.Run(tc.value, func(t *testing.T) {
			obj := "apiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: t\nspec:\n  value: ${v}\n  quoted: \"${v}\"\n"
			fsys := fstest.MapFS{
				"plain/a.yaml":            file(obj),
				"kust/a.yaml":             file(obj),
				"kust/kustomization.yaml": file("resources: [a.yaml]\n"),
			}
			for _, dir := range []string{"plain", "kust"} {
				res, err := FolderWith(fsys, dir, SourceIdentity{}, FolderInputs{Variables: map[string]string{"v": tc.value}})
				if err != nil {
					t.Fatalf("%s: %v", dir, err)
				}
				spec := res.Objects[0].Object["spec"].(map[string]any)
				if diff := cmp.Diff(tc.want, spec["value"]); diff != "" {
					t.Errorf("%s: unquoted (-want +got):\n%s", dir, diff)
				}
				if spec["quoted"] != tc.value {
					t.Errorf("%s: quoted %#v, want the string %q", dir, spec["quoted"], tc.value)
				}
			}
		})
	}
}

// TestSubstitutionIsBounded: a large value named many times cannot build a
// render of any size in the controller's memory. The values written into
// one render, its objects and its patches together, stop at
// maxSubstituted, with an error that names the variable and the bound.
func TestSubstitutionIsBounded(t *testing.T) {
	value := strings.Repeat("x", 64<<10)
	vars := map[string]string{"v": value}
	// times is how often a value of 64 KiB is named to pass the bound.
	times := maxSubstituted/len(value) + 16
	configMap := func(name string, n int) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  a: " + strings.Repeat("${v}", n) + "\n"
	}
	tooLarge := func(t *testing.T, err error) {
		t.Helper()
		var se *SubstituteError
		if !errors.As(err, &se) || !se.TooLarge {
			t.Fatalf("got %v; want a SubstituteError for a render too large", err)
		}
		for _, want := range []string{"${v} (65536 bytes)", "more than 64 MiB", "name a large variable in fewer places"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the error does not say %q: %v", want, err)
			}
		}
	}
	fsys := fstest.MapFS{
		"plain/big.yaml":            {Data: []byte(configMap("big", times))},
		"kust/kustomization.yaml":   {Data: []byte("resources: [big.yaml]\n")},
		"kust/big.yaml":             {Data: []byte(configMap("big", times))},
		"shared/big.yaml":           {Data: []byte(configMap("big", times/2+8))},
		"within/kustomization.yaml": {Data: []byte("resources: [big.yaml]\n")},
		"within/big.yaml":           {Data: []byte(configMap("big", 8))},
	}
	for _, dir := range []string{"plain", "kust"} {
		t.Run(dir, func(t *testing.T) {
			_, err := FolderWith(fsys, dir, SourceIdentity{}, FolderInputs{Variables: vars})
			tooLarge(t, err)
		})
	}
	t.Run("objects and patches share the bound", func(t *testing.T) {
		art := &source.Artifact{Tree: &source.Tree{FS: fsys}, Path: "shared"}
		// The objects alone, and the patch alone, are within the bound.
		post := &PostRender{Patches: []types.Patch{{Patch: configMap("big", times/2+8)}}}
		_, err := Render(context.Background(), art, nil, Options{ReleaseName: "x", Namespace: "apps", PostRender: post, Variables: vars})
		tooLarge(t, err)
	})
	t.Run("within the bound", func(t *testing.T) {
		res, err := FolderWith(fsys, "within", SourceIdentity{}, FolderInputs{Variables: vars})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Objects[0].Object["data"].(map[string]any)["a"]; got != strings.Repeat(value, 8) {
			t.Errorf("a value within the bound was not substituted: %d bytes", len(got.(string)))
		}
	})
}
