package plan

import (
	"fmt"
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
	full, err := compare(desired, live, desired, nil, Generated{}, true)
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
