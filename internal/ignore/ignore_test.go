package ignore

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

func object(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestCheck(t *testing.T) {
	tests := []struct {
		path, err string
	}{
		{"/spec/replicas", ""},
		{"/spec/template/spec/containers/0/resources", ""},
		{"/metadata/annotations/example.com~1hash", ""},
		{"/metadata/labels/team", ""},
		{"spec/replicas", "not a JSON pointer"},
		{"/", "not a JSON pointer"},
		{"/spec//replicas", "empty step"},
		{"/spec/a~2b", "a ~ is written ~0"},
		{"/kind", "cannot be left"},
		{"/apiVersion", "cannot be left"},
		{"/metadata/name", "only one annotation or label"},
		{"/metadata/labels", "only one annotation or label"},
		{"/metadata/labels/capstan.dev~1addon", "how Capstan finds its objects"},
		{"/metadata/labels/app.kubernetes.io~1managed-by", "how Capstan finds its objects"},
	}
	for _, tt := range tests {
		err := Check([]capstanv1.IgnoreRule{{Paths: []string{tt.path}}})
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.path, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "spec.ignore[0].paths[0]")):
			t.Errorf("%s: %v; want an error naming the field and saying %q", tt.path, err, tt.err)
		}
	}
	if err := Check([]capstanv1.IgnoreRule{{}}); err == nil || !strings.Contains(err.Error(), "spec.ignore[0].paths is empty") {
		t.Errorf("a rule without paths: %v", err)
	}
}

func TestPaths(t *testing.T) {
	core, apps := "", "apps"
	dep := object(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\n")
	rules := []capstanv1.IgnoreRule{
		{Paths: []string{"/a"}},
		{Paths: []string{"/b"}, Target: capstanv1.IgnoreTarget{Group: &apps, Kind: "Deployment"}},
		{Paths: []string{"/c"}, Target: capstanv1.IgnoreTarget{Group: &core, Kind: "Deployment"}},
		{Paths: []string{"/d"}, Target: capstanv1.IgnoreTarget{Name: "web", Namespace: "shop"}},
		{Paths: []string{"/e"}, Target: capstanv1.IgnoreTarget{Name: "api"}},
		{Paths: []string{"/f"}, Target: capstanv1.IgnoreTarget{Kind: "StatefulSet"}},
	}
	if got, want := Paths(rules, dep), []string{"/a", "/b", "/d"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("paths %v, want %v", got, want)
	}
}

func TestKeep(t *testing.T) {
	manifest := object(t, `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations: {example.com/hash: from-chart}
spec:
  replicas: 1
  template:
    spec:
      containers:
      - name: web
        resources: {limits: {cpu: "1"}}
      - name: sidecar
`)
	live := object(t, `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 5
  strategy: {type: Recreate}
  template:
    spec:
      containers:
      - name: web
        resources: {limits: {cpu: "1"}}
`)
	kept, _, _ := keep3(t, manifest, live, []string{
		"/spec/replicas", // runs with 5: kept
		"/metadata/annotations/example.com~1hash",    // runs without: left out
		"/spec/template/spec/containers/0/resources", // the same: nothing to do
		"/spec/template/spec/containers/1/image",     // neither has it
		"/spec/strategy/type",                        // runs with it, the manifest has no strategy: made
		"/spec/paused",                               // neither
	})
	if want := []string{"/spec/replicas", "/metadata/annotations/example.com~1hash", "/spec/strategy/type"}; !reflect.DeepEqual(kept, want) {
		t.Fatalf("kept %v, want %v", kept, want)
	}
	if r, _, _ := unstructured.NestedInt64(manifest.Object, "spec", "replicas"); r != 5 {
		t.Errorf("replicas %d, want the live 5", r)
	}
	if _, ok := manifest.GetAnnotations()["example.com/hash"]; ok {
		t.Error("an annotation the object runs without is still in the manifest")
	}
	if s, _, _ := unstructured.NestedString(manifest.Object, "spec", "strategy", "type"); s != "Recreate" {
		t.Errorf("strategy %q, want the live Recreate", s)
	}
	// The live object is never changed, and what Keep copied is its own.
	live.Object["spec"].(map[string]any)["replicas"] = int64(7)
	if r, _, _ := unstructured.NestedInt64(manifest.Object, "spec", "replicas"); r != 5 {
		t.Errorf("the manifest shares the live object's values")
	}
	// A list the manifest holds fewer items of is left as it is, and
	// said to be.
	short := object(t, "kind: Pod\napiVersion: v1\nspec: {containers: [{name: a}]}")
	long := object(t, "kind: Pod\napiVersion: v1\nspec: {containers: [{name: a}, {name: b, image: x}]}")
	if r := keep(t, short, long, []string{"/spec/containers/1/image"}); len(r.Kept) != 0 || !reflect.DeepEqual(r.Unheld, []string{"/spec/containers/1/image"}) {
		t.Errorf("%+v; want nothing kept in a list too short for it, and the path unheld", r)
	}
	// A list the manifest lacks is not made up as an object.
	bare := object(t, "kind: Pod\napiVersion: v1\nspec: {}")
	if r := keep(t, bare, long, []string{"/spec/containers/0/name"}); len(r.Kept) != 0 || len(bare.Object["spec"].(map[string]any)) != 0 || len(r.Unheld) != 1 {
		t.Errorf("%+v through a list the manifest lacks: %v; want nothing kept and the path unheld", r, bare.Object)
	}
	// A list item the object runs without is not removed.
	if r := keep(t, object(t, "kind: Pod\napiVersion: v1\nspec: {containers: [{name: a}, {name: b}]}"), short, []string{"/spec/containers/1"}); len(r.Kept) != 0 || len(r.Unheld) != 1 {
		t.Errorf("%+v; want a list item that stays unheld, not left out", r)
	}
}

// TestKeepReportsWhatTheManifestCannotHold: a path through a list the
// chart renders without (tolerations an admission policy adds to the
// object as it runs) is neither kept, absent nor moved: it is reported as
// unheld, so that the rule does not keep nothing without a word. So is one
// through a value of the manifest that holds no fields, where the object
// runs with fields.
func TestKeepReportsWhatTheManifestCannotHold(t *testing.T) {
	manifest := object(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: app, image: app:1}]
`)
	live := object(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: app, image: app:1, args: [--verbose]}]
      tolerations: [{key: dedicated, effect: NoSchedule}]
`)
	paths := []string{"/spec/template/spec/tolerations/0", "/spec/template/spec/tolerations/0/effect", "/spec/template/spec/containers/0/args/0"}
	r := keep(t, manifest, live, paths)
	if !reflect.DeepEqual(r.Unheld, paths) || len(r.Kept) != 0 || len(r.Absent) != 0 || len(r.Moved) != 0 {
		t.Errorf("%+v; want every path unheld", r)
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(manifest.Object, "spec", "template", "spec", "tolerations"); ok {
		t.Errorf("the manifest gained tolerations: %v", manifest.Object)
	}
	scalar := object(t, "apiVersion: example.com/v1\nkind: Proxy\nmetadata: {name: p}\nspec: {upstream: web}\n")
	structured := object(t, "apiVersion: example.com/v1\nkind: Proxy\nmetadata: {name: p}\nspec: {upstream: {name: web, port: 80}}\n")
	if r := keep(t, scalar, structured, []string{"/spec/upstream/port"}); !reflect.DeepEqual(r.Unheld, []string{"/spec/upstream/port"}) || len(r.Kept) != 0 {
		t.Errorf("%+v; want a path through a value with no fields unheld", r)
	}
}

// TestKeepLeavesAnUnheldPathAsTheChartRendersIt: a path whose way passes
// a list the manifest lacks is reported Unheld, and leaves the manifest as
// it was: no empty objects made on the way, which the apply would own (an
// empty node affinity's required selector, which the API server refuses
// once another writer drops its terms), nor an explicit null turned into
// one. A path that is kept makes the objects on its way.
func TestKeepLeavesAnUnheldPathAsTheChartRendersIt(t *testing.T) {
	const chart = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers: [{name: app, image: a}]
      priorityClassName: null
`
	live := object(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers: [{name: app, image: a}]
      priorityClassName: {tiers: [gold]}
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions: [{key: zone, operator: In, values: [a]}]
`)
	for _, path := range []string{
		"/spec/template/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchExpressions",
		"/spec/template/spec/priorityClassName/tiers/0",
	} {
		manifest := object(t, chart)
		before := manifest.DeepCopy()
		if r := keep(t, manifest, live, []string{path}); !reflect.DeepEqual(r.Unheld, []string{path}) || len(r.Kept) != 0 {
			t.Errorf("%s: %+v; want it unheld", path, r)
		}
		if !reflect.DeepEqual(manifest.Object, before.Object) {
			after, _ := yaml.Marshal(manifest.Object)
			t.Errorf("%s: the manifest changed for a path left as the chart renders it:\n%s", path, after)
		}
	}
	manifest := object(t, chart)
	r := keep(t, manifest, live, []string{"/spec/template/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"})
	if got, _, _ := unstructured.NestedFieldNoCopy(manifest.Object, "spec", "template", "spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"); len(r.Kept) != 1 || got == nil {
		t.Errorf("%+v, %v; want the selector kept, with the objects on its way", r, got)
	}
}

// keep is Keep, which must not fail.
func keep(t *testing.T, manifest, live *unstructured.Unstructured, paths []string) Result {
	t.Helper()
	r, err := Keep(manifest, live, paths)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// keep3 is keep's kept, absent and moved paths.
func keep3(t *testing.T, manifest, live *unstructured.Unstructured, paths []string) (kept, absent, moved []string) {
	t.Helper()
	r := keep(t, manifest, live, paths)
	return r.Kept, r.Absent, r.Moved
}

// TestKeepRefusesIndexesRFC6901DoesNotWrite: a list index with a sign or
// a leading zero, which strconv would read as another index, is refused
// with an error that says how to write it, and nothing is kept; the same
// token as a key of a map is a key like any other.
func TestKeepRefusesIndexesRFC6901DoesNotWrite(t *testing.T) {
	pod := func() *unstructured.Unstructured {
		return object(t, "kind: Pod\napiVersion: v1\nspec: {containers: [{name: a, image: a:1}, {name: b, image: b:1}]}")
	}
	running := object(t, "kind: Pod\napiVersion: v1\nspec: {containers: [{name: a, image: a:2}, {name: b, image: b:2}]}")
	for _, tc := range []struct{ path, want string }{
		{"/spec/containers/+1/image", `"+1" names a list item`},
		{"/spec/containers/01/image", "write /spec/containers/1/image"},
		{"/spec/containers/-0/image", "write /spec/containers/0/image"},
		{"/spec/containers/00", "write /spec/containers/0"},
		{"/spec/containers/-1/image", "with no sign and no leading zero"},
	} {
		m := pod()
		_, err := Keep(m, running, []string{"/spec/containers/0/image", tc.path})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%s: error %v; want one that names the path and says %q", tc.path, err, tc.want)
		}
		if !reflect.DeepEqual(m.Object, pod().Object) {
			t.Errorf("%s: the manifest changed although the paths were refused: %v", tc.path, m.Object)
		}
	}
	// An index as RFC 6901 writes it is kept.
	if r := keep(t, pod(), running, []string{"/spec/containers/1/image", "/spec/containers/0/image"}); len(r.Kept) != 2 {
		t.Errorf("%+v; want both kept", r)
	}
	// Only a list has indexes: 01 is a key of a ConfigMap's data.
	cm := object(t, "kind: ConfigMap\napiVersion: v1\nmetadata: {name: c}\ndata: {\"01\": chart}")
	live := object(t, "kind: ConfigMap\napiVersion: v1\nmetadata: {name: c}\ndata: {\"01\": running}")
	if r := keep(t, cm, live, []string{"/data/01"}); !reflect.DeepEqual(r.Kept, []string{"/data/01"}) {
		t.Errorf("%+v; want the key 01 kept", r)
	}
}

func TestAbsent(t *testing.T) {
	manifest := object(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 1}\n")
	live := object(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, annotations: {injected: \"yes\"}}\nspec: {replicas: 3}\n")
	_, got, _ := keep3(t, manifest, live, []string{"/spec/replicas", "/spec/replica", "/metadata/annotations/injected", "/spec/template/spec/containers/0/image"})
	want := []string{"/spec/replica", "/spec/template/spec/containers/0/image"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("absent %v, want %v: a path either side has is not absent", got, want)
	}
}

// An index names a list item by its place, while the apply matches
// containers by name: a container put before the chart's must not lend it
// its fields.
func TestKeepMovedItems(t *testing.T) {
	manifest := func() *unstructured.Unstructured {
		return object(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers:
      - name: app
        image: app:1
        env: [{name: MODE, value: chart}]
        ports: [{containerPort: 8080}]
`)
	}
	injected := object(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers:
      - name: istio-proxy
        image: proxy:1
        ports: [{containerPort: 15090, protocol: TCP}]
      - name: app
        image: app:2
        env: [{name: MODE, value: live}]
        ports: [{containerPort: 8080, protocol: TCP}]
`)
	paths := []string{
		"/spec/template/spec/containers/0/image",
		"/spec/template/spec/containers/0",
		"/spec/template/spec/containers/0/resources", // neither has it, but the items differ first
		"/spec/template/spec/containers/0/ports/0/hostPort",
		"/spec/template/spec/containers/0/name", // the key itself would rename the chart's item
		"/spec/template/spec/volumes/0/name",    // neither has such a list
	}
	m := manifest()
	kept, absent, moved := keep3(t, m, injected, paths)
	if want := paths[:5]; !reflect.DeepEqual(moved, want) {
		t.Errorf("moved %v, want %v", moved, want)
	}
	if want := paths[5:]; len(kept) != 0 || !reflect.DeepEqual(absent, want) {
		t.Errorf("kept %v, absent %v; want nothing kept and %v absent", kept, absent, want)
	}
	m = manifest()
	if kept, _, moved := keep3(t, m, injected, paths[:1]); len(kept) != 0 || len(moved) != 1 {
		t.Errorf("kept %v, moved %v", kept, moved)
	}
	if c, _, _ := unstructured.NestedSlice(m.Object, "spec", "template", "spec", "containers"); len(c) != 1 || c[0].(map[string]any)["image"] != "app:1" || c[0].(map[string]any)["name"] != "app" {
		t.Errorf("the chart's container is now %v, want app with its own image", c)
	}

	// The same items at the same places are kept as before, in nested lists
	// too; a protocol the API server defaulted is no difference.
	same := object(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers:
      - name: app
        image: app:2
        env: [{name: MODE, value: live}]
        ports: [{containerPort: 8080, protocol: TCP, hostPort: 80}]
      - name: istio-proxy
        image: proxy:1
`)
	m = manifest()
	kept, absent, moved = keep3(t, m, same, []string{
		"/spec/template/spec/containers/0/image",
		"/spec/template/spec/containers/0/env/0/value",
		"/spec/template/spec/containers/0/ports/0/hostPort",
	})
	if len(kept) != 3 || len(absent) != 0 || len(moved) != 0 {
		t.Fatalf("kept %v, absent %v, moved %v; want all three kept", kept, absent, moved)
	}
	c, _, _ := unstructured.NestedSlice(m.Object, "spec", "template", "spec", "containers")
	if app := c[0].(map[string]any); app["image"] != "app:2" || app["env"].([]any)[0].(map[string]any)["value"] != "live" {
		t.Errorf("the app container is %v, want its running image and env", app)
	}

	// An env entry put before the chart's is another item too.
	envFirst := object(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec: {template: {spec: {containers: [{name: app, env: [{name: INJECTED, value: x}, {name: MODE, value: live}]}]}}}
`)
	if _, _, moved := keep3(t, manifest(), envFirst, []string{"/spec/template/spec/containers/0/env/0/value"}); len(moved) != 1 {
		t.Errorf("moved %v, want the env path", moved)
	}

	// Lists of scalars, and of objects without keys, are indexed as before.
	scalars := object(t, "kind: Pod\napiVersion: v1\nspec: {containers: [{name: a, args: [x, y]}], tolerations: [{effect: NoSchedule}]}")
	running := object(t, "kind: Pod\napiVersion: v1\nspec: {containers: [{name: a, args: [z, y]}], tolerations: [{effect: NoExecute}]}")
	if kept, _, moved := keep3(t, scalars, running, []string{"/spec/containers/0/args/0", "/spec/tolerations/0/effect"}); len(kept) != 2 || len(moved) != 0 {
		t.Errorf("kept %v, moved %v; want both kept", kept, moved)
	}
}

// The API server stores no stringData of a core Secret: it writes each key,
// base64, into data, over what data holds. A password the chart sets in
// stringData and someone rotates must be kept from the live data whether
// the rule names /data/password or /stringData/password.
func TestKeepSecretStringData(t *testing.T) {
	const rotated = "cm90YXRlZA==" // "rotated"
	secret := func() *unstructured.Unstructured {
		return object(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: from-chart, user: app}\n")
	}
	live := object(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\ndata: {password: "+rotated+", user: YXBw}\n")
	for _, p := range []string{"/data/password", "/stringData/password"} {
		m := secret()
		kept, absent, moved := keep3(t, m, live, []string{p})
		if !reflect.DeepEqual(kept, []string{p}) || len(absent) != 0 || len(moved) != 0 {
			t.Errorf("%s: kept %v, absent %v, moved %v; want it kept", p, kept, absent, moved)
		}
		if v, _, _ := unstructured.NestedString(m.Object, "data", "password"); v != rotated {
			t.Errorf("%s: data.password %q, want the live %q", p, v, rotated)
		}
		if _, ok, _ := unstructured.NestedString(m.Object, "stringData", "password"); ok {
			t.Errorf("%s: stringData.password is still in the manifest, and the API server would write it over data: %v", p, m.Object)
		}
		if u, _, _ := unstructured.NestedString(m.Object, "stringData", "user"); u != "app" {
			t.Errorf("%s: stringData.user %q, want the chart's app left alone", p, u)
		}
	}

	// The chart's value is the one that runs: nothing to keep, and the
	// path is not absent.
	same := object(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\ndata: {password: ZnJvbS1jaGFydA==}\n") // "from-chart"
	for _, p := range []string{"/data/password", "/stringData/password"} {
		if kept, absent, _ := keep3(t, secret(), same, []string{p}); len(kept) != 0 || len(absent) != 0 {
			t.Errorf("%s on the value that runs: kept %v, absent %v; want neither", p, kept, absent)
		}
	}

	// A key the Secret runs without is left out, stringData and all once
	// it holds nothing else.
	m := object(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {token: abc}\n")
	if kept, _, _ := keep3(t, m, live, []string{"/stringData/token"}); len(kept) != 1 || m.Object["stringData"] != nil || len(m.Object["data"].(map[string]any)) != 0 {
		t.Errorf("kept %v; the manifest is %v, want the token left out", kept, m.Object)
	}

	// keepGenerated moved a generated key into data already: the
	// stringData path finds it there, not absent.
	generated := object(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\ndata: {password: "+rotated+"}\n")
	if kept, absent, _ := keep3(t, generated, live, []string{"/stringData/password"}); len(kept) != 0 || len(absent) != 0 {
		t.Errorf("a key keepGenerated moved into data: kept %v, absent %v; want neither", kept, absent)
	}

	// Only a core Secret is so: another kind's stringData is its own.
	other := object(t, "apiVersion: example.com/v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: from-chart}\n")
	if _, absent, _ := keep3(t, other, live, []string{"/data/password"}); len(absent) != 0 {
		t.Errorf("absent %v", absent)
	}
	if _, ok, _ := unstructured.NestedString(other.Object, "stringData", "password"); !ok {
		t.Errorf("a custom Secret kind lost its stringData: %v", other.Object)
	}
}
