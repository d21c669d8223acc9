package values

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"capstan.dev/capstan/internal/render"
)

// The charts of these tests. deps has the subchart sub under the alias db
// (port: 5432; schema: port an integer, password writeOnly, apiKey
// generated) and the subchart other, which values.yaml disables by its
// condition (schema: token required). umbrella is the rendering tests'
// chart, whose cache subchart exports exported.size to fromCache.
const (
	depsChart     = "testdata/charts/deps"
	umbrellaChart = "../render/testdata/charts/umbrella"
)

func loadTestChart(t *testing.T, dir string) *chartv2.Chart {
	t.Helper()
	ch, err := loader.LoadDir(dir)
	if err != nil {
		t.Fatalf("load %s: %v", dir, err)
	}
	return ch
}

// TestComposeResolvesDependencies checks that values are merged and checked
// against the chart as Helm resolves it for them: a subchart a condition
// disables is not checked, an aliased one is checked, defaulted and kept
// secret under its alias, and import-values are defaults a null deletes.
func TestComposeResolvesDependencies(t *testing.T) {
	tests := []struct {
		name       string
		chart      string
		generated  string
		spec       string
		from       []Layer
		errors     []string // path and rule of each values error
		effective  map[string]string
		absent     []string // JSON paths that must not be in the effective values
		keptNull   []string // JSON paths whose null must reach Helm, to delete a default
		secretPath []string // SecretPaths, when checked
	}{
		{
			name:      "a disabled subchart's schema is not checked",
			chart:     depsChart,
			effective: map[string]string{"/db/port": "5432", "/other/enabled": "false"},
		},
		{
			name:   "a subchart a value enables is checked",
			chart:  depsChart,
			spec:   `{other: {enabled: true}}`,
			errors: []string{"/other/token required"},
		},
		{
			name:   "an aliased subchart is checked under its alias",
			chart:  depsChart,
			spec:   `{db: {port: bad}}`,
			errors: []string{"/db/port type"},
		},
		{
			name:   "a writeOnly property under an alias is refused in spec.values",
			chart:  depsChart,
			spec:   `{db: {password: hunter22}}`,
			errors: []string{"/db/password writeOnly"},
		},
		{
			name:       "a writeOnly property under an alias is hidden",
			chart:      depsChart,
			generated:  `{db: {apiKey: GENERATEDkey0001}}`,
			from:       []Layer{pathLayer("Secret", "s", "db.password", "hunter22")},
			effective:  map[string]string{"/db/password": "hunter22", "/db/apiKey": "GENERATEDkey0001"},
			secretPath: []string{"/db/apiKey", "/db/password"},
		},
		{
			name:      "a null deletes an aliased subchart's default",
			chart:     depsChart,
			spec:      `{db: {port: null}}`,
			absent:    []string{"/db/port"},
			keptNull:  []string{"/db/port"},
			effective: map[string]string{"/other/enabled": "false"},
		},
		{
			name:      "a null deletes an imported default",
			chart:     umbrellaChart,
			spec:      `{fromCache: {size: null}}`,
			absent:    []string{"/fromCache/size"},
			keptNull:  []string{"/fromCache/size"},
			effective: map[string]string{"/cache/exported/size": "256Mi"},
		},
		{
			name:      "an imported default shows",
			chart:     umbrellaChart,
			effective: map[string]string{"/fromCache/size": "256Mi"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Compose(Inputs{
				Chart:     loadTestChart(t, tt.chart),
				Generated: ymap(t, tt.generated),
				Sources:   Sources{Spec: ymap(t, tt.spec), From: indexed(tt.from...)},
			})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range res.Errors {
				got = append(got, e.Path+" "+e.Rule)
				if strings.Contains(e.Message, "hunter22") || strings.Contains(e.Message, "bad") {
					t.Errorf("message %q shows a value", e.Message)
				}
			}
			if !reflect.DeepEqual(got, tt.errors) {
				t.Errorf("values errors = %v, want %v", got, tt.errors)
			}
			for p, want := range tt.effective {
				v, ok := lookup(res.Effective, splitPointer(p))
				if b, _ := yaml.Marshal(v); !ok || strings.TrimSpace(string(b)) != want {
					t.Errorf("effective %s = %v (present %v), want %s", p, v, ok, want)
				}
			}
			for _, p := range tt.absent {
				if v, ok := lookup(res.Effective, splitPointer(p)); ok {
					t.Errorf("effective %s = %v, want it deleted", p, v)
				}
			}
			for _, p := range tt.keptNull {
				if v, ok := lookup(res.Values, splitPointer(p)); !ok || v != nil {
					t.Errorf("values for Helm: %s = %v (present %v), want the null that deletes the default", p, v, ok)
				}
			}
			if tt.secretPath != nil && !reflect.DeepEqual(res.SecretPaths, tt.secretPath) {
				t.Errorf("SecretPaths = %v, want %v", res.SecretPaths, tt.secretPath)
			}
		})
	}
}

// TestSchemaForResolvesDependencies checks the schema EnsureGenerated draws
// from: a generated property of an aliased subchart goes under the alias,
// and a disabled subchart's schema is left out.
func TestSchemaForResolvesDependencies(t *testing.T) {
	ch := loadTestChart(t, depsChart)
	s, err := SchemaFor(ch, Sources{})
	if err != nil {
		t.Fatal(err)
	}
	var gen []string
	for _, g := range s.Generated() {
		gen = append(gen, pointer(g.Path))
	}
	if want := []string{"/db/apiKey"}; !reflect.DeepEqual(gen, want) {
		t.Errorf("generated = %v, want %v", gen, want)
	}
	if errs := s.Validate(ymap(t, `{other: {enabled: false}, db: {port: 1}}`)); len(errs) > 0 {
		t.Errorf("the schema checks a disabled subchart: %v", errs)
	}
	enabled, err := SchemaFor(ch, Sources{From: indexed(docLayer("ConfigMap", "c", `{other: {enabled: true}}`))})
	if err != nil {
		t.Fatal(err)
	}
	if errs := enabled.Validate(ymap(t, `{other: {enabled: true}}`)); len(errs) != 1 || errs[0].Path != "/other/token" {
		t.Errorf("a subchart enabled by a valuesFrom document: errors %v, want /other/token required", errs)
	}
}

// TestComposeRendersAsHelmTemplate renders each case with the values
// Compose gives Helm and compares the objects with what helm template
// renders for the same values; where Compose finds a values error, helm
// template must refuse them too.
func TestComposeRendersAsHelmTemplate(t *testing.T) {
	helm := helmBinary(t)
	tests := []struct {
		name, chart, values string
		refused             string // a values error's path; helm template must fail
	}{
		{name: "defaults", chart: depsChart, values: `{}`},
		{name: "a null under an alias", chart: depsChart, values: `{db: {port: null}}`},
		{name: "a value under an alias", chart: depsChart, values: `{db: {port: 6432}}`},
		{name: "a wrong value under an alias", chart: depsChart, values: `{db: {port: bad}}`, refused: "/db/port"},
		{name: "an enabled subchart without its required value", chart: depsChart, values: `{other: {enabled: true}}`, refused: "/other/token"},
		{name: "an enabled subchart", chart: depsChart, values: `{other: {enabled: true, token: t}}`},
		{name: "a null over an imported default", chart: umbrellaChart, values: `{fromCache: {size: null}}`},
		{name: "an alias enabled and a tag off", chart: umbrellaChart, values: `{worker: {enabled: true, replicas: null}, tags: {extras: false}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch := loadTestChart(t, tt.chart)
			res, err := Compose(Inputs{Chart: ch, Sources: Sources{Spec: ymap(t, tt.values)}})
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(file, []byte(tt.values), 0o600); err != nil {
				t.Fatal(err)
			}
			helmOut, helmErr, helmFailed := runHelmTemplate(t, helm, tt.chart, file)
			if tt.refused != "" {
				if len(res.Errors) != 1 || res.Errors[0].Path != tt.refused {
					t.Errorf("values errors = %+v, want one at %s", res.Errors, tt.refused)
				}
				if !helmFailed {
					t.Errorf("helm template accepted the values:\n%s", helmOut)
				}
				return
			}
			if len(res.Errors) > 0 {
				t.Fatalf("values errors %+v; helm template accepts the values", res.Errors)
			}
			if helmFailed {
				t.Fatalf("helm template: %s", helmErr)
			}
			got, err := render.Helm(t.Context(), ch, res.Values, render.Options{ReleaseName: "r", Namespace: "default",
				Capabilities: &render.Capabilities{KubeVersion: "v1.33.2"}})
			if err != nil {
				t.Fatal(err)
			}
			var printed strings.Builder
			for _, o := range got.Objects {
				b, err := yaml.Marshal(o.Object)
				if err != nil {
					t.Fatal(err)
				}
				printed.WriteString("---\n" + string(b))
			}
			objs := objectsOf(t, printed.String())
			want := objectsOf(t, helmOut)
			if diff := cmp.Diff(want, objs); diff != "" {
				t.Errorf("the render of Compose's values and helm template differ (-helm +capstan):\n%s", diff)
			}
			if len(want) < 2 {
				t.Errorf("helm template rendered %d objects; the case renders nothing to compare", len(want))
			}
		})
	}
}

// helmBinary returns bin/helm, built by `make bin` from the Helm version
// Capstan links, or fails the test saying how to build it.
func helmBinary(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CAPSTAN_BIN_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "bin")
	}
	p, err := filepath.Abs(filepath.Join(dir, "helm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run make bin (or hack/helm/build.sh) to build the Helm CLI these tests compare with", p)
	}
	return p
}

// runHelmTemplate runs helm template with a home of its own, so no user
// configuration leaks in, and reports whether it failed.
func runHelmTemplate(t *testing.T, helm, chart, valuesFile string) (string, string, bool) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helm, "template", "r", chart, "-n", "default", "-f", valuesFile, "--kube-version", "v1.33.2")
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "HELM_CACHE_HOME=" + home + "/cache",
		"HELM_CONFIG_HOME=" + home + "/config", "HELM_DATA_HOME=" + home + "/data"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run helm: %v", err)
	}
	return stdout.String(), stderr.String(), err != nil
}

// objectsOf parses helm template's output into objects by kind and name.
func objectsOf(t *testing.T, out string) map[string]map[string]any {
	t.Helper()
	objs := map[string]map[string]any{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("helm template's output is not YAML: %v", err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("helm template's output is not YAML: %v", err)
		}
		if obj == nil {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		kind, _ := obj["kind"].(string)
		objs[kind+"/"+name] = obj
	}
}

// BenchmarkComposeWithDependencies composes values with no nulls for a
// chart with an aliased subchart and one a condition disables, as a sync
// of such an add-on does on every render.
func BenchmarkComposeWithDependencies(b *testing.B) {
	ch, err := loader.LoadDir(depsChart)
	if err != nil {
		b.Fatal(err)
	}
	in := Inputs{Chart: ch, Sources: Sources{Spec: ymap(b, `{db: {port: 5433}, other: {enabled: false}}`)}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compose(in); err != nil {
			b.Fatal(err)
		}
	}
}

// modesChart is a chart whose schema has a oneOf of modes (each but the
// last with a token, writeOnly when writeOnly) or an anyOf, and whose
// defaults hold n entries beside the mode.
func modesChart(t testing.TB, combinator, modes string, n int, writeOnly bool) *chartv2.Chart {
	t.Helper()
	var branches []string
	for i, m := range modes {
		token := fmt.Sprintf(`, "token": {"type": "string", "writeOnly": %t}`, writeOnly)
		if i == len(modes)-1 {
			token = ""
		}
		branches = append(branches, fmt.Sprintf(`{"properties": {"mode": {"const": %q}, "extra": {"type": "object", "additionalProperties": {"type": "string"}}%s}, "required": ["mode"]}`, string(m), token))
	}
	schema := fmt.Sprintf(`{"type": "object", %q: [%s]}`, combinator, strings.Join(branches, ", "))
	var defaults strings.Builder
	defaults.WriteString("extra:\n")
	for i := range n {
		fmt.Fprintf(&defaults, "  key%d: value%d\n", i, i)
	}
	return testChart(t, "modes", defaults.String(), schema)
}

// TestSecretInputCheckDecidesEachBranchOnce: the secret-input check
// decides a oneOf's branches on the effective values, which the chart's
// large defaults fill, once for the combinator and once for spec.values and
// every ConfigMap together, so that a chart whose writeOnly token is under
// a oneOf of four modes composes at less than twice the cost of the same
// chart without writeOnly, where each branch was validated against every
// sibling in every pass (seven times the cost with one ConfigMap).
func TestSecretInputCheckDecidesEachBranchOnce(t *testing.T) {
	from := indexed(docLayer("ConfigMap", "more", "mode: d\nextra: {more: v}\n"))
	allocs := func(writeOnly bool) float64 {
		in := Inputs{Chart: modesChart(t, "oneOf", "abcd", 2000, writeOnly), Sources: Sources{Spec: map[string]any{"mode": "d"}, From: from}}
		return testing.AllocsPerRun(2, func() {
			res, err := Compose(in)
			if err != nil || len(res.Errors) > 0 {
				t.Fatalf("Compose: %v %v", err, res.Errors)
			}
		})
	}
	with, without := allocs(true), allocs(false)
	if with > 2*without {
		t.Errorf("Compose allocates %.0f times with a writeOnly under the oneOf, %.0f without: the branches are decided more than once", with, without)
	}
}

// BenchmarkComposeBranchesOverLargeDefaults composes values for a chart
// whose schema has a writeOnly under a root oneOf of four modes (three with
// a writeOnly token) and an anyOf of two, and whose defaults hold a large
// map beside the mode: the secret-input check decides each branch on the
// effective values too (findSecretInputs), so every render pays for
// validating them against the branches, once for spec.values and once for
// each ConfigMap in spec.valuesFrom.
func BenchmarkComposeBranchesOverLargeDefaults(b *testing.B) {
	for _, c := range []struct{ name, combinator, modes string }{
		{"oneOf4", "oneOf", "abcd"},
		{"anyOf2", "anyOf", "xy"},
	} {
		last := string(c.modes[len(c.modes)-1])
		for _, n := range []int{100, 5000} {
			ch := modesChart(b, c.combinator, c.modes, n, true)
			for _, layers := range []struct {
				name string
				from []Layer
			}{
				{"spec", nil},
				{"spec+configmap", indexed(docLayer("ConfigMap", "more", "mode: "+last+"\nextra: {more: v}\n"))},
			} {
				in := Inputs{Chart: ch, Sources: Sources{Spec: map[string]any{"mode": last}, From: layers.from}}
				b.Run(fmt.Sprintf("%s/%d/%s", c.name, n, layers.name), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if _, err := Compose(in); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
