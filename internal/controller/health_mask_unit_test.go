package controller

import (
	"context"
	"strings"
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/values"
)

// TestHealthReasonMaskedBeforeCut: an object's status message that quotes
// a secret value across the length a reason is cut to shows no part of
// it in the Healthy condition: the reason is masked whole, then cut.
func TestHealthReasonMaskedBeforeCut(t *testing.T) {
	const secret = "s3cr3t-db-password-0123456789abcdef"
	s := &scope{addon: &capstanv1.Addon{}, variables: &values.Variables{Secret: []string{secret}}}
	obj := healthObj("example.com/v1", "Database", withGeneration(1))
	// The reason starts "Database apps/x: "; the value starts a few bytes
	// before maxReason and ends after it.
	prefix := "Database apps/x: "
	msg := strings.Repeat("x", maxReason-len(prefix)-len("connect with ")-15) + "connect with " + secret + " failed: " + strings.Repeat("y", 100)
	live := healthObj("example.com/v1", "Database", withGeneration(1),
		withConditions(map[string]any{"type": "Ready", "status": "False", "reason": "ConnectFailed", "message": msg, "observedGeneration": int64(1)}))
	r := &AddonReconciler{}
	j := &judgement{}
	if err := r.judgeObject(context.Background(), s, nil, nil, j, obj, live, false, false); err != nil {
		t.Fatal(err)
	}
	c := j.condition(1)
	if len(j.notCurrent) != 1 {
		t.Fatalf("the object should not be Current, got %q", c.Message)
	}
	if strings.Contains(c.Message, secret[:8]) {
		t.Errorf("the Healthy condition shows a part of the secret value: ...%s", c.Message[len(c.Message)-60:])
	}
	if !strings.HasSuffix(c.Message, "...") {
		t.Errorf("the reason should still be cut, got %d bytes", len(c.Message))
	}
}
