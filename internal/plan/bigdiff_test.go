package plan

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// dashboard is a ConfigMap holding a dashboard's JSON of about n lines,
// whose queries name variant: an upgrade that changes variant changes one
// line in seven, all through the object.
func dashboard(n int, variant string) *unstructured.Unstructured {
	var b strings.Builder
	for i := range n {
		switch i % 7 {
		case 0:
			b.WriteString("  {\n")
		case 1:
			b.WriteString("    \"type\": \"graph\",\n")
		case 2:
			fmt.Fprintf(&b, "    \"id\": %d,\n", i)
		case 3:
			fmt.Fprintf(&b, "    \"expr\": \"rate(x_%s_%d[5m])\",\n", variant, i%50)
		case 4:
			b.WriteString("    \"gridPos\": {\"h\": 8},\n")
		case 5:
			b.WriteString("  },\n")
		case 6:
			b.WriteString("\n")
		}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "dash", "namespace": "mon"},
		"data":     map[string]any{"dash.json": b.String()},
	}}
}

// TestALargeDiffIsBounded: a diff for status of an object whose changes
// are scattered over more lines than maxDiffLines only counts them, and
// the plan marks it as cut; `capstan plan` (full) shows it whole. A change
// in one place of a large object is shown as difflib shows it over the
// whole object, line numbers included.
func TestALargeDiffIsBounded(t *testing.T) {
	live, desired := dashboard(5000, "a"), dashboard(5000, "b")
	c, err := Compare(desired, live, desired)
	if err != nil {
		t.Fatal(err)
	}
	if !c.DiffTooLarge || !strings.Contains(c.Diff, "(diff too large to show here: 714 lines removed and 714 added, between line 7 and line 4998;") ||
		!strings.HasPrefix(c.Diff, "--- live/ConfigMap/mon/dash\n+++ planned/ConfigMap/mon/dash\n") {
		t.Errorf("a diff of scattered changes over 5,000 lines: %q", c.Diff)
	}
	p := Build(Input{Objects: []ObjectResult{{Ref: capstanv1.RefOf(live), Comparison: c}}})
	if !p.DiffsTruncated || !p.Objects[0].DiffTruncated {
		t.Error("the plan does not mark the diff that only counts its lines as cut")
	}
	full, err := compare(desired, live, desired, nil, Generated{}, diffFull)
	if err != nil {
		t.Fatal(err)
	}
	if full.DiffTooLarge || !strings.Contains(full.Diff, `-        "expr": "rate(x_a_3[5m])",`) || !strings.Contains(full.Diff, `+        "expr": "rate(x_b_3[5m])",`) {
		t.Errorf("the full diff is not whole: %.300q", full.Diff)
	}

	for _, n := range []int{5000, 70000} {
		live, desired := dashboard(n, "a"), dashboard(n, "a")
		text := desired.Object["data"].(map[string]any)["dash.json"].(string)
		desired.Object["data"].(map[string]any)["dash.json"] = strings.Replace(text, `"id": 2002,`, `"id": 99999,`, 1)
		c, err := Compare(desired, live, desired)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := yaml.Marshal(Normalize(live).Object)
		b, _ := yaml.Marshal(Normalize(desired).Object)
		want, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: difflib.SplitLines(string(a)), B: difflib.SplitLines(string(b)),
			FromFile: "live/ConfigMap/mon/dash", ToFile: "planned/ConfigMap/mon/dash", Context: 3})
		if c.Diff != want || c.DiffTooLarge {
			t.Errorf("%d lines, one changed: diff\n%s\nwant\n%s", n, c.Diff, want)
		}
	}
}

// BenchmarkCompareScatteredChanges compares, for status, a ConfigMap of a
// dashboard's JSON whose every seventh line changes: the figures are in
// docs/benchmarks.md.
func BenchmarkCompareScatteredChanges(b *testing.B) {
	for _, n := range []int{2000, 5000, 20000, 40000} {
		live, desired := dashboard(n, "a"), dashboard(n, "b")
		b.Run(fmt.Sprint(n, "lines"), func(b *testing.B) {
			for b.Loop() {
				if _, err := Compare(desired, live, desired); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// crd is a CustomResourceDefinition of about 10 lines per field, n fields,
// labelled with chart, whose field `field<changed>` has description.
func crd(n int, chart string, changed int, description string) *unstructured.Unstructured {
	props := map[string]any{}
	for i := range n {
		d := fmt.Sprintf("Field %d of the spec, as the operator reads it.", i)
		if i == changed {
			d = description
		}
		props[fmt.Sprintf("field%05d", i)] = map[string]any{
			"description": d,
			"type":        "object",
			"properties": map[string]any{
				"enabled":  map[string]any{"type": "boolean", "description": fmt.Sprintf("Whether field %d is on.", i)},
				"replicas": map[string]any{"type": "integer", "format": "int32"},
			},
		}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets.example.com", "labels": map[string]any{"helm.sh/chart": chart}},
		"spec": map[string]any{
			"group": "example.com",
			"names": map[string]any{"kind": "Widget", "plural": "widgets"},
			"scope": "Namespaced",
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type":       "object",
					"properties": map[string]any{"spec": map[string]any{"type": "object", "properties": props}},
				}},
			}},
		},
	}}
}

// TestAFewDistantChangesOfALargeObjectAreShown: an upgrade of a large CRD
// that changes its chart label, near its top, and one description deep in
// its schema is two hunks, as difflib shows them over the whole object:
// two changes cost difflib little, however far apart they are.
func TestAFewDistantChangesOfALargeObjectAreShown(t *testing.T) {
	live := crd(1000, "widgets-1.0.0", 900, "Field 900 of the spec, as the operator reads it.")
	desired := crd(1000, "widgets-1.1.0", 900, "Field 900 of the spec, now read on every reconcile.")
	a, _ := yaml.Marshal(Normalize(live).Object)
	if n := strings.Count(string(a), "\n"); n < 9000 {
		t.Fatalf("the CRD has %d lines, want 9,000 or more", n)
	}
	c, err := Compare(desired, live, desired)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := yaml.Marshal(Normalize(desired).Object)
	want, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: difflib.SplitLines(string(a)), B: difflib.SplitLines(string(b)),
		FromFile: "live/CustomResourceDefinition/widgets.example.com", ToFile: "planned/CustomResourceDefinition/widgets.example.com", Context: 3})
	if c.DiffTooLarge || c.Diff != want || strings.Count(c.Diff, "\n@@ -") != 2 {
		t.Errorf("a CRD with two distant changes: diff\n%.2000s\nwant\n%.2000s", c.Diff, want)
	}

	var lines []string
	for i := range 5000 {
		lines = append(lines, fmt.Sprintf("host-%d.example.com", i))
	}
	before := strings.Join(lines, "\n")
	slices.Reverse(lines)
	cm := func(text string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "hosts", "namespace": "mon"}, "data": map[string]any{"hosts": text}}}
	}
	c, err = Compare(cm(strings.Join(lines, "\n")), cm(before), cm(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if !c.DiffTooLarge || !strings.Contains(c.Diff, "(diff too large to show here: lines in another order, between line") {
		t.Errorf("5,000 lines put in another order: %.300q", c.Diff)
	}
}
