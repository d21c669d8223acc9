package render

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/openapi"
	"sigs.k8s.io/yaml"
)

// postRenderFixture is a render with three objects and two hooks; a hook
// Job shares its name with an object Job, as Helm 4's two streams allow.
func postRenderFixture(t *testing.T) *Result {
	t.Helper()
	docs := []string{
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","labels":{"tier":"web"}},"data":{"a":"1"}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":1,"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.25"},{"name":"side","image":"busybox"}]}}}}`,
		`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"migrate"},"spec":{"template":{"spec":{"containers":[{"name":"m","image":"nginx:1.25"}]}}}}`,
	}
	hooks := []string{
		`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"migrate","annotations":{"helm.sh/hook":"pre-install","helm.sh/hook-weight":"1"}},"spec":{"template":{"spec":{"containers":[{"name":"m","image":"nginx:1.25"}]}}}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"smoke","annotations":{"helm.sh/hook":"post-install"}},"spec":{"containers":[{"name":"s","image":"busybox"}]}}`,
	}
	res := &Result{}
	for _, d := range docs {
		res.Objects = append(res.Objects, decodeJSON(t, d))
	}
	for i, d := range hooks {
		h, ok := parseHook(decodeJSON(t, d), "chart/templates/hook"+string(rune('a'+i))+".yaml")
		if !ok {
			t.Fatal("fixture hook is not a hook")
		}
		res.Hooks = append(res.Hooks, h)
	}
	return res
}

func decodeJSON(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(doc)); err != nil {
		t.Fatal(err)
	}
	return u
}

func field(t *testing.T, obj *unstructured.Unstructured, path ...string) any {
	t.Helper()
	v, _, err := unstructured.NestedFieldNoCopy(obj.Object, path...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestPostRenderPatchesBothStreams(t *testing.T) {
	res := postRenderFixture(t)
	p := &PostRender{
		Patches: []types.Patch{
			// A strategic merge patch that names its object: the object
			// Job and the hook Job of that name are both patched.
			{Patch: "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\nspec:\n  backoffLimit: 2\n"},
			{Patch: `[{"op":"replace","path":"/spec/replicas","value":3}]`, Target: selectorOf("Deployment", "web")},
			{Patch: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: any\n  labels:\n    patched: \"yes\"\n", Target: &types.Selector{LabelSelector: "tier=web"}},
			{Patch: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: smoke\n  annotations:\n    helm.sh/hook-weight: \"7\"\n"},
		},
		Images: []types.Image{{Name: "nginx", NewName: "mirror.example/nginx", NewTag: "1.27"}},
	}
	if err := p.apply(res, nil); err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != 3 || len(res.Hooks) != 2 {
		t.Fatalf("objects %d, hooks %d; want 3 and 2", len(res.Objects), len(res.Hooks))
	}
	for i, want := range []string{"settings", "web", "migrate"} {
		if got := res.Objects[i].GetName(); got != want {
			t.Errorf("object %d is %s, want %s: the render's order must stay", i, got, want)
		}
	}
	if got := field(t, res.Objects[1], "spec", "replicas"); got != int64(3) {
		t.Errorf("replicas = %v (%T), want 3", got, got)
	}
	if got := res.Objects[0].GetLabels()["patched"]; got != "yes" {
		t.Errorf("ConfigMap label patched = %q", got)
	}
	if got := field(t, res.Objects[2], "spec", "backoffLimit"); got != int64(2) {
		t.Errorf("object Job backoffLimit = %v", got)
	}
	hook := res.Hooks[0]
	if got := field(t, hook.Object, "spec", "backoffLimit"); got != int64(2) {
		t.Errorf("hook Job backoffLimit = %v", got)
	}
	if hook.Template != "chart/templates/hooka.yaml" || hook.Weight != 1 || hook.Events[0] != "pre-install" {
		t.Errorf("hook Job = %+v; its template, weight and events must stay", hook)
	}
	if _, ok := hook.Object.GetAnnotations()[markObject]; ok {
		t.Error("the hook keeps Capstan's post-render marker")
	}
	if res.Hooks[1].Weight != 7 {
		t.Errorf("the smoke hook's weight = %d, want 7: a patched hook annotation is read again", res.Hooks[1].Weight)
	}
	containers := field(t, res.Objects[1], "spec", "template", "spec", "containers").([]any)
	if got := containers[0].(map[string]any)["image"]; got != "mirror.example/nginx:1.27" {
		t.Errorf("web image = %v", got)
	}
	if got := containers[1].(map[string]any)["image"]; got != "busybox" {
		t.Errorf("side image = %v; images replace only the name they give", got)
	}
	hookContainers := field(t, hook.Object, "spec", "template", "spec", "containers").([]any)
	if got := hookContainers[0].(map[string]any)["image"]; got != "mirror.example/nginx:1.27" {
		t.Errorf("hook image = %v; hooks go through the images too", got)
	}
	if len(res.Notices) != 0 {
		t.Errorf("notices %v, want none", res.Notices)
	}
}

func selectorOf(kind, name string) *types.Selector {
	sel := &types.Selector{}
	sel.Kind, sel.Name = kind, name
	return sel
}

func TestPostRenderDeletesAndNotices(t *testing.T) {
	res := postRenderFixture(t)
	p := &PostRender{
		Patches: []types.Patch{
			{Patch: "$patch: delete\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n"},
			{Patch: `[{"op":"add","path":"/metadata/labels","value":{"x":"y"}}]`, Target: &types.Selector{LabelSelector: "nothing=here"}},
		},
		Images: []types.Image{{Name: "redis", NewTag: "7"}},
	}
	if err := p.apply(res, nil); err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != 2 || res.Objects[0].GetName() != "web" {
		t.Fatalf("objects %v; want the ConfigMap deleted", names(res.Objects))
	}
	var paths []string
	for _, n := range res.Notices {
		paths = append(paths, n.Path)
	}
	if strings.Join(paths, ",") != "spec.patches[1],spec.images" || !strings.Contains(res.Notices[1].Message, "no container of the render runs redis") {
		t.Errorf("notices %v; want one for the patch that selects nothing and one for the image", res.Notices)
	}
}

func TestPostRenderRefusals(t *testing.T) {
	cases := []struct {
		name  string
		patch types.Patch
		want  string
	}{
		{"copy", types.Patch{Patch: `[{"op":"copy","from":"/spec","path":"/spec/x"}]`, Target: &types.Selector{}}, "spec.patches[0]: operation 0 is a JSON 6902 copy"},
		{"not yaml", types.Patch{Patch: "a: [b"}, "spec.patches[0]: the patch is neither YAML nor JSON"},
		{"scalar", types.Patch{Patch: "hello"}, "neither a partial object"},
		{"path", types.Patch{Path: "/etc/passwd", Patch: "{}"}, "written inline, not read from a path"},
		{"json6902 without target", types.Patch{Patch: `[{"op":"remove","path":"/spec"}]`}, "a JSON 6902 patch needs a target"},
		{"names nothing", types.Patch{Patch: "kind: Secret\nmetadata:\n  name: settings\n"}, "names Secret settings, which the render does not have"},
		{"no name", types.Patch{Patch: "kind: Secret\n"}, "names its object with kind and metadata.name"},
		{"bad operation", types.Patch{Patch: `[{"op":"replace","path":"/spec/nothing/there","value":1}]`, Target: &types.Selector{LabelSelector: "tier=web"}}, "spec.patches[0]: "},
		{"removes a hook's annotations", types.Patch{Patch: `[{"op":"remove","path":"/metadata/annotations"}]`, Target: selectorOf("Pod", "smoke")}, "removed the annotations of Pod smoke"},
		{"makes a hook no hook", types.Patch{Patch: `[{"op":"remove","path":"/metadata/annotations/helm.sh~1hook"}]`, Target: selectorOf("Pod", "smoke")}, "removed the helm.sh/hook annotation of hook Pod smoke"},
		{"aliases", types.Patch{Patch: "a: &a [x, x]\nb: [*a, *a]\n"}, "YAML anchors or aliases, which Capstan refuses"},
		{"the mark changed", types.Patch{Patch: `[{"op":"replace","path":"/metadata/annotations/capstan.dev~1post-render-object","value":"h99"}]`, Target: selectorOf("Pod", "smoke")}, "changed the annotation capstan.dev/post-render-object of Pod smoke"},
		{"the mark given to an object", types.Patch{Patch: `[{"op":"replace","path":"/metadata/annotations","value":{"capstan.dev/post-render-object":"h0"}}]`, Target: selectorOf("Deployment", "web")}, "changed the annotation capstan.dev/post-render-object of Deployment web"},
		{"a hook made a test", types.Patch{Patch: `[{"op":"replace","path":"/metadata/annotations/helm.sh~1hook","value":"test"}]`, Target: selectorOf("Pod", "smoke")}, "made hook Pod smoke a test hook"},
		{"an object made a hook", types.Patch{Patch: `[{"op":"add","path":"/metadata/annotations/helm.sh~1hook","value":"pre-install"}]`, Target: selectorOf("Deployment", "web")}, "gave Deployment web a helm.sh/hook annotation"},
		{"too large", types.Patch{Patch: "kind: Job\nmetadata:\n  name: migrate\n  annotations:\n    a: " + strings.Repeat("x", MaxPatchBytes)}, "more than 65536"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := postRenderFixture(t)
			before := len(res.Objects)
			err := (&PostRender{Patches: []types.Patch{tc.patch}}).apply(res, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one that says %q", err, tc.want)
			}
			if len(res.Objects) != before {
				t.Error("a refused patch changed the render")
			}
		})
	}
}

func TestPostRenderBoundsGrowth(t *testing.T) {
	res := &Result{}
	for i := range 1200 {
		res.Objects = append(res.Objects, decodeJSON(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c`+strings.Repeat("x", i%7)+string(rune('a'+i%26))+`-`+strconv.Itoa(i)+`"}}`))
	}
	big := "kind: ConfigMap\nmetadata:\n  name: any\n  annotations:\n    a: " + strings.Repeat("x", 60<<10) + "\n"
	err := (&PostRender{Patches: []types.Patch{{Patch: big, Target: selectorOf("ConfigMap", "")}}}).apply(res, nil)
	if err == nil || !strings.Contains(err.Error(), "more than the limit of 64 MiB") {
		t.Fatalf("error %v; a patch of 60 KiB over 1,200 objects must be refused before it runs", err)
	}
}

func TestPostRenderHash(t *testing.T) {
	const h = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
	var none *PostRender
	if got, _ := none.hash(h); got != h {
		t.Error("no post-render changed the hash")
	}
	if got, _ := (&PostRender{}).hash(h); got != h {
		t.Error("an empty post-render changed the hash")
	}
	a, _ := (&PostRender{Images: []types.Image{{Name: "nginx", NewTag: "1"}}}).hash(h)
	b, _ := (&PostRender{Images: []types.Image{{Name: "nginx", NewTag: "2"}}}).hash(h)
	if a == h || b == h || a == b {
		t.Errorf("hashes %s and %s: each post-render must be a render of its own", a, b)
	}
}

// TestPostRenderKeepsWhatKustomizeCannotTake: an object without a name
// passes through in its place, and a patch that names its object by a
// core apiVersion patches that object only, not a kind of the same name
// in another group.
func TestPostRenderKeepsWhatKustomizeCannotTake(t *testing.T) {
	res := postRenderFixture(t)
	res.Objects = append(res.Objects[:1], append([]*unstructured.Unstructured{
		decodeJSON(t, `{"apiVersion":"batch/v1","kind":"Job","metadata":{"generateName":"once-"}}`),
		decodeJSON(t, `{"apiVersion":"example.com/v1","kind":"ConfigMap","metadata":{"name":"settings"}}`),
	}, res.Objects[1:]...)...)
	p := &PostRender{Patches: []types.Patch{{Patch: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  labels: {patched: \"yes\"}\n"}}}
	if err := p.apply(res, nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(res.Objects), ","); got != "ConfigMap//settings,Job//,ConfigMap//settings,Deployment//web,Job//migrate" {
		t.Fatalf("objects %s: the nameless Job must keep its place", got)
	}
	if res.Objects[0].GetLabels()["patched"] != "yes" || res.Objects[2].GetLabels()["patched"] != "" {
		t.Errorf("labels %v and %v: only the core ConfigMap is named by apiVersion v1", res.Objects[0].GetLabels(), res.Objects[2].GetLabels())
	}
	for _, obj := range res.Objects {
		for k := range obj.GetAnnotations() {
			if strings.HasPrefix(k, "capstan.dev/post-render") {
				t.Errorf("%s %s keeps the mark %s", obj.GetKind(), obj.GetName(), k)
			}
		}
	}
}

// TestPostRenderBudget: a large render with many patches is refused
// before kustomize reads it over and over.
func TestPostRenderBudget(t *testing.T) {
	res := &Result{}
	for i := range 4500 {
		res.Objects = append(res.Objects, decodeJSON(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c`+strconv.Itoa(i)+`"},"data":{"a":"`+strings.Repeat("x", 8<<10)+`"}}`))
	}
	err := (&PostRender{Patches: []types.Patch{{Patch: "{}", Target: selectorOf("Secret", "")}}}).apply(res, nil)
	if err == nil || !strings.Contains(err.Error(), "would have kustomize read") {
		t.Fatalf("error %v; a render of 36 MiB must be refused before kustomize reads it twice", err)
	}
}

// TestPostRenderTwins: two hooks of one kind and name (one per event, as
// Helm renders them), and a namespaced object written with no namespace
// beside its twin in default, are each patched, not refused.
func TestPostRenderTwins(t *testing.T) {
	res := postRenderFixture(t)
	twin, ok := parseHook(decodeJSON(t, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"smoke","annotations":{"helm.sh/hook":"post-delete"}},"spec":{"containers":[{"name":"s","image":"busybox"}]}}`), "chart/templates/again.yaml")
	if !ok {
		t.Fatal("not a hook")
	}
	res.Hooks = append(res.Hooks, twin)
	res.Objects = append(res.Objects, decodeJSON(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","namespace":"default","labels":{"tier":"web"}}}`))
	p := &PostRender{
		Patches: []types.Patch{{Patch: `[{"op":"add","path":"/metadata/labels","value":{"patched":"yes"}}]`, Target: selectorOf("", "")}},
		Images:  []types.Image{{Name: "busybox", NewTag: "1.37"}},
	}
	if err := p.apply(res, nil); err != nil {
		t.Fatal(err)
	}
	if len(res.Hooks) != 3 || res.Hooks[2].Template != "chart/templates/again.yaml" || res.Hooks[2].Events[0] != "post-delete" {
		t.Fatalf("hooks %+v", res.Hooks)
	}
	for _, obj := range append(slices.Clone(res.Objects), hookObjectsOf(res.Hooks)...) {
		if obj.GetLabels()["patched"] != "yes" {
			t.Errorf("%s %s/%s was not patched", obj.GetKind(), obj.GetNamespace(), obj.GetName())
		}
	}
	containers := field(t, res.Hooks[2].Object, "spec", "containers").([]any)
	if got := containers[0].(map[string]any)["image"]; got != "busybox:1.37" {
		t.Errorf("the second smoke hook's image = %v", got)
	}
}

func hookObjectsOf(hooks []Hook) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(hooks))
	for i, h := range hooks {
		out[i] = h.Object
	}
	return out
}

// TestPostRenderPatchesTestsApart: a chart's tests go through the images
// and the patches, as every hook does; a patch that does not fit a test
// leaves the tests out with a notice, and patches what the sync applies as
// ever.
func TestPostRenderPatchesTestsApart(t *testing.T) {
	withTest := func(t *testing.T) *Result {
		res := postRenderFixture(t)
		h, ok := parseHook(decodeJSON(t, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"check","annotations":{"helm.sh/hook":"test"}},"spec":{"containers":[{"name":"c","image":"nginx:1.25"}]}}`), "chart/templates/tests/check.yaml")
		if !ok || !h.TestOnly() {
			t.Fatal("fixture test is not a test")
		}
		res.Hooks = append(res.Hooks, h)
		return res
	}
	res := withTest(t)
	images := &PostRender{Images: []types.Image{{Name: "nginx", NewName: "mirror.example/nginx"}}}
	if err := images.applyAll(res, nil); err != nil {
		t.Fatal(err)
	}
	if len(res.Hooks) != 3 || res.Hooks[2].Object.GetName() != "check" || len(res.Notices) != 0 {
		t.Fatalf("hooks %d, notices %v", len(res.Hooks), res.Notices)
	}
	if got := field(t, res.Hooks[2].Object, "spec", "containers").([]any)[0].(map[string]any)["image"]; got != "mirror.example/nginx:1.25" {
		t.Errorf("the test's image = %v; tests go through the images", got)
	}

	// A patch that names a test, with no target, patches it.
	res = withTest(t)
	named := &PostRender{Patches: []types.Patch{{Patch: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: check\n  labels: {patched: \"yes\"}\n"}}}
	if err := named.applyAll(res, nil); err != nil || len(res.Notices) != 0 || res.Hooks[2].Object.GetLabels()["patched"] != "yes" {
		t.Fatalf("a patch that names the test: %v, notices %v, hooks %v", err, res.Notices, res.Hooks)
	}

	// A patch of every Pod that only the sync's hook fits: removing a field
	// the test lacks would fail the render; the tests are left out.
	res = withTest(t)
	misfit := &PostRender{Patches: []types.Patch{{Patch: `[{"op":"remove","path":"/spec/containers/0/image"}]`, Target: selectorOf("Pod", "")}}}
	res.Hooks[2].Object.Object["spec"].(map[string]any)["containers"] = []any{map[string]any{"name": "c"}}
	if err := misfit.applyAll(res, nil); err != nil {
		t.Fatalf("a patch that does not fit a test failed the render: %v", err)
	}
	if len(res.Hooks) != 2 || slices.ContainsFunc(res.Hooks, Hook.TestOnly) {
		t.Fatalf("hooks %v; want the test left out", res.Hooks)
	}
	if len(res.Notices) != 1 || !strings.Contains(res.Notices[0].Message, "which are left out") || res.TestsLeftOut == "" {
		t.Fatalf("notices %v", res.Notices)
	}
	if _, ok := field(t, res.Hooks[1].Object, "spec", "containers").([]any)[0].(map[string]any)["image"]; ok {
		t.Error("the sync's hook was not patched")
	}
}

// TestPostRenderMultiDocumentPatch: one patch of several strategic merge
// patches, separated by "---", applies each to the object it names, in
// either stream, as kustomize takes it; none is cut, and no target is
// made up that kustomize would refuse for several.
func TestPostRenderMultiDocumentPatch(t *testing.T) {
	res := postRenderFixture(t)
	p := &PostRender{Patches: []types.Patch{{Patch: "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 4\n" +
		"---\n$patch: delete\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n" +
		"---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: smoke\n  annotations:\n    helm.sh/hook-weight: \"3\"\n---\n"}}}
	if err := p.apply(res, nil); err != nil {
		t.Fatal(err)
	}
	if got := names(res.Objects); !slices.Equal(got, []string{"Deployment//web", "Job//migrate"}) {
		t.Errorf("objects %v; want the ConfigMap deleted by the second document", got)
	}
	if got := field(t, res.Objects[0], "spec", "replicas"); got != int64(4) {
		t.Errorf("replicas = %v; want 4 from the first document", got)
	}
	if res.Hooks[1].Weight != 3 {
		t.Errorf("the smoke hook's weight = %d; want 3 from the third document", res.Hooks[1].Weight)
	}
	for _, obj := range slices.Concat(res.Objects, hookObjectsOf(res.Hooks)) {
		for k := range obj.GetAnnotations() {
			if strings.HasPrefix(k, markTarget) {
				t.Errorf("%s %s keeps the mark %s", obj.GetKind(), obj.GetName(), k)
			}
		}
	}
	if len(res.Notices) != 0 {
		t.Errorf("notices %v, want none", res.Notices)
	}
}

// TestPostRenderMultiDocumentRefusals: every document of a patch is
// checked, not only the first, and what kustomize refuses of several is
// refused saying what to write.
func TestPostRenderMultiDocumentRefusals(t *testing.T) {
	deployment := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 4\n"
	cases := []struct {
		name  string
		patch types.Patch
		want  string
	}{
		{"an alias in the second document", types.Patch{Patch: deployment + "---\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: &a x\n  b: *a\n"},
			"spec.patches[0]: document 2 of the patch uses YAML anchors or aliases"},
		{"a second document that names nothing", types.Patch{Patch: deployment + "---\nkind: Secret\nmetadata:\n  name: settings\n"},
			"spec.patches[0] (document 2) names Secret settings, which the render does not have"},
		{"a list of operations among them", types.Patch{Patch: deployment + "---\n[{\"op\": \"remove\", \"path\": \"/spec\"}]\n"},
			"document 2 is not a partial object"},
		{"a list of operations with a copy, in the second document", types.Patch{Patch: deployment + "---\n- {op: copy, from: /spec, path: /spec/x}\n"},
			"document 2 is not a partial object"},
		{"several with a target", types.Patch{Patch: deployment + "---\n" + deployment, Target: selectorOf("Deployment", "web")},
			"spec.patches[0]: the patch holds 2 strategic merge patches and a target"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := postRenderFixture(t)
			err := (&PostRender{Patches: []types.Patch{tc.patch}}).apply(res, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one that says %q", err, tc.want)
			}
			if len(res.Objects) != 3 || field(t, res.Objects[1], "spec", "replicas") != int64(1) {
				t.Error("a refused patch changed the render")
			}
		})
	}
}

// Should a build still leave another schema in kyaml's process-wide
// state (a custom one, or one that failed to parse), the next post-render
// merges with the built-in schema again: its strategic merge patch adds
// to a container, and drops neither the other container nor the env.
func TestPostRenderMergesWithTheBuiltInSchema(t *testing.T) {
	for _, tc := range []struct{ name, schema string }{
		{name: "a schema that replaces lists", schema: replacingSchema},
		{name: "a schema that does not parse", schema: `{"definitions": {"x": {"type": 5}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer openapi.ResetOpenAPI()
			if err := openapi.SetSchema(nil, []byte(tc.schema), true); err != nil {
				t.Fatal(err)
			}
			deploy := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(twoContainers), &deploy.Object); err != nil {
				t.Fatal(err)
			}
			res := &Result{Objects: []*unstructured.Unstructured{deploy}}
			if err := (&PostRender{Patches: []types.Patch{{Patch: addEnv}}}).apply(res, nil); err != nil {
				t.Fatal(err)
			}
			if got, want := containersOf(t, res.Objects[0]), []string{"app app:1 C A", "sidecar side:1"}; !slices.Equal(got, want) {
				t.Errorf("containers = %q, want %q: the patch merged", got, want)
			}
		})
	}
}

// The post-render marks objects with annotations: an object with one
// annotation that is not a string came back with the marks' map alone,
// every annotation of its own dropped. It is refused instead.
func TestPostRenderRefusesAnnotationsThatAreNotStrings(t *testing.T) {
	res := postRenderFixture(t)
	res.Folder = true
	if err := unstructured.SetNestedField(res.Objects[0].Object, map[string]any{"prometheus.io/scrape": "true", "prometheus.io/port": int64(8080)}, "metadata", "annotations"); err != nil {
		t.Fatal(err)
	}
	err := (&PostRender{Patches: []types.Patch{{Patch: `[{"op":"add","path":"/data/b","value":"2"}]`, Target: selectorOf("ConfigMap", "")}}}).apply(res, nil)
	if err == nil || !strings.Contains(err.Error(), "render, before spec.patches: ConfigMap settings: the annotation prometheus.io/port is a number, not a string: quote the value") {
		t.Fatalf("error = %v; annotations after = %v, want the annotation refused", err, res.Objects[0].Object["metadata"])
	}
}
