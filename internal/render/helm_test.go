package render

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden from the current renders")

// testCaps are fixed capabilities, so renders do not depend on the
// client-go version or on Helm's test-only defaults.
var testCaps = &Capabilities{KubeVersion: "v1.33.2", APIVersions: []string{"example.com/v1"}}

func loadChart(t testing.TB, name string) *chartv2.Chart {
	t.Helper()
	ch, err := loader.Load(filepath.Join("testdata", "charts", name))
	if err != nil {
		t.Fatalf("load chart %s: %v", name, err)
	}
	return ch
}

// golden is what a golden file records of a render.
type golden struct {
	Hash    string           `json:"hash"`
	Objects []map[string]any `json:"objects"`
	Hooks   []goldenHook     `json:"hooks,omitempty"`
}

type goldenHook struct {
	Template       string         `json:"template"`
	Events         []string       `json:"events"`
	UnknownEvents  []string       `json:"unknownEvents,omitempty"`
	Weight         int            `json:"weight"`
	DeletePolicies []string       `json:"deletePolicies,omitempty"`
	Object         map[string]any `json:"object"`
}

func toGolden(res *Result) golden {
	g := golden{Hash: res.Hash}
	for _, o := range res.Objects {
		g.Objects = append(g.Objects, o.Object)
	}
	for _, h := range res.Hooks {
		g.Hooks = append(g.Hooks, goldenHook{h.Template, h.Events, h.UnknownEvents, h.Weight, h.DeletePolicies, h.Object.Object})
	}
	return g
}

// checkGolden compares got with testdata/golden/name.yaml, or rewrites it with -update.
func checkGolden(t *testing.T, name string, got golden) {
	t.Helper()
	data, err := yaml.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join("testdata", "golden", name+".yaml")
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read golden file (run go test ./internal/render -update to write it): %v", err)
	}
	if diff := cmp.Diff(string(want), string(data)); diff != "" {
		t.Errorf("render of %s differs from %s (-want +got); if the change is right, run go test ./internal/render -update:\n%s", name, file, diff)
	}
}

func TestHelmGolden(t *testing.T) {
	cases := []struct {
		name   string
		chart  string
		values map[string]any
		opts   Options
	}{
		{name: "web", chart: "web", opts: Options{ReleaseName: "shop", Namespace: "apps"}},
		{name: "web-values", chart: "web", values: map[string]any{
			"replicaCount": 5, "image": map[string]any{"tag": "2.1.0"}, "extraLabels": map[string]any{"team": "payments"},
		}, opts: Options{ReleaseName: "shop", Namespace: "apps"}},
		{name: "umbrella", chart: "umbrella", opts: Options{ReleaseName: "stack", Namespace: "stack"}},
		{name: "umbrella-worker-no-extras", chart: "umbrella", values: map[string]any{
			"worker": map[string]any{"enabled": true}, "tags": map[string]any{"extras": false},
		}, opts: Options{ReleaseName: "stack", Namespace: "stack"}},
		{name: "withlib", chart: "withlib", opts: Options{ReleaseName: "lib", Namespace: "default"}},
		{name: "operator", chart: "operator", opts: Options{ReleaseName: "op", Namespace: "operators"}},
		{name: "hooks-install", chart: "hooks", opts: Options{ReleaseName: "h", Namespace: "jobs"}},
		{name: "hooks-upgrade", chart: "hooks", opts: Options{ReleaseName: "h", Namespace: "jobs", Upgrade: true}},
		{name: "caps", chart: "caps", opts: Options{ReleaseName: "c", Namespace: "default",
			Capabilities: &Capabilities{KubeVersion: "v1.33.2", APIVersions: []string{"monitoring.coreos.com/v1"}}}},
		{name: "caps-old-cluster", chart: "caps", opts: Options{ReleaseName: "c", Namespace: "default",
			Capabilities: &Capabilities{KubeVersion: "v1.27.4", APIVersions: []string{"v1"}, ExactAPIVersions: true}}},
		{name: "secured", chart: "secured", values: map[string]any{
			"auth": map[string]any{"password": "not-a-real-password"},
		}, opts: Options{ReleaseName: "s", Namespace: "secure"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.opts.Capabilities == nil {
				tc.opts.Capabilities = testCaps
			}
			res, err := Helm(context.Background(), loadChart(t, tc.chart), tc.values, tc.opts)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			checkGolden(t, tc.name, toGolden(res))

			tc.opts.Sandbox = sharedSandbox(t)
			isolated, err := Helm(context.Background(), loadChart(t, tc.chart), tc.values, tc.opts)
			if err != nil {
				t.Fatalf("render in the sandbox: %v", err)
			}
			if diff := cmp.Diff(toGolden(res), toGolden(isolated)); diff != "" {
				t.Errorf("the sandbox renders otherwise than this process (-here +sandbox):\n%s", diff)
			}
		})
	}
}

func TestHelmOrderAndHooks(t *testing.T) {
	res, err := Helm(context.Background(), loadChart(t, "operator"), nil, Options{ReleaseName: "op", Namespace: "ops", Capabilities: testCaps})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range res.Objects {
		kinds = append(kinds, o.GetKind()+"/"+o.GetName())
	}
	// crds/ first in file order, then Helm's install order (ServiceAccount
	// before ClusterRole before ClusterRoleBinding), unknown kinds last.
	want := []string{
		"CustomResourceDefinition/gadgets.example.com", "CustomResourceDefinition/widgets.example.com",
		"ServiceAccount/op-operator", "ClusterRole/op-operator", "ClusterRoleBinding/op-operator", "Widget/default",
	}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("object order (-want +got):\n%s", diff)
	}

	res, err = Helm(context.Background(), loadChart(t, "hooks"), nil, Options{ReleaseName: "h", Namespace: "jobs", Capabilities: testCaps})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != 1 || res.Objects[0].GetName() != "h-app" {
		t.Errorf("objects = %v, want only the ConfigMap h-app: hooks must not be objects", res.Objects)
	}
	hooks := map[string]Hook{}
	for _, h := range res.Hooks {
		hooks[h.Object.GetName()] = h
	}
	if test := hooks["h-test"]; !test.IsTest() || !test.Runnable() || !cmp.Equal(test.Events, []string{TestEvent}) {
		t.Errorf("the test hook h-test = %+v; want it kept, of the event test alone", test)
	}
	job := hooks["h-migrate"]
	if diff := cmp.Diff([]string{"pre-install", "pre-upgrade"}, job.Events); diff != "" {
		t.Errorf("migrate events (-want +got):\n%s", diff)
	}
	if job.Weight != -5 || !cmp.Equal(job.DeletePolicies, []string{"before-hook-creation", "hook-succeeded"}) || !job.Runnable() {
		t.Errorf("migrate hook = weight %d, policies %v, runnable %v", job.Weight, job.DeletePolicies, job.Runnable())
	}
	if typo := hooks["h-typo"]; typo.Runnable() || !cmp.Equal(typo.UnknownEvents, []string{"pre-instal"}) {
		t.Errorf("typo hook = events %v, unknown %v; want it kept, flagged and not runnable", typo.Events, typo.UnknownEvents)
	}
	if w := hooks["h-hook-config"].Weight; w != 0 {
		t.Errorf("weight of \"1.5\" = %d, want 0 as Helm reads it", w)
	}
}

func TestParseHook(t *testing.T) {
	cases := []struct {
		name        string
		annotations map[string]string
		isHook      bool
		want        Hook
	}{
		{name: "no annotations"},
		{name: "other annotations", annotations: map[string]string{"a": "b"}},
		{name: "one event", annotations: map[string]string{"helm.sh/hook": "post-install"}, isHook: true,
			want: Hook{Events: []string{"post-install"}}},
		{name: "spaces and case", annotations: map[string]string{"helm.sh/hook": " Pre-Install ,POST-upgrade"}, isHook: true,
			want: Hook{Events: []string{"pre-install", "post-upgrade"}}},
		{name: "helm 2 test name", annotations: map[string]string{"helm.sh/hook": "test-success"}, isHook: true,
			want: Hook{Events: []string{"test"}}},
		{name: "unknown event kept", annotations: map[string]string{"helm.sh/hook": "pre-install,post-sync"}, isHook: true,
			want: Hook{Events: []string{"pre-install"}, UnknownEvents: []string{"post-sync"}}},
		{name: "empty value", annotations: map[string]string{"helm.sh/hook": ""}, isHook: true,
			want: Hook{Events: []string{}, UnknownEvents: []string{""}}},
		{name: "weight", annotations: map[string]string{"helm.sh/hook": "pre-delete", "helm.sh/hook-weight": "-10"}, isHook: true,
			want: Hook{Events: []string{"pre-delete"}, Weight: -10}},
		{name: "weight not an integer", annotations: map[string]string{"helm.sh/hook": "pre-delete", "helm.sh/hook-weight": "2.5"}, isHook: true,
			want: Hook{Events: []string{"pre-delete"}}},
		{name: "weight with a space", annotations: map[string]string{"helm.sh/hook": "pre-delete", "helm.sh/hook-weight": " 3"}, isHook: true,
			want: Hook{Events: []string{"pre-delete"}}},
		{name: "delete policies", annotations: map[string]string{"helm.sh/hook": "post-install",
			"helm.sh/hook-delete-policy": "Hook-Succeeded, hook-failed"}, isHook: true,
			want: Hook{Events: []string{"post-install"}, DeletePolicies: []string{"hook-succeeded", "hook-failed"}}},
		{name: "empty delete policy", annotations: map[string]string{"helm.sh/hook": "post-install",
			"helm.sh/hook-delete-policy": ""}, isHook: true,
			want: Hook{Events: []string{"post-install"}, DeletePolicies: []string{""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := newObject("v1", "ConfigMap", "x")
			obj.SetAnnotations(tc.annotations)
			got, ok := parseHook(obj, "c/templates/x.yaml")
			if ok != tc.isHook {
				t.Fatalf("isHook = %v, want %v", ok, tc.isHook)
			}
			if !ok {
				return
			}
			if got.Annotation != "helm.sh/hook" {
				t.Errorf("annotation %q, want helm.sh/hook", got.Annotation)
			}
			got.Object, got.Template, got.Annotation = nil, "", ""
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("hook (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDeletePoliciesAsHelmSortsThem renders hooks whose delete policies
// are empty or have empty items, as a chart that templates the policy from
// a value that is "" does, and checks that the render reads them as Helm's
// own manifest sorter does: an empty item is a policy, unknown, so no
// default before-hook-creation applies over it.
func TestDeletePoliciesAsHelmSortsThem(t *testing.T) {
	policies := []string{"", " ", "hook-succeeded,", ",", " Hook-Failed , before-hook-creation"}
	var tpl strings.Builder
	for i, p := range policies {
		fmt.Fprintf(&tpl, "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j%d\n  annotations:\n    helm.sh/hook: pre-install\n    helm.sh/hook-delete-policy: %q\n", i, p)
	}
	fmt.Fprintf(&tpl, "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: none\n  annotations:\n    helm.sh/hook: pre-install\n")
	helmHooks, _, err := releaseutil.SortManifests(map[string]string{"inline/templates/jobs.yaml": tpl.String()}, nil, releaseutil.InstallOrder)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{}
	for _, h := range helmHooks {
		want[h.Name] = []string{}
		for _, p := range h.DeletePolicies {
			want[h.Name] = append(want[h.Name], string(p))
		}
	}
	ch := &chartv2.Chart{
		Metadata:  &chartv2.Metadata{APIVersion: "v2", Name: "inline", Version: "0.1.0"},
		Templates: []*common.File{{Name: "templates/jobs.yaml", Data: []byte(tpl.String())}},
	}
	res, err := Helm(context.Background(), ch, nil, Options{ReleaseName: "x", Namespace: "x", Capabilities: testCaps})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, h := range res.Hooks {
		got[h.Object.GetName()] = append([]string{}, h.DeletePolicies...)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delete policies by hook (-helm +capstan):\n%s", diff)
	}
	if len(got) != len(policies)+1 || len(got["j0"]) != 1 || got["j0"][0] != "" {
		t.Errorf("hooks %q; want %d, and j0 with the one policy \"\"", got, len(policies)+1)
	}
}

func TestHelmDoesNotChangeTheChart(t *testing.T) {
	ch := loadChart(t, "umbrella")
	opts := Options{ReleaseName: "stack", Namespace: "stack", Capabilities: testCaps}
	before, err := Helm(context.Background(), ch, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	// An alias enabled, a tag turned off: Helm's dependency processing would
	// drop the cache subchart and rename the worker in place.
	other, err := Helm(context.Background(), ch, map[string]any{
		"worker": map[string]any{"enabled": true}, "tags": map[string]any{"extras": false},
	}, opts)
	if err != nil {
		t.Fatal(err)
	}
	after, err := Helm(context.Background(), ch, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(toGolden(before), toGolden(after)); diff != "" {
		t.Errorf("a render changed the chart: the same render differs afterwards (-before +after):\n%s", diff)
	}
	wantOther := []string{"ConfigMap//stack-summary", "Deployment//stack-backend", "Deployment//stack-worker"}
	if diff := cmp.Diff(wantOther, names(other.Objects)); diff != "" {
		t.Errorf("with the worker alias on and the extras tag off (-want +got):\n%s", diff)
	}
	if len(ch.Dependencies()) != 2 || ch.Metadata.Dependencies[1].Name != "backend" {
		t.Errorf("the chart's dependencies changed: %d charts, second dependency named %q", len(ch.Dependencies()), ch.Metadata.Dependencies[1].Name)
	}
}

// TestTemplateErrorsAreRedacted renders failing templates whose messages
// carry a secret, and checks that the error names the place and not the secret.
func TestTemplateErrorsAreRedacted(t *testing.T) {
	const secret = "hunter2-do-not-print"
	opts := Options{ReleaseName: "s", Namespace: "secure", Capabilities: testCaps}
	inline := func(tpl string) *chartv2.Chart {
		return &chartv2.Chart{
			Metadata:  &chartv2.Metadata{APIVersion: "v2", Name: "inline", Version: "0.1.0"},
			Templates: []*common.File{{Name: "templates/cm.yaml", Data: []byte(tpl)}},
		}
	}
	cases := []struct {
		name     string
		chart    *chartv2.Chart
		values   map[string]any
		stage    string
		template string
		line     int
	}{
		{name: "required prints a value", chart: loadChart(t, "secured"),
			values: map[string]any{"auth": map[string]any{"username": secret}},
			stage:  "execute", template: "secured/templates/secret.yaml", line: 8},
		{name: "fail prints a value", chart: loadChart(t, "secured"),
			values: map[string]any{"mode": "broken", "auth": map[string]any{"password": secret}},
			stage:  "execute", template: "secured/templates/check.yaml", line: 2},
		{name: "tpl of a value", chart: inline("a: {{ tpl .Values.t . }}\n"),
			values: map[string]any{"t": "{{ fail \"" + secret + "\" }}"},
			stage:  "execute", template: "inline/templates/cm.yaml", line: 1},
		{name: "bad function call on a value", chart: inline("apiVersion: v1\nkind: ConfigMap\ndata:\n  a: {{ .Values.t | b64dec | int | div 0 }}\n"),
			values: map[string]any{"t": secret},
			stage:  "execute", template: "inline/templates/cm.yaml", line: 4},
		{name: "output is not YAML", chart: inline("apiVersion: v1\nkind: ConfigMap\ndata:\n  a: {{ .Values.t }}\n"),
			values: map[string]any{"t": secret + ": [x"},
			stage:  "yaml", template: "inline/templates/cm.yaml", line: 4},
		{name: "parse error", chart: inline("a: {{ nosuchfunction .Values.t }}\n"),
			stage: "parse", template: "inline/templates/cm.yaml", line: 1},
	}
	for _, tc := range cases {
		for _, sandbox := range []*Sandbox{nil, sharedSandbox(t)} {
			opts.Sandbox = sandbox
			name := tc.name
			if sandbox != nil {
				name += " (sandbox)"
			}
			t.Run(name, func(t *testing.T) {
				checkTemplateError(t, tc.chart, tc.values, opts, secret, tc.stage, tc.template, tc.line)
			})
		}
	}
}

// TestNotAnObjectSaysWhatIsMissing renders documents that are YAML but not
// Kubernetes objects: the error names the template, the document and what
// the document lacks or is, and quotes none of its values.
func TestNotAnObjectSaysWhatIsMissing(t *testing.T) {
	const secret = "hunter2-do-not-print"
	const ok = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ok\n---\n"
	inline := func(tpl string) *chartv2.Chart {
		return &chartv2.Chart{
			Metadata:  &chartv2.Metadata{APIVersion: "v2", Name: "inline", Version: "0.1.0"},
			Templates: []*common.File{{Name: "templates/cm.yaml", Data: []byte(ok + tpl)}},
		}
	}
	values := map[string]any{"t": secret, "n": 5}
	for _, tc := range []struct{ name, tpl, want string }{
		{"an empty map", "{{- if true }}\n{}\n{{- end }}\n", "the document has no apiVersion and no kind"},
		{"no apiVersion", "kind: ConfigMap\nmetadata:\n  name: {{ .Values.t }}\n", "the document has no apiVersion:"},
		{"no kind", "apiVersion: v1\nmetadata:\n  name: {{ .Values.t }}\n", "the document has no kind:"},
		{"a kind that is a number", "apiVersion: v1\nkind: {{ .Values.n }}\nmetadata:\n  name: {{ .Values.t }}\n", "the document has a kind that is not a string:"},
		{"an empty apiVersion", "apiVersion: \"\"\nkind: ConfigMap\n", "the document has an empty apiVersion:"},
		{"a list", "- {{ .Values.t }}\n- b\n", "the document is a list, not an object"},
		{"a string", "{{ .Values.t }}\n", "the document is a string, not an object"},
		{"a List item that is a string", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n- {{ .Values.t }}\n",
			"item 2 of the List is a string, not an object"},
		{"a List item without apiVersion", "apiVersion: v1\nkind: List\nitems:\n- kind: ConfigMap\n  metadata:\n    name: {{ .Values.t }}\n",
			"item 1 of the List has no apiVersion:"},
	} {
		for _, sandbox := range []*Sandbox{nil, sharedSandbox(t)} {
			name := tc.name
			if sandbox != nil {
				name += " (sandbox)"
			}
			t.Run(name, func(t *testing.T) {
				opts := Options{ReleaseName: "s", Namespace: "secure", Capabilities: testCaps, Sandbox: sandbox}
				_, err := Helm(context.Background(), inline(tc.tpl), values, opts)
				var te *TemplateError
				if !errors.As(err, &te) {
					t.Fatalf("error is %T (%v), want a *TemplateError", err, err)
				}
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("the error carries the secret: %v", err)
				}
				if te.Stage != "yaml" || te.Template != "inline/templates/cm.yaml" || te.Document != 2 {
					t.Errorf("error = stage %q, %s document %d; want stage yaml, inline/templates/cm.yaml document 2 (%v)", te.Stage, te.Template, te.Document, err)
				}
				if !strings.HasPrefix(te.Problem, tc.want) {
					t.Errorf("problem = %q, want one that starts %q", te.Problem, tc.want)
				}
				want := "render: template's output is not a valid Kubernetes object in inline/templates/cm.yaml (document 2): " + te.Problem
				if err.Error() != want || strings.Contains(err.Error(), "withheld") {
					t.Errorf("error = %q\nwant    %q", err, want)
				}
			})
		}
	}
}

// TestTemplateErrorsKeepTheChartsMessage renders charts whose required and
// fail calls quote a secret: with a Mask, the error carries the chart's own
// message with the secret hidden; without one, no message at all; and
// Helm's own messages never.
func TestTemplateErrorsKeepTheChartsMessage(t *testing.T) {
	const secret = "hunter2-do-not-print"
	hide := func(s string) string { return strings.ReplaceAll(s, secret, "(hidden)") }
	bad := &chartv2.Chart{
		Metadata:  &chartv2.Metadata{APIVersion: "v2", Name: "inline", Version: "0.1.0"},
		Templates: []*common.File{{Name: "templates/cm.yaml", Data: []byte("a: {{ .Values.t | b64dec | int | div 0 }}\n")}},
	}
	cases := []struct {
		name   string
		chart  *chartv2.Chart
		values map[string]any
		mask   func(string) string
		want   string
	}{
		{name: "required, masked", chart: loadChart(t, "secured"), values: map[string]any{"auth": map[string]any{"username": secret}},
			mask: hide, want: "render: the chart stopped in secured/templates/secret.yaml line 8 column 15: auth.password is required for user (hidden)"},
		{name: "fail, masked", chart: loadChart(t, "secured"), values: map[string]any{"mode": "broken", "auth": map[string]any{"password": secret}},
			mask: hide, want: "render: the chart stopped in secured/templates/check.yaml line 2 column 4: mode broken cannot be used with password (hidden)"},
		{name: "required, no mask", chart: loadChart(t, "secured"), values: map[string]any{"auth": map[string]any{"username": secret}}},
		{name: "Helm's own message, masked", chart: bad, values: map[string]any{"t": secret}, mask: hide},
	}
	for _, tc := range cases {
		for _, sandbox := range []*Sandbox{nil, sharedSandbox(t)} {
			name := tc.name
			if sandbox != nil {
				name += " (sandbox)"
			}
			t.Run(name, func(t *testing.T) {
				opts := Options{ReleaseName: "s", Namespace: "secure", Capabilities: testCaps, Sandbox: sandbox, Mask: tc.mask}
				_, err := Helm(context.Background(), tc.chart, tc.values, opts)
				var te *TemplateError
				if !errors.As(err, &te) {
					t.Fatalf("error is %T (%v), want a *TemplateError", err, err)
				}
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("the error carries the secret: %v", err)
				}
				switch {
				case tc.want != "" && err.Error() != tc.want:
					t.Errorf("error = %q\nwant    %q", err, tc.want)
				case tc.want == "" && (te.Message != "" || !strings.Contains(err.Error(), "withheld")):
					t.Errorf("error = %q; want no message of the chart's or Helm's", err)
				}
			})
		}
	}
}

func checkTemplateError(t *testing.T, ch *chartv2.Chart, values map[string]any, opts Options, secret, stage, template string, line int) {
	t.Helper()
	_, err := Helm(context.Background(), ch, values, opts)
	if err == nil {
		t.Fatal("render succeeded, want a template error")
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("the error carries the secret: %v", err)
	}
	var te *TemplateError
	if !errors.As(err, &te) {
		t.Fatalf("error is %T (%v), want a *TemplateError", err, err)
	}
	if te.Stage != stage || te.Template != template || te.Line != line {
		t.Errorf("error = stage %q, %s line %d; want stage %q, %s line %d (%v)", te.Stage, te.Template, te.Line, stage, template, line, err)
	}
	if !strings.Contains(err.Error(), template) {
		t.Errorf("message %q does not name the template %s", err, template)
	}
}

func TestHelmRefusals(t *testing.T) {
	lib := loadChart(t, "withlib").Dependencies()[0]
	missing := loadChart(t, "umbrella")
	// NOTE: the loader's order of dependencies is not fixed: drop cache by
	// its name.
	var kept []*chartv2.Chart
	for _, d := range missing.Dependencies() {
		if d.Name() != "cache" {
			kept = append(kept, d)
		}
	}
	if len(kept) == len(missing.Dependencies()) {
		t.Fatal("the umbrella chart has no cache dependency")
	}
	missing.SetDependencies(kept...)
	// NOTE: Helm's v2 loader reads a chart of any apiVersion; Helm 4's own
	// loader refuses one it does not know (v9) and reads v3 into a type
	// that its install does not take.
	apiV9 := loadChart(t, "apiv3")
	apiV9.Metadata.APIVersion = "v9"
	cases := []struct {
		name  string
		chart *chartv2.Chart
		opts  Options
		want  string
	}{
		{name: "library chart", chart: lib, opts: Options{ReleaseName: "x", Namespace: "x"}, want: "library chart"},
		{name: "bad release name", chart: loadChart(t, "web"), opts: Options{ReleaseName: "Not_Valid", Namespace: "x"}, want: "release name"},
		{name: "no namespace", chart: loadChart(t, "web"), opts: Options{ReleaseName: "x"}, want: "namespace"},
		{name: "kubeVersion too old", chart: loadChart(t, "caps"),
			opts: Options{ReleaseName: "x", Namespace: "x", Capabilities: &Capabilities{KubeVersion: "v1.24.0"}}, want: "requires Kubernetes >=1.25.0-0"},
		{name: "bad kube version", chart: loadChart(t, "web"),
			opts: Options{ReleaseName: "x", Namespace: "x", Capabilities: &Capabilities{KubeVersion: "one.two"}}, want: "not a version"},
		{name: "missing dependency", chart: missing, opts: Options{ReleaseName: "x", Namespace: "x"}, want: "not in its charts/ folder: cache"},
		{name: "chart apiVersion v3", chart: loadChart(t, "apiv3"), opts: Options{ReleaseName: "x", Namespace: "x"},
			want: `chart apiv3 has Chart.yaml apiVersion "v3", which Helm 4 cannot install (only v1 and v2): use a chart of apiVersion v2`},
		{name: "chart apiVersion v9", chart: apiV9, opts: Options{ReleaseName: "x", Namespace: "x"}, want: `apiVersion "v9", which Helm 4 cannot install`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Helm(context.Background(), tc.chart, nil, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one that says %q", err, tc.want)
			}
		})
	}
}

// TestChartCRDsAreInTheClustersCapabilities renders a chart whose template
// checks for its own CRD's API, as `helm install` does on a cluster that
// lacks it (the CRD is applied with the chart, before the template could
// see it) and as `helm template` does, which adds none.
func TestChartCRDsAreInTheClustersCapabilities(t *testing.T) {
	cluster := &Capabilities{KubeVersion: "v1.33.2", APIVersions: []string{"v1", "apps/v1"}, ExactAPIVersions: true}
	for _, tc := range []struct {
		name   string
		caps   *Capabilities
		widget bool
	}{
		{"a cluster without the CRD", cluster, true},
		{"helm template", &Capabilities{KubeVersion: "v1.33.2"}, false},
	} {
		for _, sandbox := range []bool{false, true} {
			opts := Options{ReleaseName: "op", Namespace: "ops", Capabilities: tc.caps}
			if sandbox {
				opts.Sandbox = sharedSandbox(t)
			}
			res, err := Helm(context.Background(), loadChart(t, "operator"), nil, opts)
			if err != nil {
				t.Fatal(err)
			}
			found := slices.ContainsFunc(res.Objects, func(o *unstructured.Unstructured) bool { return o.GetKind() == "Widget" })
			if found != tc.widget {
				t.Errorf("%s (sandbox %v): the Widget rendered: %v; want %v", tc.name, sandbox, found, tc.widget)
			}
		}
	}
	got := crdAPIVersions(loadChart(t, "operator").CRDObjects())
	want := []string{"example.com/v1alpha1", "example.com/v1alpha1/Gadget", "example.com/v1", "example.com/v1/Widget"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the CRDs' APIs (-want +got):\n%s", diff)
	}
}

// chartOf is a chart of the given templates, by file name under templates/.
func chartOf(name string, templates map[string]string) *chartv2.Chart {
	ch := &chartv2.Chart{Metadata: &chartv2.Metadata{APIVersion: "v2", Name: name, Version: "1.0.0"}}
	for _, f := range slices.Sorted(maps.Keys(templates)) {
		ch.Templates = append(ch.Templates, &common.File{Name: "templates/" + f, Data: []byte(templates[f])})
	}
	return ch
}

// TestHelmRefusesAnnotationsThatAreNotStrings renders a pre-delete hook
// whose weight is an unquoted number. Read as unstructured reads it, it
// has no annotations, so it was taken for an object to apply at install;
// the API server refuses it anyway. The render names its template and
// document instead.
func TestHelmRefusesAnnotationsThatAreNotStrings(t *testing.T) {
	const configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n"
	for _, tc := range []struct {
		name, annotations string
		refused           bool
	}{
		{name: "a number", annotations: "    helm.sh/hook: pre-delete\n    helm.sh/hook-weight: 5\n", refused: true},
		{name: "a bool", annotations: "    helm.sh/hook: pre-delete\n    example.com/on: true\n", refused: true},
		{name: "a map", annotations: "    helm.sh/hook: pre-delete\n    example.com/m: {a: b}\n", refused: true},
		{name: "null is empty", annotations: "    helm.sh/hook: pre-delete\n    example.com/none: null\n"},
		{name: "quoted", annotations: "    helm.sh/hook: pre-delete\n    helm.sh/hook-weight: \"5\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := chartOf("c", map[string]string{"job.yaml": configMap + "---\n" +
				"apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: cleanup\n  annotations:\n" + tc.annotations})
			res, err := Helm(context.Background(), ch, nil, Options{ReleaseName: "r", Namespace: "ns", Capabilities: testCaps})
			if !tc.refused {
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Hooks) != 1 || !cmp.Equal(res.Hooks[0].Events, []string{"pre-delete"}) || len(res.Objects) != 1 {
					t.Fatalf("hooks %v, objects %d: want the Job a pre-delete hook, the ConfigMap an object", res.Hooks, len(res.Objects))
				}
				return
			}
			var te *TemplateError
			if !errors.As(err, &te) || te.Stage != "yaml" || te.Template != "c/templates/job.yaml" || te.Document != 2 {
				t.Fatalf("error = %#v (%v), want a yaml error of c/templates/job.yaml, document 2", err, err)
			}
		})
	}
}

// TestHelmListHooksAreTheLists renders List documents as Helm's manifest
// sorter reads them: from the List's own metadata. A List that is a hook
// makes each item a hook of its events, weight and delete policies, and an
// item's own hook annotation means nothing; the items of a List that is no
// hook are objects, with a hook annotation or without. A patch to an item
// of a hook List leaves it the List's hook.
func TestHelmListHooksAreTheLists(t *testing.T) {
	ch := chartOf("c", map[string]string{"lists.yaml": `apiVersion: v1
kind: List
metadata:
  annotations:
    helm.sh/hook: pre-delete
    helm.sh/hook-weight: 3
    helm.sh/hook-delete-policy: hook-succeeded
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: plain-item
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: own-hook-item
    annotations:
      helm.sh/hook: post-install
      helm.sh/hook-weight: "-1"
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: hook-in-plain-list
    annotations:
      helm.sh/hook: pre-install
`})
	res, err := Helm(context.Background(), ch, nil, Options{ReleaseName: "r", Namespace: "ns", Capabilities: testCaps})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != 1 || res.Objects[0].GetName() != "hook-in-plain-list" {
		t.Errorf("objects = %v, want only hook-in-plain-list", names(res.Objects))
	}
	check := func(hooks []Hook) {
		t.Helper()
		var got []string
		for _, h := range hooks {
			got = append(got, h.Object.GetName())
			if !h.List || !cmp.Equal(h.Events, []string{"pre-delete"}) || h.Weight != 3 || !cmp.Equal(h.DeletePolicies, []string{"hook-succeeded"}) {
				t.Errorf("hook %s: list %v, events %v, weight %d, policies %v; want the List's: pre-delete, 3, hook-succeeded",
					h.Object.GetName(), h.List, h.Events, h.Weight, h.DeletePolicies)
			}
		}
		if diff := cmp.Diff([]string{"plain-item", "own-hook-item"}, got); diff != "" {
			t.Errorf("hooks (-want +got):\n%s", diff)
		}
	}
	check(res.Hooks)
	patch := `[{"op":"add","path":"/metadata/labels","value":{"patched":"yes"}}]`
	if err := (&PostRender{Patches: []types.Patch{{Patch: patch, Target: selectorOf("ConfigMap", "plain-item")}}}).apply(res, nil); err != nil {
		t.Fatal(err)
	}
	check(res.Hooks)
	if res.Hooks[0].Object.GetLabels()["patched"] != "yes" {
		t.Errorf("the patched hook item has labels %v", res.Hooks[0].Object.GetLabels())
	}
}

// TestHelmReadsAListsAnnotationsAsStrings: a List never reaches the API
// server, and Helm reads its own annotations into strings, a number and
// null included, so a List with an unquoted weight is a hook of that
// weight; one with an annotation that is a map is refused, as Helm refuses
// it, rather than read as no hook and its items applied at once.
func TestHelmReadsAListsAnnotationsAsStrings(t *testing.T) {
	list := func(annotations string) *chartv2.Chart {
		return chartOf("c", map[string]string{"list.yaml": "apiVersion: v1\nkind: List\nmetadata:\n  annotations:\n" + annotations +
			"items:\n- apiVersion: batch/v1\n  kind: Job\n  metadata:\n    name: backup\n"})
	}
	res, err := Helm(context.Background(), list("    helm.sh/hook: pre-delete\n    helm.sh/hook-weight: 5\n    example.com/none: null\n"), nil,
		Options{ReleaseName: "r", Namespace: "ns", Capabilities: testCaps})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hooks) != 1 || res.Hooks[0].Weight != 5 || len(res.Objects) != 0 {
		t.Fatalf("hooks %+v, objects %d; want the Job a pre-delete hook of weight 5", res.Hooks, len(res.Objects))
	}
	_, err = Helm(context.Background(), list("    helm.sh/hook: pre-delete\n    example.com/m: {a: b}\n"), nil,
		Options{ReleaseName: "r", Namespace: "ns", Capabilities: testCaps})
	var te *TemplateError
	if !errors.As(err, &te) || te.Stage != "yaml" {
		t.Fatalf("error = %v; want a yaml error for the List's map annotation", err)
	}
}

// TestHelmRefusesLabelsThatAreNotStrings renders a template whose label is
// an unquoted number. Read as unstructured reads it, the object has no
// labels at all; the render names the template, the object and the label.
func TestHelmRefusesLabelsThatAreNotStrings(t *testing.T) {
	ch := chartOf("c", map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dashboards\n  labels:\n    app: x\n    grafana_dashboard: 1\n"})
	_, err := Helm(context.Background(), ch, nil, Options{ReleaseName: "r", Namespace: "ns", Capabilities: testCaps})
	var te *TemplateError
	if !errors.As(err, &te) || te.Stage != "yaml" || te.Template != "c/templates/cm.yaml" || te.Document != 1 {
		t.Fatalf("error = %#v (%v), want a yaml error of c/templates/cm.yaml, document 1", err, err)
	}
	if want := "ConfigMap dashboards: the label grafana_dashboard is a number, not a string: quote the value"; !strings.Contains(err.Error(), want) {
		t.Errorf("error = %v, want it to say %q", err, want)
	}
}

// TestHelmRefusesAnObjectWrittenTwice renders a chart whose two templates
// write the same ConfigMap, one with the release namespace written out and
// one without: applied, they would replace each other on every sync. The
// render names both templates. A hook may share an object's name.
func TestHelmRefusesAnObjectWrittenTwice(t *testing.T) {
	ch := chartOf("c", map[string]string{
		"a.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata: {a: \"1\"}\n",
		"b.yaml":    "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: settings\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: ns\ndata: {a: \"2\"}\n",
		"hook.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  annotations: {helm.sh/hook: pre-install}\n",
	})
	_, err := Helm(context.Background(), ch, nil, Options{ReleaseName: "r", Namespace: "ns", Capabilities: testCaps})
	want := "ConfigMap ns/settings is written twice, in c/templates/a.yaml (document 1) and in c/templates/b.yaml (document 2)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v, want %q", err, want)
	}

	ch = chartOf("c", map[string]string{
		"a.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n",
		"hook.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  annotations: {helm.sh/hook: pre-install}\n",
	})
	if _, err := Helm(context.Background(), ch, nil, Options{ReleaseName: "r", Namespace: "ns", Capabilities: testCaps}); err != nil {
		t.Errorf("an object and a hook of one name: %v", err)
	}
}

// TestHelmKeepsTheFirstOfACRDInTwoCRDFolders renders an umbrella chart
// whose parent and two subcharts each ship one CRD in crds/, the parent's
// a little different: helm install creates the first and skips the CRD
// that then exists, so the render keeps the first copy, with a notice
// naming both files. Any other kind written twice in crds/, or a CRD in
// crds/ and templates/, is still refused, and the error gives a
// cluster-scoped object no namespace.
func TestHelmKeepsTheFirstOfACRDInTwoCRDFolders(t *testing.T) {
	crd := func(desc string) string {
		return "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\n  annotations: {d: " + desc + "}\n" +
			"spec:\n  group: example.com\n  names: {kind: Widget, plural: widgets}\n  scope: Namespaced\n" +
			"  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]\n"
	}
	umbrella := func(extra string) *chartv2.Chart {
		parent := chartOf("parent", map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p\n"})
		parent.Files = append(parent.Files, &common.File{Name: "crds/widgets.yaml", Data: []byte(crd("parent") + extra)})
		for _, name := range []string{"a", "b"} {
			sub := chartOf(name, map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"})
			sub.Files = append(sub.Files, &common.File{Name: "crds/widgets.yaml", Data: []byte(crd(name) + extra)})
			parent.AddDependency(sub)
		}
		return parent
	}
	res, err := Helm(context.Background(), umbrella(""), nil, Options{ReleaseName: "r", Namespace: "ns", Capabilities: testCaps})
	if err != nil {
		t.Fatalf("one CRD in three crds/ folders: %v", err)
	}
	var crds []*unstructured.Unstructured
	for _, o := range res.Objects {
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o)
		}
	}
	if len(crds) != 1 || len(res.Objects) != 4 {
		t.Fatalf("%d CRDs of %d objects, want 1 of 4", len(crds), len(res.Objects))
	}
	first := crds[0].GetAnnotations()["d"]
	if len(res.Notices) != 2 {
		t.Fatalf("notices %+v, want one for each copy left out", res.Notices)
	}
	for _, n := range res.Notices {
		if !strings.Contains(n.Message, "CustomResourceDefinition widgets.example.com is in "+first+"/crds/widgets.yaml too") &&
			!strings.Contains(n.Message, "widgets.example.com is in parent/crds/widgets.yaml too") {
			t.Errorf("notice %+v does not name the file kept", n)
		}
	}

	_, err = Helm(context.Background(), umbrella("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n"), nil,
		Options{ReleaseName: "r", Namespace: "ns", Capabilities: testCaps})
	if err == nil || !strings.Contains(err.Error(), "ConfigMap ns/shared is written twice") {
		t.Errorf("a ConfigMap in two crds/ folders: %v, want it refused", err)
	}

	ch := chartOf("c", map[string]string{"crd.yaml": crd("t"), "roles.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: admin\n"})
	ch.Files = append(ch.Files, &common.File{Name: "crds/widgets.yaml", Data: []byte(crd("c"))})
	_, err = Helm(context.Background(), ch, nil, Options{ReleaseName: "r", Namespace: "ns", Capabilities: testCaps})
	if want := "CustomResourceDefinition widgets.example.com is written twice, in c/crds/widgets.yaml and in c/templates/crd.yaml"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a CRD in crds/ and templates/: %v, want %q", err, want)
	}
	ch = chartOf("c", map[string]string{
		"a.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: admin\n",
		"b.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: admin\n  namespace: other\n",
	})
	_, err = Helm(context.Background(), ch, nil, Options{ReleaseName: "r", Namespace: "ns", Capabilities: testCaps})
	if want := "ClusterRole admin is written twice"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a ClusterRole in two templates: %v, want %q", err, want)
	}
}
