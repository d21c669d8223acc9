package guard

import (
	"context"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// hardened parses manifest, hardens it, and returns the YAML of its first
// object's pod spec.
func hardenedPodSpec(t *testing.T, manifest string) (string, error) {
	t.Helper()
	objs := parse(t, manifest)
	err := Harden(objs)
	ps, _, _ := unstructured.NestedFieldNoCopy(objs[0].Object, "spec", "template", "spec")
	out, yerr := yaml.Marshal(ps)
	if yerr != nil {
		t.Fatal(yerr)
	}
	return strings.TrimSpace(string(out)), err
}

func TestHardenDefaults(t *testing.T) {
	cases := []struct {
		name, manifest, want string
	}{
		{"nothing said", deployment("containers: [{name: app, image: nginx}]\ninitContainers: [{name: init, image: busybox}]\nephemeralContainers: [{name: dbg, image: busybox}]"), `
automountServiceAccountToken: false
containers:
- image: nginx
  name: app
  securityContext:
    allowPrivilegeEscalation: false
    capabilities:
      drop:
      - ALL
ephemeralContainers:
- image: busybox
  name: dbg
  securityContext:
    allowPrivilegeEscalation: false
    capabilities:
      drop:
      - ALL
initContainers:
- image: busybox
  name: init
  securityContext:
    allowPrivilegeEscalation: false
    capabilities:
      drop:
      - ALL
securityContext:
  runAsNonRoot: true
  seccompProfile:
    type: RuntimeDefault`},
		{"what the chart set is kept", job(`automountServiceAccountToken: false
securityContext: {runAsNonRoot: true, runAsUser: 1001, fsGroup: 1001, seccompProfile: {type: Localhost, localhostProfile: app.json}}
containers: [{name: app, image: nginx, securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [NET_RAW]}}}]`, true), `
automountServiceAccountToken: false
containers:
- image: nginx
  name: app
  securityContext:
    allowPrivilegeEscalation: false
    capabilities:
      drop:
      - NET_RAW
      - ALL
    readOnlyRootFilesystem: true
restartPolicy: Never
securityContext:
  fsGroup: 1001
  runAsNonRoot: true
  runAsUser: 1001
  seccompProfile:
    localhostProfile: app.json
    type: Localhost`},
		{"refused values are left for Check", deployment(`automountServiceAccountToken: true
securityContext: {runAsNonRoot: false, seccompProfile: {type: Unconfined}}
containers: [{name: app, image: nginx, securityContext: {privileged: true, allowPrivilegeEscalation: true, capabilities: {add: [SYS_ADMIN], drop: [all]}}}]`), `
automountServiceAccountToken: true
containers:
- image: nginx
  name: app
  securityContext:
    allowPrivilegeEscalation: true
    capabilities:
      add:
      - SYS_ADMIN
      drop:
      - all
      - ALL
    privileged: true
securityContext:
  runAsNonRoot: false
  seccompProfile:
    type: Unconfined`},
		{"a drop list with all in lower case gets ALL", deployment("containers: [{name: app, image: nginx, securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [all]}}}]"), `
automountServiceAccountToken: false
containers:
- image: nginx
  name: app
  securityContext:
    allowPrivilegeEscalation: false
    capabilities:
      drop:
      - all
      - ALL
securityContext:
  runAsNonRoot: true
  seccompProfile:
    type: RuntimeDefault`},
		{"a drop list with ALL is kept as it is", deployment("containers: [{name: app, image: nginx, securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}}]"), `
automountServiceAccountToken: false
containers:
- image: nginx
  name: app
  securityContext:
    allowPrivilegeEscalation: false
    capabilities:
      drop:
      - ALL
securityContext:
  runAsNonRoot: true
  seccompProfile:
    type: RuntimeDefault`},
		{"null fields count as unset", deployment("automountServiceAccountToken: null\nsecurityContext: null\ncontainers: [{name: app, image: nginx, securityContext: {capabilities: null, allowPrivilegeEscalation: null}}]"), `
automountServiceAccountToken: false
containers:
- image: nginx
  name: app
  securityContext:
    allowPrivilegeEscalation: false
    capabilities:
      drop:
      - ALL
securityContext:
  runAsNonRoot: true
  seccompProfile:
    type: RuntimeDefault`},
		{"the legacy seccomp annotation decides the pod's profile", deploymentWithAnnotations("seccomp.security.alpha.kubernetes.io/pod: localhost/app.json", "securityContext: {runAsNonRoot: true}\ncontainers: []"), `
automountServiceAccountToken: false
containers: []
securityContext:
  runAsNonRoot: true
  seccompProfile:
    localhostProfile: app.json
    type: Localhost`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := hardenedPodSpec(t, tc.manifest)
			if err != nil {
				t.Fatalf("Harden: %v", err)
			}
			if got != strings.TrimSpace(tc.want) {
				t.Errorf("hardened pod spec:\n%s\nwant:\n%s", got, strings.TrimSpace(tc.want))
			}
		})
	}
}

func TestHardenTouchesOnlyPodTemplates(t *testing.T) {
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {spec: x}\n---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s}\nspec: {template: {spec: {containers: [{name: a}]}}}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa}"
	objs := parse(t, manifest)
	before := parse(t, manifest)
	if err := Harden(objs); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(objs, before) {
		t.Errorf("Harden changed objects without an allowed pod template")
	}
}

func TestHardenMalformed(t *testing.T) {
	objs := parse(t, deployment("securityContext: 7\ncontainers: nginx\ninitContainers: [{name: i, securityContext: {capabilities: {drop: NET_RAW}}}, 5]")+
		"---\napiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {template: []}\n---\napiVersion: batch/v1\nkind: Job\nmetadata: {name: k}\n")
	err := Harden(objs)
	if err == nil {
		t.Fatal("Harden should report templates of unexpected shape")
	}
	for _, want := range []string{
		"spec.template.spec.securityContext is a number",
		"spec.template.spec.containers is a string",
		"spec.template.spec.initContainers[0].securityContext.capabilities.drop is a string",
		"spec.template.spec.initContainers[1] is a number",
		`Job "j"): spec.template is a list`,
		`Job "k"): spec is missing`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error should say %q:\n%v", want, err)
		}
	}
	// What had the right shape is hardened all the same.
	if v, _, _ := unstructured.NestedBool(objs[0].Object, "spec", "template", "spec", "automountServiceAccountToken"); v {
		t.Error("automountServiceAccountToken should be set to false")
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(objs[0].Object, "spec", "template", "spec", "automountServiceAccountToken"); !ok {
		t.Error("automountServiceAccountToken should be set")
	}
	// And Check refuses it.
	if vs := Check(context.Background(), objs, testContext()); len(vs) < 3 {
		t.Errorf("Check should refuse the malformed templates: %s", messages(vs))
	}
}

// TestHardenProperties hardens random pod templates and checks that Harden
// is idempotent, never changes or removes what the chart set (it only adds
// ALL to a drop list), always leaves the defaults in place, and never adds
// a violation.
func TestHardenProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	const runs = 3000
	for i := 0; i < runs; i++ {
		orig := randomWorkload(rng)
		once := orig.DeepCopy()
		if err := Harden([]*unstructured.Unstructured{once}); err != nil {
			t.Fatalf("run %d: Harden: %v", i, err)
		}
		twice := once.DeepCopy()
		if err := Harden([]*unstructured.Unstructured{twice}); err != nil {
			t.Fatalf("run %d: second Harden: %v", i, err)
		}
		if !reflect.DeepEqual(once.Object, twice.Object) {
			t.Fatalf("run %d: Harden is not idempotent:\nonce:  %v\ntwice: %v", i, once.Object, twice.Object)
		}
		if msg := weakened(orig.Object, once.Object, ""); msg != "" {
			t.Fatalf("run %d: Harden weakened %s\norig:     %v\nhardened: %v", i, msg, orig.Object, once.Object)
		}
		if msg := defaultsMissing(once.Object); msg != "" {
			t.Fatalf("run %d: after Harden %s\n%v", i, msg, once.Object)
		}
		before := map[string]bool{}
		for _, k := range ruleKeys(Check(context.Background(), []*unstructured.Unstructured{orig}, testContext())) {
			before[k] = true
		}
		for _, k := range ruleKeys(Check(context.Background(), []*unstructured.Unstructured{once}, testContext())) {
			if !before[k] {
				t.Fatalf("run %d: Harden added violation %s\n%v", i, k, once.Object)
			}
		}
	}
}

// weakened returns where hardened differs from a value orig set, or "".
func weakened(orig, hardened any, path string) string {
	switch o := orig.(type) {
	case map[string]any:
		h, ok := hardened.(map[string]any)
		if !ok {
			return path + " (no longer an object)"
		}
		for k, v := range o {
			if v == nil {
				continue
			}
			if msg := weakened(v, h[k], path+"."+k); msg != "" {
				return msg
			}
		}
		return ""
	case []any:
		h, ok := hardened.([]any)
		if !ok || len(h) < len(o) {
			return path + " (list shortened)"
		}
		if strings.HasSuffix(path, ".capabilities.drop") {
			if !reflect.DeepEqual(h[:len(o)], o) {
				return path + " (drop entries changed)"
			}
			return ""
		}
		if len(h) != len(o) {
			return path + " (list grew)"
		}
		for i := range o {
			if msg := weakened(o[i], h[i], path+"[]"); msg != "" {
				return msg
			}
		}
		return ""
	default:
		if !reflect.DeepEqual(orig, hardened) {
			return path + " (value changed)"
		}
		return ""
	}
}

// defaultsMissing returns which pod default is missing, or "".
func defaultsMissing(obj map[string]any) string {
	ps, _, _ := unstructured.NestedMap(obj, "spec", "template", "spec")
	for _, p := range [][]string{{"automountServiceAccountToken"}, {"securityContext", "runAsNonRoot"}, {"securityContext", "seccompProfile", "type"}} {
		if v, ok, _ := unstructured.NestedFieldNoCopy(ps, p...); !ok || v == nil {
			return strings.Join(p, ".") + " is unset"
		}
	}
	for _, list := range []string{"initContainers", "containers", "ephemeralContainers"} {
		cs, _, _ := unstructured.NestedSlice(ps, list)
		for _, c := range cs {
			cm := c.(map[string]any)
			if v, ok, _ := unstructured.NestedFieldNoCopy(cm, "securityContext", "allowPrivilegeEscalation"); !ok || v == nil {
				return list + " allowPrivilegeEscalation is unset"
			}
			drop, _, _ := unstructured.NestedStringSlice(cm, "securityContext", "capabilities", "drop")
			// NOTE: exactly ALL, as pod-security admission compares it.
			if !slices.Contains(drop, "ALL") {
				return list + " does not drop ALL"
			}
		}
	}
	return ""
}

// randomWorkload builds a Deployment or Job whose pod template sets a random
// choice of the fields Harden and the pod rules read.
func randomWorkload(rng *rand.Rand) *unstructured.Unstructured {
	pick := func(choices ...any) any { return choices[rng.Intn(len(choices))] }
	absent := struct{}{}
	set := func(m map[string]any, k string, v any) {
		if v != absent {
			m[k] = v
		}
	}
	container := func(name string) map[string]any {
		c := map[string]any{"name": name, "image": "nginx"}
		sc := pick(absent, nil, "map")
		if sc == "map" {
			m := map[string]any{}
			set(m, "allowPrivilegeEscalation", pick(absent, nil, true, false))
			set(m, "privileged", pick(absent, false, true))
			set(m, "runAsNonRoot", pick(absent, true, false))
			set(m, "runAsUser", pick(absent, int64(0), int64(1000)))
			set(m, "seccompProfile", pick(absent, map[string]any{"type": "RuntimeDefault"}, map[string]any{"type": "Unconfined"}))
			if caps := pick(absent, nil, "map"); caps == "map" {
				cm := map[string]any{}
				set(cm, "drop", pick(absent, nil, []any{}, []any{"NET_RAW"}, []any{"all"}, []any{"ALL", "NET_RAW"}))
				set(cm, "add", pick(absent, []any{"NET_ADMIN"}))
				m["capabilities"] = cm
			} else {
				set(m, "capabilities", caps)
			}
			sc = m
		}
		set(c, "securityContext", sc)
		return c
	}
	ps := map[string]any{}
	set(ps, "automountServiceAccountToken", pick(absent, nil, true, false))
	if psc := pick(absent, nil, "map"); psc == "map" {
		m := map[string]any{}
		set(m, "runAsNonRoot", pick(absent, nil, true, false))
		set(m, "runAsUser", pick(absent, int64(0), int64(1000)))
		set(m, "seccompProfile", pick(absent, nil, map[string]any{"type": "Unconfined"}, map[string]any{"type": "Localhost", "localhostProfile": "p.json"}, map[string]any{"type": "RuntimeDefault"}))
		ps["securityContext"] = m
	} else {
		set(ps, "securityContext", psc)
	}
	for _, l := range []struct {
		name string
		max  int
	}{{"initContainers", 2}, {"containers", 3}, {"ephemeralContainers", 1}} {
		list := l.name
		n := rng.Intn(l.max + 1)
		if n == 0 && rng.Intn(2) == 0 {
			continue
		}
		cs := []any{}
		for i := 0; i < n; i++ {
			cs = append(cs, container(list+string(rune('a'+i))))
		}
		ps[list] = cs
	}
	tmpl := map[string]any{"spec": ps}
	if ann := pick(absent, "runtime/default", "localhost/p.json", "unconfined"); ann != absent {
		tmpl["metadata"] = map[string]any{"annotations": map[string]any{seccompPodAnnotation: ann}}
	}
	obj := map[string]any{
		"metadata": map[string]any{"name": "w"},
		"spec":     map[string]any{"template": tmpl},
	}
	if rng.Intn(2) == 0 {
		obj["apiVersion"], obj["kind"] = "apps/v1", "Deployment"
	} else {
		obj["apiVersion"], obj["kind"] = "batch/v1", "Job"
	}
	return &unstructured.Unstructured{Object: obj}
}
