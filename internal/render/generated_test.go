package render

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
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

// TestRenderFindsRandomNamesAndHooks renders a chart that names a Job at
// random and makes a random password in a hook: the Job is reported with
// the path metadata.name, since a random name makes a new object on every
// render, and the hook's field is reported as the hook's.
func TestRenderFindsRandomNamesAndHooks(t *testing.T) {
	ch := &chartv2.Chart{
		Metadata: &chartv2.Metadata{APIVersion: "v2", Name: "random", Version: "1.0.0"},
		Templates: []*common.File{
			{Name: "templates/migrate.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: migrate-{{ randAlphaNum 8 | lower }}\ndata: {k: v}\n")},
			{Name: "templates/hook.yaml", Data: []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: seed\n  annotations:\n    helm.sh/hook: pre-install\n" +
				"stringData:\n  password: {{ randAlphaNum 16 | quote }}\n")},
			{Name: "templates/fixed.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fixed\ndata: {k: v}\n")},
		},
	}
	art := &source.Artifact{Chart: &source.Chart{Chart: ch, Name: "random", Version: "1.0.0"}}
	res, err := Render(context.Background(), art, nil, Options{ReleaseName: "r", Namespace: "apps", Capabilities: testCaps})
	if err != nil {
		t.Fatal(err)
	}
	var named string
	for _, o := range res.Objects {
		if o.GetName() != "fixed" {
			named = o.GetName()
		}
	}
	want := []Generated{
		{APIVersion: "v1", Kind: "ConfigMap", Name: named, Paths: [][]string{{"metadata", "name"}}},
		{APIVersion: "v1", Kind: "Secret", Name: "seed", Paths: [][]string{{"stringData", "password"}}, Hook: true},
	}
	if diff := cmp.Diff(want, res.Generated); diff != "" {
		t.Fatalf("generated fields (-want +got):\n%s", diff)
	}
	if !res.Generated[0].RandomName() || res.Generated[1].RandomName() {
		t.Errorf("RandomName: %v, %v; want true for the ConfigMap only", res.Generated[0].RandomName(), res.Generated[1].RandomName())
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
	if mayGenerate(loadChart(t, "web"), nil) {
		t.Error("the web chart names no generator, yet would be rendered twice")
	}
	if !mayGenerate(loadChart(t, "generated"), nil) {
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
	for _, index := range []string{"+0", "00", "-0", " 0"} {
		if v, ok := FieldAt(obj, []string{"webhooks", index, "clientConfig", "caBundle"}); ok {
			t.Errorf("FieldAt read %v at the index %q, which is not one", v, index)
		}
		if SetFieldAt(obj, []string{"webhooks", index}, "v") {
			t.Errorf("SetFieldAt set the index %q, which is not one", index)
		}
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

// TestRenderFindsHashedAndTemplatedValues renders charts whose output
// differs each time without naming genCA or randAlphaNum in a template: a
// password hashed with a random salt (htpasswd, bcrypt), an AES
// encryption with a random IV, and a random value in the values that the
// chart runs through tpl, as Bitnami's charts do. Each field is found, so
// that the sync keeps it as it runs rather than change it on every sync.
func TestRenderFindsHashedAndTemplatedValues(t *testing.T) {
	inline := func(tmpl string, defaults map[string]any) *chartv2.Chart {
		return &chartv2.Chart{
			Metadata:  &chartv2.Metadata{APIVersion: "v2", Name: "inline", Version: "0.1.0"},
			Templates: []*common.File{{Name: "templates/secret.yaml", Data: []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: auth\nstringData:\n" + tmpl)}},
			Values:    defaults,
		}
	}
	users := map[string]any{"user": "admin", "pass": "s3cret"}
	cases := []struct {
		name   string
		chart  *chartv2.Chart
		values map[string]any
		want   [][]string
	}{
		{name: "htpasswd", chart: inline("  auth: {{ htpasswd .Values.user .Values.pass | b64enc }}\n", nil), values: users,
			want: [][]string{{"stringData", "auth"}}},
		{name: "bcrypt", chart: inline("  hash: {{ bcrypt .Values.pass | quote }}\n", nil), values: users,
			want: [][]string{{"stringData", "hash"}}},
		{name: "encryptAES", chart: inline("  sealed: {{ encryptAES \"0123456789abcdef\" .Values.pass | quote }}\n", nil), values: users,
			want: [][]string{{"stringData", "sealed"}}},
		{name: "tpl over the given values", chart: inline("  token: {{ tpl .Values.token . | quote }}\n", map[string]any{"token": "fixed"}),
			values: map[string]any{"token": "{{ randAlphaNum 16 }}"}, want: [][]string{{"stringData", "token"}}},
		{name: "tpl over the chart's values", chart: inline("  token: {{ tpl (toYaml .Values.extra) . | quote }}\n", map[string]any{"extra": []any{map[string]any{"t": "{{ uuidv4 }}"}}}),
			want: [][]string{{"stringData", "token"}}},
		{name: "tpl over fixed values", chart: inline("  token: {{ tpl .Values.token . | quote }}\n", map[string]any{"token": "{{ .Release.Name }}-token"})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			art := &source.Artifact{Chart: &source.Chart{Chart: tc.chart, Name: "inline", Version: "0.1.0"}}
			res, err := Render(context.Background(), art, tc.values, Options{ReleaseName: "g", Namespace: "apps", Capabilities: testCaps})
			if err != nil {
				t.Fatal(err)
			}
			var want []Generated
			if tc.want != nil {
				want = []Generated{{APIVersion: "v1", Kind: "Secret", Name: "auth", Paths: tc.want}}
			}
			if diff := cmp.Diff(want, res.Generated); diff != "" {
				t.Errorf("generated fields (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMayGenerate checks which charts are rendered a second time.
func TestMayGenerate(t *testing.T) {
	chart := func(tmpl string, defaults map[string]any, files ...*common.File) *chartv2.Chart {
		return &chartv2.Chart{
			Metadata:  &chartv2.Metadata{APIVersion: "v2", Name: "c", Version: "0.1.0"},
			Templates: []*common.File{{Name: "templates/cm.yaml", Data: []byte(tmpl)}},
			Values:    defaults,
			Files:     files,
		}
	}
	withSub := func(parent, sub *chartv2.Chart) *chartv2.Chart { parent.AddDependency(sub); return parent }
	cases := []struct {
		name   string
		chart  *chartv2.Chart
		values map[string]any
		want   bool
	}{
		{name: "no generator", chart: chart("{{ .Values.a }}", nil)},
		{name: "htpasswd", chart: chart("{{ htpasswd .Values.u .Values.p }}", nil), want: true},
		{name: "bcrypt", chart: chart("{{ bcrypt .Values.p }}", nil), want: true},
		{name: "encryptAES", chart: chart(`{{ encryptAES "k" .Values.p }}`, nil), want: true},
		{name: "ago", chart: chart("{{ ago .Values.since }}", nil), want: true},
		{name: "date over now", chart: chart(`{{ now | date "2006" }}`, nil), want: true},
		{name: "derivePassword is the same each time", chart: chart(`{{ derivePassword 1 "long" "p" "u" "site" }}`, nil)},
		{name: "tpl over fixed values", chart: chart("{{ tpl .Values.a . }}", map[string]any{"a": "{{ .Release.Name }}"})},
		{name: "tpl over given values", chart: chart("{{ tpl .Values.a . }}", nil), values: map[string]any{"a": "{{ randAlphaNum 16 }}"}, want: true},
		{name: "tpl over defaults", chart: chart("{{ tpl .Values.a . }}", map[string]any{"a": []any{"{{ uuidv4 }}"}}), want: true},
		{name: "tpl over a file", chart: chart(`{{ tpl (.Files.Get "conf") . }}`, nil, &common.File{Name: "conf", Data: []byte("id: {{ randInt 0 9 }}")}), want: true},
		{name: "a generator named in a value without tpl", chart: chart("{{ .Values.a }}", nil), values: map[string]any{"a": "{{ randAlphaNum 16 }}"}},
		{name: "a generator's name as plain text in a value", chart: chart("{{ tpl .Values.a . }}", nil), values: map[string]any{"a": "renew now"}},
		{name: "tpl in a library subchart over the parent's values", chart: withSub(chart("{{ .Values.a }}", map[string]any{"a": "{{ randAlpha 3 }}"}),
			chart(`{{- define "lib.render" }}{{ tpl .value .context }}{{ end }}`, nil)), want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := mayGenerate(tc.chart, tc.values); got != tc.want {
				t.Errorf("mayGenerate = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRenderComparesAnObjectNamedAtRandom: the one hook of its kind that
// each render names anew is compared with the other render's, so its
// random token is found as well as its name, and its fixed data is not.
func TestRenderComparesAnObjectNamedAtRandom(t *testing.T) {
	ch := &chartv2.Chart{
		Metadata: &chartv2.Metadata{APIVersion: "v2", Name: "random", Version: "1.0.0"},
		Templates: []*common.File{
			{Name: "templates/seed.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: seed-{{ randAlphaNum 8 | lower }}\n" +
				"  annotations:\n    helm.sh/hook: pre-install\ndata:\n  user: app\n  token: {{ randAlphaNum 16 | quote }}\n")},
		},
	}
	art := &source.Artifact{Chart: &source.Chart{Chart: ch, Name: "random", Version: "1.0.0"}}
	res, err := Render(context.Background(), art, nil, Options{ReleaseName: "r", Namespace: "apps", Capabilities: testCaps})
	if err != nil {
		t.Fatal(err)
	}
	want := []Generated{{APIVersion: "v1", Kind: "ConfigMap", Name: res.Hooks[0].Object.GetName(),
		Paths: [][]string{{"data", "token"}, {"metadata", "name"}}, Hook: true}}
	if diff := cmp.Diff(want, res.Generated); diff != "" {
		t.Errorf("generated fields (-want +got):\n%s", diff)
	}
}

// TestRenderPairsHooksNamedAtRandom: a chart with a pre-install and a
// post-install Job of no namespace, each named at random with a random
// token, in one template or in two. Each render names both anew, and each
// is compared with its counterpart in the other render, so the token is
// found for both, not metadata.name alone: otherwise it stays in the
// plan's hash, which then changes on every reconcile.
func TestRenderPairsHooksNamedAtRandom(t *testing.T) {
	job := func(event string) string {
		return "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: x-{{ randAlphaNum 5 | lower }}\n  annotations:\n    helm.sh/hook: " + event + "\n" +
			"spec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: " + event + "\n        image: busybox\n" +
			"        env:\n        - name: TOKEN\n          value: {{ randAlphaNum 16 | quote }}\n"
	}
	for name, templates := range map[string][]*common.File{
		"two templates": {
			{Name: "templates/pre.yaml", Data: []byte(job("pre-install"))},
			{Name: "templates/post.yaml", Data: []byte(job("post-install"))},
		},
		"one template": {
			{Name: "templates/jobs.yaml", Data: []byte(job("pre-install") + "---\n" + job("post-install"))},
		},
	} {
		t.Run(name, func(t *testing.T) {
			ch := &chartv2.Chart{Metadata: &chartv2.Metadata{APIVersion: "v2", Name: "random", Version: "1.0.0"}, Templates: templates}
			art := &source.Artifact{Chart: &source.Chart{Chart: ch, Name: "random", Version: "1.0.0"}}
			res, err := Render(context.Background(), art, nil, Options{ReleaseName: "r", Namespace: "apps", Capabilities: testCaps})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Hooks) != 2 {
				t.Fatalf("the render has %d hooks, want 2", len(res.Hooks))
			}
			var want []Generated
			for _, h := range res.Hooks {
				want = append(want, Generated{APIVersion: "batch/v1", Kind: "Job", Name: h.Object.GetName(), Hook: true,
					Paths: [][]string{{"metadata", "name"}, {"spec", "template", "spec", "containers", "0", "env", "0", "value"}}})
			}
			if diff := cmp.Diff(want, res.Generated); diff != "" {
				t.Errorf("generated fields (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGeneratorWords checks the word matcher against the regular
// expression's own rule: a name counts only as a whole word, so the
// substring search that rules templates out must never rule one in.
func TestGeneratorWords(t *testing.T) {
	for _, tc := range []struct {
		text string
		want bool
	}{
		{"{{ now | date \"2006\" }}", true},
		{"{{ randAlphaNum 16 }}", true},
		{"{{ genCAWithKey \"ca\" 365 $key }}", true},
		{"{{- $x := uuidv4 -}}", true},
		{"known: {{ .Values.snow }}", false},
		{"{{ .Values.nowhere }}", false},
		{"{{ include \"agone\" . }}", false},
		{"randAlphaNumeric", false},
		{"", false},
	} {
		if got := generators.Match([]byte(tc.text)); got != tc.want {
			t.Errorf("generators.Match(%q) = %v, want %v", tc.text, got, tc.want)
		}
		if got := generators.MatchString(tc.text); got != tc.want {
			t.Errorf("generators.MatchString(%q) = %v, want %v", tc.text, got, tc.want)
		}
	}
	// The regular expression the matcher stands for decides any text.
	re := regexp.MustCompile(`\b(` + strings.Join(generators.names, "|") + `)\b`)
	for _, text := range []string{"now", "_now", "now_", "know now", "randAlphaNumX randAlpha", "ago-", "é now", "agoago ago", "x\nshuffle\n"} {
		if got, want := generators.MatchString(text), re.MatchString(text); got != want {
			t.Errorf("generators.MatchString(%q) = %v, the regular expression says %v", text, got, want)
		}
	}
	if !tplCall.Match([]byte(`{{ tpl .Values.x . }}`)) || tplCall.Match([]byte(`{{ include "common.tplvalues.render" . }}`)) {
		t.Error("tplCall must match a call of tpl and not a name holding it")
	}
}

// FuzzGeneratorWords holds the word matcher to the regular expression
// it stands for.
func FuzzGeneratorWords(f *testing.F) {
	for _, s := range []string{"now", "known now", "randAlphaNum", "x_ago ago", "tpl"} {
		f.Add(s)
	}
	re := regexp.MustCompile(`\b(` + strings.Join(generators.names, "|") + `)\b`)
	f.Fuzz(func(t *testing.T, text string) {
		if got, want := generators.Match([]byte(text)), re.MatchString(text); got != want {
			t.Errorf("generators.Match(%q) = %v, the regular expression says %v", text, got, want)
		}
		if got, want := generators.MatchString(text), re.MatchString(text); got != want {
			t.Errorf("generators.MatchString(%q) = %v, the regular expression says %v", text, got, want)
		}
	})
}

// BenchmarkMayGenerate asks whether a real chart may render differently
// each time, as every render of it does: the 330-object test chart and,
// when make charts has fetched them, a few public charts.
//
//	go test ./internal/render -run '^$' -bench MayGenerate
func BenchmarkMayGenerate(b *testing.B) {
	charts := map[string]*chartv2.Chart{"large": loadChart(b, "large"), "web": loadChart(b, "web")}
	for _, name := range []string{"grafana", "kyverno", "ingress-nginx"} {
		if ch, err := loader.Load(filepath.Join("..", "..", "bin", "charts", name)); err == nil {
			charts[name] = ch
		}
	}
	for name, ch := range charts {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				mayGenerate(ch, nil)
			}
		})
	}
}
