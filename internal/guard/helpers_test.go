package guard

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// testNamespace and testAddon are the Addon every table test checks for.
const (
	testNamespace = "apps"
	testAddon     = "blog"
)

// testContext is the Context of the table tests: the platform hands over a
// pull secret, the event bus TLS Secret and a media claim.
func testContext() Context {
	return Context{
		Namespace: testNamespace,
		AddonName: testAddon,
		Platform: PlatformRefs{
			Secrets:                []string{"platform-pull", "event-bus-tls"},
			ConfigMaps:             []string{"platform-ca"},
			PersistentVolumeClaims: []string{"platform-media"},
		},
	}
}

// parse reads a multi-document YAML manifest into unstructured objects. It
// skips documents that hold only comments, as Helm's renderer does.
func parse(t testing.TB, manifest string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range splitDocs(manifest) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("test manifest does not parse: %v\n%s", err, doc)
		}
		if m == nil {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

func splitDocs(manifest string) []string {
	var docs []string
	var cur []string
	for _, line := range strings.Split(manifest, "\n") {
		if strings.TrimRight(line, " ") == "---" {
			docs = append(docs, strings.Join(cur, "\n"))
			cur = nil
			continue
		}
		cur = append(cur, line)
	}
	return append(docs, strings.Join(cur, "\n"))
}

// indent prefixes every line of s with n spaces.
func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = pad + l
	}
	return strings.Join(lines, "\n")
}

// deployment wraps a pod spec (YAML, flush left) in a Deployment named web.
func deployment(podSpec string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
    spec:
` + indent(podSpec, 6) + "\n"
}

// deploymentWithAnnotations is deployment with pod template annotations.
func deploymentWithAnnotations(ann, podSpec string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations:
` + indent(ann, 8) + `
    spec:
` + indent(podSpec, 6) + "\n"
}

// job wraps a pod spec in a Job named migrate; with hook, it is a Helm hook.
func job(podSpec string, hook bool) string {
	ann := ""
	if hook {
		ann = "\n  annotations:\n    helm.sh/hook: pre-install,pre-upgrade\n    helm.sh/hook-weight: \"-5\""
	}
	return `apiVersion: batch/v1
kind: Job
metadata:
  name: migrate` + ann + `
spec:
  template:
    spec:
      restartPolicy: Never
` + indent(podSpec, 6) + "\n"
}

// ruleKeys renders violations as "rule@path", sorted.
func ruleKeys(vs []capstanv1.Violation) []string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		out = append(out, v.Rule+"@"+v.Path)
	}
	sort.Strings(out)
	return out
}

// clauseCase is one row of a clause's table: a manifest and the violations
// it must yield, as "rule@path". An empty want is a near-miss that passes.
type clauseCase struct {
	name     string
	manifest string
	want     []string
}

// runClause checks each case with the test context and compares the rules
// and paths exactly. Each clause table must hold at least one refused
// manifest and one allowed near-miss.
func runClause(t *testing.T, cases []clauseCase) {
	t.Helper()
	var refused, allowed int
	for _, tc := range cases {
		if len(tc.want) == 0 {
			allowed++
		} else {
			refused++
		}
		t.Run(tc.name, func(t *testing.T) {
			objs := parse(t, tc.manifest)
			got := Check(context.Background(), objs, testContext())
			want := append([]string(nil), tc.want...)
			sort.Strings(want)
			if strings.Join(ruleKeys(got), "\n") != strings.Join(want, "\n") {
				t.Errorf("violations:\n got: %q\nwant: %q\nmessages:\n%s", ruleKeys(got), want, messages(got))
			}
			for _, v := range got {
				if v.Message == "" || v.Rule == "" {
					t.Errorf("violation without rule or message: %+v", v)
				}
			}
		})
	}
	if refused == 0 || allowed == 0 {
		t.Fatalf("a clause table needs a refused manifest and an allowed near-miss: %d refused, %d allowed", refused, allowed)
	}
}

func messages(vs []capstanv1.Violation) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "  %s %s: %s\n", v.Rule, v.Path, v.Message)
	}
	return b.String()
}
