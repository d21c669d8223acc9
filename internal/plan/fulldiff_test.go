package plan

import (
	"fmt"
	"strings"
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestAWholePlanBoundsOneObjectsDiff: `capstan plan` and the API's plan
// (Full) show a diff of a ConfigMap of megabytes only up to
// MaxFullDiffBytes, cut at a line's end, marked as cut, with the lines and
// bytes left out; a diff under the bound stays whole.
func TestAWholePlanBoundsOneObjectsDiff(t *testing.T) {
	var b strings.Builder
	b.WriteString("--- live/ConfigMap/apps/big\n+++ planned/ConfigMap/apps/big\n@@ -0,0 +1,80000 @@\n")
	for i := range 80000 {
		fmt.Fprintf(&b, "+  key-%05d: a value of the ConfigMap\n", i)
	}
	huge := b.String()
	small := "--- live/ConfigMap/apps/small\n+++ planned/ConfigMap/apps/small\n@@ -1 +1 @@\n-  a: 1\n+  a: 2\n"
	ref := func(name string) capstanv1.ObjectRef {
		return capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: name}
	}
	p := Build(Input{Full: true, Objects: []ObjectResult{
		{Ref: ref("big"), Comparison: Comparison{Action: capstanv1.ActionCreate, Diff: huge, Digest: "a"}},
		{Ref: ref("small"), Comparison: Comparison{Action: capstanv1.ActionUpdate, Diff: small, Digest: "b"}},
	}})
	got := p.Objects[0].Diff
	if len(huge) < 2<<20 || len(got) > MaxFullDiffBytes {
		t.Fatalf("a diff of %d bytes is %d bytes in the whole plan; want at most %d", len(huge), len(got), MaxFullDiffBytes)
	}
	kept, note, ok := strings.Cut(got, "\n... diff cut at ")
	if !ok || !strings.HasPrefix(huge, kept+"\n") {
		t.Fatalf("the cut diff is not the diff's start, cut at a line's end, then a note: %q", got[max(0, len(got)-200):])
	}
	// NOTE: counted from the lines made and the lines kept, not as
	// cutFull counts them: huge has 80000 lines of values and 3 of the
	// diff's head, each ending in a newline, and kept ends in a whole
	// line whose newline the note's first stands for.
	keptLines := strings.Count(kept, "\n") + 1
	leftLines, leftBytes := 80000+3-keptLines, len(huge)-len(kept)-1
	want := fmt.Sprintf("%d KiB: %d more lines (%d bytes) left out; Capstan shows no more of one object's diff\n", MaxFullDiffBytes>>10, leftLines, leftBytes)
	if note != want {
		t.Errorf("the note says %q; want %q", note, want)
	}
	if !p.Objects[0].DiffTruncated || !p.DiffsTruncated {
		t.Error("the whole plan does not mark the cut diff as cut")
	}
	if p.Objects[1].Diff != small || p.Objects[1].DiffTruncated {
		t.Errorf("a small diff in a whole plan is %q (cut: %v); want it whole", p.Objects[1].Diff, p.Objects[1].DiffTruncated)
	}
}

// TestCutDiffsSayHowMuchCapstanPlanShows: the notes of status's diffs
// that send the reader to `capstan plan` say that it shows each diff only
// up to MaxFullDiffBytes, not the whole of it.
func TestCutDiffsSayHowMuchCapstanPlanShows(t *testing.T) {
	bound := fmt.Sprintf("up to %d KiB", MaxFullDiffBytes>>10)
	live, desired := dashboard(5000, "a"), dashboard(5000, "b")
	counted, err := Compare(desired, live, desired)
	if err != nil {
		t.Fatal(err)
	}
	cut, _ := capDiff(strings.Repeat("+  a line of the diff\n", 2000), MaxTotalDiffBytes, false)
	for what, text := range map[string]string{"a cut diff": cut, "a diff only counted": counted.Diff} {
		if !strings.Contains(text, "`capstan plan`") || !strings.Contains(text, bound) || strings.Contains(text, "whole diff") {
			t.Errorf("%s ends %q; want it to send the reader to `capstan plan`, saying it shows the diff %s", what, text[max(0, len(text)-160):], bound)
		}
	}
}
