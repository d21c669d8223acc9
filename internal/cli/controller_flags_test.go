package cli

import (
	"strings"
	"testing"
)

// TestControllerFlagsRefused: the controller's flags that would be read
// as something else are refused before it starts, with what to give.
func TestControllerFlagsRefused(t *testing.T) {
	for _, share := range []float64{0, -0.5, 1.5} {
		if err := checkPruneThreshold(share); err == nil || !strings.Contains(err.Error(), "more than 0 and at most 1") {
			t.Errorf("--prune-approval-threshold %g: %v", share, err)
		}
	}
	for _, share := range []float64{0.001, 0.5, 1} {
		if err := checkPruneThreshold(share); err != nil {
			t.Errorf("--prune-approval-threshold %g: %v", share, err)
		}
	}
	for names, want := range map[string]string{"Bad_Name": "is not a Secret's name", "a,a": "is given twice"} {
		if err := checkNotifySecrets(strings.Split(names, ",")); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--notify-secret %s: %v", names, err)
		}
	}
}
