package plan

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestBuildListsAHundredProblems: a values document that breaks a schema
// once per item of a long list gives tens of thousands of values errors,
// and a render may break a guardrail as often. Status lists the first
// MaxListed of each and says how many there are, so the plan stays far
// below what the API server stores and the add-on shows as Blocked, with
// the whole count; the hash still covers every one, and `capstan plan`
// (Full) lists them all.
func TestBuildListsAHundredProblems(t *testing.T) {
	const n = 70000
	input := func(last string) Input {
		in := Input{}
		for i := range n {
			in.ValuesErrors = append(in.ValuesErrors, capstanv1.ValuesError{Path: fmt.Sprintf("/allowedCIDRs/%d", i), Rule: "pattern",
				Message: "does not match the pattern ^[0-9./]+$; write it as the schema asks"})
			in.Violations = append(in.Violations, capstanv1.Violation{Object: capstanv1.ObjectRef{APIVersion: "v1", Kind: "Pod", Namespace: "apps", Name: fmt.Sprint("p", i)},
				Path: "spec.hostNetwork", Rule: "hostNetwork", Message: "remove spec.hostNetwork"})
		}
		in.ValuesErrors[n-1].Rule = last
		return in
	}
	p := Build(input("pattern"))
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 64<<10 {
		t.Errorf("the plan is %d bytes in JSON; want it far below what the API server stores", len(b))
	}
	if len(p.ValuesErrors) != 100 || len(p.Violations) != 100 {
		t.Errorf("%d values errors and %d violations listed; want 100 of each", len(p.ValuesErrors), len(p.Violations))
	}
	var notices []string
	for _, no := range p.Notices {
		notices = append(notices, no.Path+": "+no.Message)
	}
	if got := strings.Join(notices, "\n"); !strings.Contains(got, "valuesErrors: status lists the first 100 of 70000 values errors; run `capstan plan` to list them all") ||
		!strings.Contains(got, "violations: status lists the first 100 of 70000 guardrail violations") {
		t.Errorf("notices do not say how many there are:\n%s", got)
	}
	if v, _ := Problems(State{Plan: p}); !strings.HasPrefix(v.Message, "70000 guardrail violation(s), first: Pod apps/p0") {
		t.Errorf("verdict %q; want it to count every violation", v.Message)
	}
	p.Violations = nil
	if v, _ := Problems(State{Plan: p}); !strings.HasPrefix(v.Message, "70000 values error(s), first: /allowedCIDRs/0") {
		t.Errorf("verdict %q; want it to count every values error", v.Message)
	}
	if Build(input("type")).Hash == Build(input("pattern")).Hash {
		t.Error("a change of the last values error, not listed, left the hash as it was")
	}
	in := input("pattern")
	in.Full = true
	if full := Build(in); len(full.ValuesErrors) != n || len(full.Violations) != n || full.Hash != Build(input("pattern")).Hash {
		t.Errorf("a full plan lists %d values errors and %d violations; want all %d, and the same hash", len(full.ValuesErrors), len(full.Violations), n)
	}
	few := Build(Input{ValuesErrors: input("pattern").ValuesErrors[:3]})
	if len(few.ValuesErrors) != 3 || len(few.Notices) != 0 {
		t.Errorf("3 values errors: %d listed, notices %v; want all 3, and no notice", len(few.ValuesErrors), few.Notices)
	}
	if v, _ := Problems(State{Plan: few}); !strings.HasPrefix(v.Message, "3 values error(s)") {
		t.Errorf("verdict %q; want 3 values errors", v.Message)
	}
}

// TestBuildBoundsTheBytesOfListedProblems: values errors whose paths are
// long (unknown keys of 10 KB each in inline JSON values, which YAML's
// key limit does not bound) are listed with each path and message cut,
// marked, and only as many as fit the bytes status gives the lists; the
// notice and the verdict still count them all, and a full plan lists them
// whole.
func TestBuildBoundsTheBytesOfListedProblems(t *testing.T) {
	const n = 60
	in := Input{}
	for i := range n {
		key := fmt.Sprintf("k%d", i) + strings.Repeat("x", 10000)
		in.ValuesErrors = append(in.ValuesErrors, capstanv1.ValuesError{Path: "/" + key, Rule: "additionalProperties",
			Message: key + " is not a property the schema allows here"})
		in.Violations = append(in.Violations, capstanv1.Violation{Object: capstanv1.ObjectRef{APIVersion: "v1", Kind: "Pod", Namespace: "apps", Name: "p"},
			Path: "metadata.annotations." + key, Rule: "annotations", Message: "remove " + key})
	}
	p := Build(in)
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 96<<10 {
		t.Errorf("the plan is %d bytes in JSON; want the listed problems within their budget", len(b))
	}
	if len(p.ValuesErrors) == 0 || len(p.ValuesErrors) == n || len(p.Violations) == 0 || len(p.Violations) == n {
		t.Fatalf("%d values errors and %d violations listed; want some of each, not all %d", len(p.ValuesErrors), len(p.Violations), n)
	}
	for _, e := range p.ValuesErrors {
		if len(e.Path) > 1<<10 || len(e.Message) > 1<<10 || !strings.HasSuffix(e.Path, "...") || !strings.HasPrefix(e.Path, "/k") {
			t.Fatalf("a listed values error is not cut and marked: path of %d bytes ending %q, message of %d bytes", len(e.Path), e.Path[len(e.Path)-5:], len(e.Message))
		}
	}
	var notices []string
	for _, no := range p.Notices {
		notices = append(notices, no.Path+": "+no.Message)
	}
	if got := strings.Join(notices, "\n"); !strings.Contains(got, fmt.Sprintf("valuesErrors: status lists the first %d of %d values errors", len(p.ValuesErrors), n)) {
		t.Errorf("notices do not say how many there are:\n%s", got)
	}
	if v, _ := Problems(State{Plan: p}); !strings.HasPrefix(v.Message, "60 guardrail violation(s)") {
		t.Errorf("verdict %.100q; want it to count every violation", v.Message)
	}
	in.Full = true
	if full := Build(in); len(full.ValuesErrors) != n || full.ValuesErrors[0].Path != in.ValuesErrors[0].Path || full.Hash != p.Hash {
		t.Errorf("a full plan lists %d values errors, the first of %d bytes; want all %d whole, and the same hash", len(full.ValuesErrors), len(full.ValuesErrors[0].Path), n)
	}
}
