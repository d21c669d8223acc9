package controller

import (
	"fmt"
	"strings"
	"testing"

	"capstan.dev/capstan/internal/values"
)

// TestSOPSFilePastTheBoundIsNotCounted: a SOPS file whose values take the
// folder past the bound is refused and not counted, so a later file that
// fits is admitted, and only the file that crossed the bound is named.
func TestSOPSFilePastTheBoundIsNotCounted(t *testing.T) {
	var tally values.SecretTally
	for n := range values.MaxSecretValues - 1 {
		tally.Add(fmt.Sprintf("variable-%05d", n))
	}
	admit := admitWithin(&tally)
	err := admit([]string{"file-one-a", "file-one-b"})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("hold %d secret values", values.MaxSecretValues+1)) {
		t.Errorf("a file past the bound: %v; want it refused, with the count it would have made", err)
	}
	if err := admit([]string{"file-two-a"}); err != nil {
		t.Errorf("a later file within the bound without the refused one: %v; want it admitted", err)
	}
	if err := admit([]string{"file-three-a"}); err == nil {
		t.Error("a file past the bound after the admitted one should be refused")
	}
}
