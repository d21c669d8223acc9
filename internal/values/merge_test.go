package values

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"sigs.k8s.io/yaml"
)

func TestComposePrecedence(t *testing.T) {
	defaults := `
replicas: 1
image: {repository: nginx, tag: "1.25", pullPolicy: IfNotPresent}
ports: [80, 443]
persistence: {enabled: true, size: 8Gi}
auth: {username: admin}
`
	tests := []struct {
		name       string
		generated  string
		spec       string
		from       []Layer
		want       string // the effective values, as YAML
		wantValues string // the user values passed to Helm, when checked
	}{
		{
			name: "defaults only",
			want: `{replicas: 1, image: {repository: nginx, tag: "1.25", pullPolicy: IfNotPresent}, ports: [80, 443], persistence: {enabled: true, size: 8Gi}, auth: {username: admin}, capstan: {namespace: platform}}`,
		},
		{
			name:      "each layer wins over the ones before it",
			generated: `{auth: {password: gen}, replicas: 2}`,
			spec:      `{replicas: 3, image: {tag: "1.26"}}`,
			from: []Layer{
				docLayer("Secret", "a", `{replicas: 4, auth: {password: fromSecret}}`),
				docLayer("ConfigMap", "b", `{replicas: 5}`),
			},
			want: `{replicas: 5, image: {repository: nginx, tag: "1.26", pullPolicy: IfNotPresent}, ports: [80, 443], persistence: {enabled: true, size: 8Gi}, auth: {username: admin, password: fromSecret}, capstan: {namespace: platform}}`,
		},
		{
			name: "lists replace, they do not merge",
			spec: `{ports: [8080]}`,
			from: []Layer{docLayer("ConfigMap", "b", `{ports: [9090, 9091]}`)},
			want: `{replicas: 1, image: {repository: nginx, tag: "1.25", pullPolicy: IfNotPresent}, ports: [9090, 9091], persistence: {enabled: true, size: 8Gi}, auth: {username: admin}, capstan: {namespace: platform}}`,
		},
		{
			name: "null deletes a chart default",
			spec: `{persistence: {size: null}, auth: null}`,
			want: `{replicas: 1, image: {repository: nginx, tag: "1.25", pullPolicy: IfNotPresent}, ports: [80, 443], persistence: {enabled: true}, capstan: {namespace: platform}}`,
		},
		{
			name:       "null in a later layer deletes a value an earlier layer set",
			spec:       `{extra: {a: 1, b: 2}}`,
			from:       []Layer{docLayer("Secret", "a", `{extra: {a: null}}`)},
			want:       `{replicas: 1, image: {repository: nginx, tag: "1.25", pullPolicy: IfNotPresent}, ports: [80, 443], persistence: {enabled: true, size: 8Gi}, auth: {username: admin}, extra: {b: 2}, capstan: {namespace: platform}}`,
			wantValues: `{extra: {b: 2}, capstan: {namespace: platform}}`,
		},
		{
			name:       "null deleting a default stays in the values Helm gets",
			spec:       `{image: {pullPolicy: null}}`,
			want:       `{replicas: 1, image: {repository: nginx, tag: "1.25"}, ports: [80, 443], persistence: {enabled: true, size: 8Gi}, auth: {username: admin}, capstan: {namespace: platform}}`,
			wantValues: `{image: {pullPolicy: null}, capstan: {namespace: platform}}`,
		},
		{
			name: "a map replaces a scalar and a scalar replaces a map",
			spec: `{extra: "s", other: {k: v}}`,
			from: []Layer{docLayer("ConfigMap", "b", `{extra: {k: v}, other: "s"}`)},
			want: `{replicas: 1, image: {repository: nginx, tag: "1.25", pullPolicy: IfNotPresent}, ports: [80, 443], persistence: {enabled: true, size: 8Gi}, auth: {username: admin}, extra: {k: v}, other: s, capstan: {namespace: platform}}`,
		},
		{
			name: "targetPath keeps strings that look like other types",
			from: []Layer{
				pathLayer("Secret", "a", "auth.pin", "0123"),
				pathLayer("Secret", "a", "flags.enabled", "true"),
				pathLayer("Secret", "a", "flags.list", "[a]"),
				pathLayer("Secret", "a", "flags.nothing", "null"),
				pathLayer("Secret", "a", "flags.number", "1e3"),
			},
			want: `{replicas: 1, image: {repository: nginx, tag: "1.25", pullPolicy: IfNotPresent}, ports: [80, 443], persistence: {enabled: true, size: 8Gi}, auth: {username: admin, pin: "0123"}, flags: {enabled: "true", list: "[a]", nothing: "null", number: "1e3"}, capstan: {namespace: platform}}`,
		},
		{
			name: "targetPath into a list replaces the chart's list",
			from: []Layer{pathLayer("Secret", "a", "ports[1]", "8443")},
			want: `{replicas: 1, image: {repository: nginx, tag: "1.25", pullPolicy: IfNotPresent}, ports: [null, "8443"], persistence: {enabled: true, size: 8Gi}, auth: {username: admin}, capstan: {namespace: platform}}`,
		},
		{
			name: "targetPath wins over an earlier document and keeps its siblings",
			spec: `{auth: {password: old, email: a@b.c}}`,
			from: []Layer{pathLayer("Secret", "a", "auth.password", "new")},
			want: `{replicas: 1, image: {repository: nginx, tag: "1.25", pullPolicy: IfNotPresent}, ports: [80, 443], persistence: {enabled: true, size: 8Gi}, auth: {username: admin, password: new, email: a@b.c}, capstan: {namespace: platform}}`,
		},
		{
			name: "targetPath into a list of spec.values keeps the element's other keys and its siblings",
			spec: `{servers: [{host: a, port: 1}, {host: b, port: 2}]}`,
			from: []Layer{pathLayer("Secret", "a", "servers[1].token", "sekret")},
			want: `{replicas: 1, image: {repository: nginx, tag: "1.25", pullPolicy: IfNotPresent}, ports: [80, 443], persistence: {enabled: true, size: 8Gi}, auth: {username: admin}, servers: [{host: a, port: 1}, {host: b, port: 2, token: sekret}], capstan: {namespace: platform}}`,
		},
		{
			name: "targetPath into a list a ConfigMap document wrote",
			from: []Layer{
				docLayer("ConfigMap", "b", `{servers: [{host: a}, {host: b}]}`),
				pathLayer("Secret", "a", "servers[0].token", "sekret"),
			},
			want: `{replicas: 1, image: {repository: nginx, tag: "1.25", pullPolicy: IfNotPresent}, ports: [80, 443], persistence: {enabled: true, size: 8Gi}, auth: {username: admin}, servers: [{host: a, token: sekret}, {host: b}], capstan: {namespace: platform}}`,
		},
		{
			name: "targetPaths into one list keep each other's elements",
			from: []Layer{
				pathLayer("Secret", "a", "hosts[0]", "one"),
				pathLayer("Secret", "a", "hosts[1]", "two"),
			},
			want: `{replicas: 1, image: {repository: nginx, tag: "1.25", pullPolicy: IfNotPresent}, ports: [80, 443], persistence: {enabled: true, size: 8Gi}, auth: {username: admin}, hosts: [one, two], capstan: {namespace: platform}}`,
		},
		{
			name: "targetPath past the end of an earlier list grows it with nulls",
			spec: `{hosts: [one]}`,
			from: []Layer{pathLayer("Secret", "a", "hosts[2]", "three")},
			want: `{replicas: 1, image: {repository: nginx, tag: "1.25", pullPolicy: IfNotPresent}, ports: [80, 443], persistence: {enabled: true, size: 8Gi}, auth: {username: admin}, hosts: [one, null, three], capstan: {namespace: platform}}`,
		},
		{
			name: "a later document replaces a list a targetPath set into",
			spec: `{hosts: [one, two]}`,
			from: []Layer{
				pathLayer("Secret", "a", "hosts[1]", "secret"),
				docLayer("ConfigMap", "b", `{hosts: [three]}`),
			},
			want: `{replicas: 1, image: {repository: nginx, tag: "1.25", pullPolicy: IfNotPresent}, ports: [80, 443], persistence: {enabled: true, size: 8Gi}, auth: {username: admin}, hosts: [three], capstan: {namespace: platform}}`,
		},
		{
			name: "targetPath replaces a scalar an earlier layer put in its way",
			spec: `{servers: off}`,
			from: []Layer{pathLayer("Secret", "a", "servers[0].token", "sekret")},
			want: `{replicas: 1, image: {repository: nginx, tag: "1.25", pullPolicy: IfNotPresent}, ports: [80, 443], persistence: {enabled: true, size: 8Gi}, auth: {username: admin}, servers: [{token: sekret}], capstan: {namespace: platform}}`,
		},
		{
			name: "an optional missing entry adds nothing",
			spec: `{replicas: 2}`,
			from: []Layer{{Ref: docLayer("Secret", "gone", "").Ref, Missing: true}},
			want: `{replicas: 2, image: {repository: nginx, tag: "1.25", pullPolicy: IfNotPresent}, ports: [80, 443], persistence: {enabled: true, size: 8Gi}, auth: {username: admin}, capstan: {namespace: platform}}`,
		},
		{
			name: "the platform key is set last",
			spec: `{capstan: {namespace: mine, hostname: evil.example}}`,
			from: []Layer{docLayer("Secret", "a", `{capstan: {issuer: x}}`)},
			want: `{replicas: 1, image: {repository: nginx, tag: "1.25", pullPolicy: IfNotPresent}, ports: [80, 443], persistence: {enabled: true, size: 8Gi}, auth: {username: admin}, capstan: {namespace: platform}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Inputs{
				Chart:     testChart(t, "demo", defaults, ""),
				Generated: ymap(t, tt.generated),
				Sources:   Sources{Spec: ymap(t, tt.spec), From: indexed(tt.from...)},
				Platform:  Platform{Namespace: "platform"}.Values(),
			}
			res, err := Compose(in)
			if err != nil {
				t.Fatalf("Compose: %v", err)
			}
			assertYAML(t, "effective values", res.Effective, tt.want)
			if tt.wantValues != "" {
				assertYAML(t, "values for Helm", res.Values, tt.wantValues)
			}
			if len(res.Errors) > 0 {
				t.Fatalf("unexpected values errors: %v", res.Errors)
			}
		})
	}
}

func assertYAML(t *testing.T, what string, got map[string]any, want string) {
	t.Helper()
	w := ymap(t, want)
	// Round-trip got through YAML so number types compare equal.
	b, err := yaml.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	g := ymap(t, string(b))
	if !reflect.DeepEqual(g, w) {
		wb, _ := yaml.Marshal(w)
		t.Fatalf("%s:\ngot:\n%s\nwant:\n%s", what, b, wb)
	}
}

func TestComposeNotices(t *testing.T) {
	res, err := Compose(Inputs{
		Sources: Sources{
			Spec: map[string]any{"capstan": map[string]any{"hostname": "mine"}},
			From: indexed(
				docLayer("Secret", "app-values-1", `{capstan: {issuer: x}}`),
				Layer{Ref: docLayer("ConfigMap", "app-values-opt", "").Ref, Missing: true},
			),
		},
		Platform: Platform{Namespace: "platform", Hostname: "apps.example.com"}.Values(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var platform, optional bool
	for _, n := range res.Notices {
		if n.Path == "/capstan" && strings.Contains(n.Message, "spec.values") && strings.Contains(n.Message, "spec.valuesFrom[0]") && strings.Contains(n.Message, "overwritten") {
			platform = true
		}
		if strings.Contains(n.Message, "app-values-opt") && strings.Contains(n.Message, "missing") {
			optional = true
		}
		if strings.Contains(n.Message, "mine") {
			t.Errorf("a notice shows a value: %q", n.Message)
		}
	}
	if !platform || !optional {
		t.Fatalf("notices = %+v; want one for the overwritten platform key naming both sources and one for the missing optional entry", res.Notices)
	}
	if got := res.Effective["capstan"].(map[string]any)["hostname"]; got != "apps.example.com" {
		t.Fatalf("capstan.hostname = %v, want the platform's", got)
	}
}

func TestComposeDoesNotChangeItsInputs(t *testing.T) {
	spec := map[string]any{"a": map[string]any{"b": []any{"x"}}}
	layerDoc := map[string]any{"a": map[string]any{"c": "y"}, "l": []any{map[string]any{"k": "v"}}}
	gen := map[string]any{"g": "z"}
	in := Inputs{
		Generated: gen,
		Sources: Sources{Spec: spec, From: indexed(
			Layer{Ref: docLayer("Secret", "s", "").Ref, Doc: layerDoc},
			pathLayer("Secret", "s", "a.b[0]", "changed"),
			pathLayer("Secret", "s", "a.c", "changed"),
			pathLayer("Secret", "s", "l[0].k", "changed"),
		)},
	}
	if _, err := Compose(in); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(spec, map[string]any{"a": map[string]any{"b": []any{"x"}}}) ||
		!reflect.DeepEqual(layerDoc, map[string]any{"a": map[string]any{"c": "y"}, "l": []any{map[string]any{"k": "v"}}}) ||
		!reflect.DeepEqual(gen, map[string]any{"g": "z"}) {
		t.Fatalf("Compose changed its inputs: spec=%v layer=%v generated=%v", spec, layerDoc, gen)
	}
}

func TestComposeSubchartDefaultsAndNull(t *testing.T) {
	sub := testChart(t, "postgresql", `{auth: {database: app, username: app}, primary: {persistence: {size: 8Gi}}}`, "")
	parent := testChart(t, "app", `{postgresql: {auth: {username: parent}}}`, "", sub)
	res, err := Compose(Inputs{
		Chart:   parent,
		Sources: Sources{Spec: ymap(t, `{postgresql: {primary: {persistence: {size: null}}}}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	assertYAML(t, "effective", res.Effective, `{postgresql: {auth: {database: app, username: parent}, primary: {persistence: {}}, global: {}}}`)
}

// TestComposePlatformKeyAndStrictSchemas checks the platform key's rule: a
// chart whose schema does not allow the key renders without it, as helm
// install would render it, and says so; a chart that declares it gets it;
// users never set it.
func TestComposePlatformKeyAndStrictSchemas(t *testing.T) {
	// Like cert-manager's schema: nothing but its own properties at the root.
	strict := `{"type":"object","additionalProperties":false,"properties":{"crds":{"type":"object","properties":{"enabled":{"type":"boolean"}}},"replicaCount":{"type":"integer"}}}`
	declares := `{"type":"object","additionalProperties":false,"properties":{"crds":{"type":"object"},"replicaCount":{"type":"integer"},"capstan":{"type":"object"}}}`
	platform := map[string]any{"namespace": "platform", "hostname": "apps.example.com"}
	compose := func(t *testing.T, schemaDoc, spec string) *Result {
		t.Helper()
		ch := testChart(t, "strict", `{crds: {enabled: false}, replicaCount: 1}`, schemaDoc)
		res, err := Compose(Inputs{Chart: ch, Sources: Sources{Spec: ymap(t, spec)}, Platform: platform})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	notices := func(r *Result) string {
		var b strings.Builder
		for _, n := range r.Notices {
			b.WriteString(n.Path + ": " + n.Message + "\n")
		}
		return b.String()
	}

	res := compose(t, strict, `{crds: {enabled: true}}`)
	if len(res.Errors) > 0 || !res.PlatformWithheld {
		t.Fatalf("a strict schema: errors %v, withheld %v; want no error and the facts withheld", res.Errors, res.PlatformWithheld)
	}
	if _, ok := res.Values["capstan"]; ok {
		t.Errorf("the values Helm gets still hold the platform key: %v", res.Values)
	}
	assertYAML(t, "effective", res.Effective, `{crds: {enabled: true}, replicaCount: 1}`)
	if n := notices(res); !strings.Contains(n, "/capstan: the chart's values.schema.json does not allow the key \"capstan\"") {
		t.Errorf("notices = %q; want one that says the facts were withheld", n)
	}

	// A user value under the key is dropped, not an error, and still noted.
	res = compose(t, strict, `{capstan: {hostname: evil.example.com}}`)
	if len(res.Errors) > 0 || res.PlatformWithheld != true {
		t.Errorf("a user's platform key with a strict schema: errors %v, withheld %v", res.Errors, res.PlatformWithheld)
	}
	if n := notices(res); !strings.Contains(n, "the key the platform reserves") {
		t.Errorf("notices = %q; want the user's values under the key noted as overwritten", n)
	}

	// A real error of the user's stays, and only it.
	res = compose(t, strict, `{replicaCount: many}`)
	if len(res.Errors) != 1 || res.Errors[0].Path != "/replicaCount" || !res.PlatformWithheld {
		t.Errorf("a wrong value under a strict schema: errors %v, withheld %v; want the one error", res.Errors, res.PlatformWithheld)
	}

	// A chart that declares the key gets the facts.
	res = compose(t, declares, `{capstan: {hostname: evil.example.com}}`)
	if len(res.Errors) > 0 || res.PlatformWithheld {
		t.Fatalf("a schema that declares the key: errors %v, withheld %v", res.Errors, res.PlatformWithheld)
	}
	assertYAML(t, "values", res.Values, `{capstan: {namespace: platform, hostname: apps.example.com}}`)

	// No schema: nothing to refuse the key.
	ch := testChart(t, "plain", `{replicaCount: 1}`, "")
	plain, err := Compose(Inputs{Chart: ch, Platform: platform})
	if err != nil || plain.PlatformWithheld || plain.Values["capstan"] == nil {
		t.Errorf("a chart without a schema: %v, withheld %v, values %v", err, plain.PlatformWithheld, plain.Values)
	}
}

// A subchart's key given a scalar is an error Helm words with the value
// itself; the error names the key instead, and never holds a Secret's value.
func TestSubchartKeyNotAMapHidesTheValue(t *testing.T) {
	sub := testChart(t, "postgresql", "auth:\n  password: ''\n", "")
	ch := testChart(t, "app", "x: 1\n", "", sub)
	ch.Metadata.Dependencies = []*chartv2.Dependency{{Name: "postgresql", Version: "1.0.0"}}
	for _, tc := range []struct {
		name string
		src  Sources
		want string
	}{
		{"targetPath", Sources{From: indexed(pathLayer("Secret", "app-values-a", "postgresql", "Sup3rS3cretPw"))},
			"postgresql holds the values of subchart postgresql and must be a map"},
		{"document", Sources{From: indexed(docLayer("Secret", "app-values-a", "postgresql: Sup3rS3cretPw\n"))},
			"postgresql holds the values of subchart postgresql and must be a map"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := SchemaFor(ch, tc.src)
			if err == nil || strings.Contains(err.Error(), "Sup3rS3cretPw") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("SchemaFor: got error %q, want one saying %q and not quoting the value", err, tc.want)
			}
			_, err = Compose(Inputs{Chart: ch, Sources: tc.src})
			if err == nil || strings.Contains(err.Error(), "Sup3rS3cretPw") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Compose: got error %q, want one saying %q and not quoting the value", err, tc.want)
			}
		})
	}
}

// A null under global deletes a global default that only a subchart sets,
// as Helm deletes it: globals flow down into subcharts, so the null must
// reach Helm although the parent has no such default.
func TestComposeNullDeletesASubchartsGlobal(t *testing.T) {
	inner := testChart(t, "inner", "global:\n  storageClass: fast\n", "")
	sub := testChart(t, "sub", "global:\n  registry: docker.io\n  security: {allowInsecureImages: false}\nx: 1\n", "", inner)
	ch := testChart(t, "app", "global:\n  team: a\n", "", sub)
	ch.Metadata.Dependencies = []*chartv2.Dependency{{Name: "sub", Version: "1.0.0"}}
	for _, spec := range []string{
		"global:\n  registry: null\n",
		"global:\n  security: {allowInsecureImages: null}\n",
		"global:\n  storageClass: null\n  registry: null\n",
		"global:\n  team: null\n",
	} {
		res, err := Compose(Inputs{Chart: ch, Sources: Sources{Spec: ymap(t, spec)}})
		if err != nil {
			t.Fatal(err)
		}
		_, helm, err := resolve(ch, ymap(t, spec))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(res.Effective["sub"], helm["sub"]) {
			t.Errorf("values %q: Compose gives sub = %v, Helm %v", spec, res.Effective["sub"], helm["sub"])
		}
	}
	// A null that deletes nothing, at any level, is dropped as before.
	res, err := Compose(Inputs{Chart: ch, Sources: Sources{Spec: ymap(t, "global:\n  nowhere: null\n")}})
	if err != nil {
		t.Fatal(err)
	}
	if g := res.Values["global"].(map[string]any); len(g) != 0 {
		t.Errorf("a null under global that deletes nothing reaches Helm: %v", g)
	}
}

// The key a "must be a map" error names is the one Helm failed on: the
// values of a nested subchart (app → sub → redis) at sub.redis, not a
// valid setting elsewhere that happens to be named like the subchart
// (cache.redis, a URL). Helm resolves a subchart's subcharts against the
// top-level values, so a top-level key of that name is read too. An alias
// names the key as Helm resolves it.
func TestSubchartKeyNotAMapNamesHelmsKey(t *testing.T) {
	for _, tc := range []struct {
		name, alias, spec, want string
	}{
		{"nested", "", "cache:\n  redis: redis://cache:6379\nsub:\n  redis: oops\n", "sub.redis holds the values of subchart redis"},
		{"at the top level too", "", "cache:\n  redis: redis://cache:6379\nredis: oops\n", "redis holds the values of subchart redis"},
		{"aliased", "cache", "redis:\n  cache: redis://cache:6379\nsub:\n  cache: oops\n", "sub.cache holds the values of subchart cache"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			redis := testChart(t, "redis", "port: 6379\n", "")
			sub := testChart(t, "sub", "x: 1\n", "", redis)
			sub.Metadata.Dependencies = []*chartv2.Dependency{{Name: "redis", Version: "1.0.0", Alias: tc.alias}}
			ch := testChart(t, "app", "cache: {}\nredis: {}\n", "", sub)
			ch.Metadata.Dependencies = []*chartv2.Dependency{{Name: "sub", Version: "1.0.0"}}
			_, err := Compose(Inputs{Chart: ch, Sources: Sources{Spec: ymap(t, tc.spec)}})
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "oops") {
				t.Errorf("Compose: got error %q, want one saying %q and not quoting the value", err, tc.want)
			}
		})
	}
}

// TestSecretInputsTakeTheirSchemasType: Capstan's writers give every secret
// input as a Secret's targetPath, whose text is a string; a writeOnly PIN,
// port or flag is read as the number or boolean its schema asks for, and
// every other targetPath entry stays a string.
func TestSecretInputsTakeTheirSchemasType(t *testing.T) {
	schema := `{"type": "object", "properties": {
  "pin":     {"type": "integer", "writeOnly": true},
  "ratio":   {"type": ["number", "null"], "writeOnly": true},
  "enabled": {"type": "boolean", "writeOnly": true},
  "token":   {"type": "string", "writeOnly": true},
  "either":  {"type": ["string", "integer"], "writeOnly": true},
  "port":    {"type": "integer"},
  "code":    {"type": "integer", "writeOnly": true},
  "long":    {"type": "integer", "writeOnly": true},
  "half":    {"type": "integer", "writeOnly": true}
}}`
	ch := testChart(t, "demo", "", schema)
	res, err := Compose(Inputs{Chart: ch, Sources: Sources{From: indexed(
		pathLayer("Secret", "demo-values-a", "pin", "1234"),
		pathLayer("Secret", "demo-values-a", "ratio", "0.5"),
		pathLayer("Secret", "demo-values-a", "enabled", "false"),
		pathLayer("Secret", "demo-values-a", "token", "1234"),
		pathLayer("Secret", "demo-values-a", "either", "1234"),
	)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) > 0 {
		t.Fatalf("values errors %v; want the inputs typed by their schema", res.Errors)
	}
	want := map[string]any{"pin": float64(1234), "ratio": 0.5, "enabled": false, "token": "1234", "either": "1234"}
	if !reflect.DeepEqual(res.Effective, want) || !reflect.DeepEqual(res.Values, want) {
		t.Fatalf("effective values %#v, values for Helm %#v; want %#v", res.Effective, res.Values, want)
	}
	if got := res.SecretValues(); !slices.Contains(got, "1234") || len(res.SecretPaths) != 5 {
		t.Fatalf("secret paths %v; want all five inputs hidden, the PIN's digits among the values", res.SecretPaths)
	}

	// A text that is no such value, or loses digits, or a value that is
	// no secret input, stays a string, and the error says why.
	res, err = Compose(Inputs{Chart: ch, Sources: Sources{From: indexed(
		pathLayer("Secret", "demo-values-a", "code", "0123"),
		pathLayer("Secret", "demo-values-a", "long", "12345678901234567890"),
		pathLayer("Secret", "demo-values-a", "half", "0.5"),
		pathLayer("Secret", "demo-values-a", "port", "8443"),
		pathLayer("Secret", "demo-values-a", "enabled", "yes"),
	)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"code", "long", "half", "port", "enabled"} {
		if _, ok := res.Effective[k].(string); !ok {
			t.Errorf("%s = %#v; want the string kept", k, res.Effective[k])
		}
	}
	var paths []string
	for _, e := range res.Errors {
		paths = append(paths, e.Path)
		if e.Rule != "type" || !strings.Contains(e.Message, "not string") {
			t.Errorf("error %+v; want a type error about the string", e)
		}
		if hint := strings.Contains(e.Message, "read as a boolean or a number only when"); hint == (e.Path == "/port") {
			t.Errorf("error %+v: the hint belongs to secret inputs only", e)
		}
		for _, v := range []string{"0123", "1234567890", "0.5", "8443", "yes"} {
			if strings.Contains(e.Message, v) {
				t.Errorf("error %+v shows the value", e)
			}
		}
	}
	if !slices.Equal(paths, []string{"/code", "/enabled", "/half", "/long", "/port"}) {
		t.Fatalf("errors at %v; want one at each input left a string", paths)
	}

	// A ConfigMap's targetPath is no secret input: it stays a string, and
	// is refused as a secret input outside a Secret.
	res, err = Compose(Inputs{Chart: ch, Sources: Sources{From: indexed(pathLayer("ConfigMap", "demo-values-b", "pin", "1234"))}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Effective["pin"] != "1234" {
		t.Fatalf("pin from a ConfigMap = %#v; want the string", res.Effective["pin"])
	}
}

// TestValuesWithoutTypeErrorsAreNotSearchedForInputsToType: nearly every
// compose has no type error, and then the schema's writeOnly properties are
// not looked for over the whole effective values, chart defaults included,
// to note inputs left untyped.
func TestValuesWithoutTypeErrorsAreNotSearchedForInputsToType(t *testing.T) {
	schema := `{"type": "object", "properties": {"pin": {"type": "integer", "writeOnly": true}, "keys": {"type": "object", "writeOnly": true}}}`
	ch := testChart(t, "demo", "keys: {a: one, b: two, c: three}\n", schema)
	in := Inputs{Chart: ch, Sources: Sources{From: indexed(pathLayer("Secret", "demo-values-a", "pin", "1234"))}}
	res, err := Compose(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) > 0 || res.Schema == nil {
		t.Fatalf("values errors %v, schema %v; want none and the chart's schema", res.Errors, res.Schema)
	}
	if n := testing.AllocsPerRun(10, func() { noteUntypedInputs(in.Sources, res) }); n != 0 {
		t.Fatalf("noting untyped inputs with no type error made %v allocations; want none, no walk of the values", n)
	}
}

func TestTypedText(t *testing.T) {
	for _, tt := range []struct {
		text string
		want any
	}{
		{"true", true}, {"false", false}, {"0", 0.0}, {"-7", -7.0}, {"8443", 8443.0}, {"0.1", 0.1}, {"1.50", 1.5},
		{"2.5e3", 2500.0}, {"9007199254740992", 9007199254740992.0},
		{"0123", nil}, {"12345678901234567890", nil}, {"1e400", nil}, {"1e-99999", nil}, {"+1", nil}, {".5", nil},
		{"0x10", nil}, {"1_000", nil}, {"Infinity", nil}, {"NaN", nil}, {"yes", nil}, {"True", nil}, {"null", nil}, {"", nil}, {" 1", nil},
	} {
		got, ok := typedText(tt.text)
		if ok != (tt.want != nil) || got != tt.want {
			t.Errorf("typedText(%q) = %#v, %v; want %#v", tt.text, got, ok, tt.want)
		}
	}
}

// TestComposeNoticesValuesFromOverSpecValues: a valuesFrom entry that sets
// a value spec.values sets wins, the reverse of Flux's HelmRelease, and the
// plan says so; entries that only add beside spec.values say nothing.
func TestComposeNoticesValuesFromOverSpecValues(t *testing.T) {
	res, err := Compose(Inputs{
		Sources: Sources{
			Spec: ymap(t, `{replicas: 3, image: {tag: "1.26", pullPolicy: Always}, auth: {username: admin}, extra: {a: 1}, capstan: {hostname: mine}}`),
			From: indexed(
				docLayer("ConfigMap", "shared", `{replicas: 1, image: {repository: nginx}, extra: "flat", capstan: {hostname: other}}`),
				pathLayer("Secret", "app-values-a", "auth.password", "s3cr3t-pw"),
				pathLayer("Secret", "app-values-a", "image.tag", "1.27-private"),
				docLayer("Secret", "app-values-b", `{auth: {username: null}}`),
			),
		},
		Platform: Platform{Namespace: "platform"}.Values(),
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, n := range res.Notices {
		if strings.Contains(n.Message, "Flux") {
			got[n.Path] = n.Message
		}
		for _, v := range []string{"s3cr3t-pw", "1.27-private", "1.26", "flat", "other", "mine"} {
			if strings.Contains(n.Message, v) {
				t.Errorf("notice %q shows a value", n.Message)
			}
		}
	}
	want := map[string][]string{
		"/extra":         {"spec.valuesFrom[0] (ConfigMap shared", "sets extra, replicas, which spec.values sets too"},
		"/image/tag":     {"spec.valuesFrom[2] (Secret app-values-a", "sets image.tag,"},
		"/auth/username": {"spec.valuesFrom[3] (Secret app-values-b", "sets auth.username,"},
	}
	if len(got) != len(want) {
		t.Fatalf("override notices %v; want one at each of %v", got, want)
	}
	for path, parts := range want {
		for _, part := range parts {
			if !strings.Contains(got[path], part) {
				t.Errorf("notice at %s = %q; want it to hold %q", path, got[path], part)
			}
		}
		if !strings.Contains(got[path], "reverse of Flux's HelmRelease") {
			t.Errorf("notice at %s = %q; want it to name the order Flux uses", path, got[path])
		}
	}
	if res.Effective["replicas"] != float64(1) {
		t.Fatalf("replicas = %v; want the valuesFrom entry's, which wins", res.Effective["replicas"])
	}
}
