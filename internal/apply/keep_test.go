package apply

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKeptByPolicy reads Helm's resource policy as Helm does.
func TestKeptByPolicy(t *testing.T) {
	for value, want := range map[string]bool{"keep": true, " Keep ": true, "KEEP": true, "delete": false, "": false, "keep-me": false} {
		m := &metav1.ObjectMeta{Annotations: map[string]string{ResourcePolicyAnnotation: value}}
		if got := KeptByPolicy(m); got != want {
			t.Errorf("%q: %v, want %v", value, got, want)
		}
	}
	if KeptByPolicy(&metav1.ObjectMeta{}) {
		t.Error("an object without the annotation is kept")
	}
}
