package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestAddRevision: revisions are numbered on from the newest, the newest
// comes first, and the oldest go past capstanv1.MaxHistory.
func TestAddRevision(t *testing.T) {
	var h []capstanv1.Revision
	for i := 1; i <= capstanv1.MaxHistory+3; i++ {
		h = addRevision(h, capstanv1.Revision{AppliedHash: "h", AppliedAt: metav1.Now(), Number: 99})
		if h[0].Number != int64(i) {
			t.Fatalf("revision %d numbered %d", i, h[0].Number)
		}
		if want := min(i, capstanv1.MaxHistory); len(h) != want {
			t.Fatalf("after %d revisions the history holds %d, want %d", i, len(h), want)
		}
	}
	for i, r := range h {
		if want := int64(capstanv1.MaxHistory + 3 - i); r.Number != want {
			t.Fatalf("history[%d] is revision %d, want %d", i, r.Number, want)
		}
	}
}
