package controller

import (
	"context"
	"strings"
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/source"
	"capstan.dev/capstan/internal/values"
)

// TestPreviewHidesValuesErrorsBeforeTheyAreCut: a values error that
// quotes a secret value across the byte where status cuts it shows no
// start of the value in the plan the preview keeps, nor in the Blocked
// message the gates make of it: the preview gives the plan its mask, which
// hides the value before the cut.
func TestPreviewHidesValuesErrorsBeforeTheyAreCut(t *testing.T) {
	const secret = "s3cr3t-db-password-0123456789abcdef"
	s := &scope{addon: &capstanv1.Addon{}, artifact: &source.Artifact{}, cluster: &targetCluster{}, variables: &values.Variables{Secret: []string{secret}}}
	// Status keeps 1 KiB of the message: the value starts 15 bytes before.
	msg := strings.Repeat("x", 1<<10-3-15) + secret + " does not match the pattern"
	s.valuesErrors = []capstanv1.ValuesError{{Path: "/password", Rule: "pattern", Message: msg}}
	r := &AddonReconciler{}
	if _, err := r.preview(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	v := plan.Decide(plan.State{Plan: s.plan})
	for what, text := range map[string]string{"plan's values error": s.plan.ValuesErrors[0].Message, "Blocked message": v.Message} {
		if i := strings.Index(text, secret[:4]); i >= 0 {
			t.Errorf("the %s shows the secret value's start: %q", what, text[i:])
		}
	}
}
