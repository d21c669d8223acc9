package plan

import (
	"strings"
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/mask"
)

// TestBuildHidesListedProblemsBeforeCuttingThem: a values error and a
// violation that quote a secret value across the byte where status cuts
// them show no part of it, in the plan or in the Blocked verdict's
// message: the value is hidden whole, then the text is cut. Cut first, the
// value's start would be left, which no mask matches.
func TestBuildHidesListedProblemsBeforeCuttingThem(t *testing.T) {
	secret := "pw-7c1e9a0b4d2f6e8a1c3b5d7f9e0a2c4b6d8f"
	m := mask.New([]string{secret})
	// The value starts 20 bytes before the cut: its first 20 bytes would
	// be kept.
	quote := strings.Repeat("a", maxListedField-3-20) + secret + " does not match the pattern"
	for _, full := range []bool{false, true} {
		p := Build(Input{Full: full, Mask: m.String,
			ValuesErrors: []capstanv1.ValuesError{{Path: "/password", Rule: "pattern", Message: quote}},
			Violations: []capstanv1.Violation{{Object: capstanv1.ObjectRef{APIVersion: "v1", Kind: "Pod", Name: "p"},
				Path: "spec.containers[0].env[0].value", Rule: "env", Message: quote}}})
		v := Decide(State{Plan: p})
		for what, text := range map[string]string{"values error": p.ValuesErrors[0].Message, "violation": p.Violations[0].Message, "verdict": v.Message} {
			if i := strings.Index(text, secret[:4]); i >= 0 {
				t.Errorf("full=%v: the %s shows the secret's start: %q", full, what, text[i:])
			}
			if !strings.Contains(text, mask.Hidden) {
				t.Errorf("full=%v: the %s does not say a value was hidden: %q", full, what, text[max(0, len(text)-80):])
			}
		}
	}
}
