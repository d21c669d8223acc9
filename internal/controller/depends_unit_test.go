package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestNotReady: what a dependency's status says to the add-ons that depend
// on it. A Degraded one counts as Ready for its generation: it is applied
// and was healthy, and holding its dependents would spread its trouble.
func TestNotReady(t *testing.T) {
	addon := func(gen int64, phase capstanv1.Phase, ready metav1.ConditionStatus, observed int64) *capstanv1.Addon {
		a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Generation: gen}}
		a.Status.Phase = phase
		if ready != "" {
			a.Status.Conditions = []metav1.Condition{{Type: capstanv1.ConditionReady, Status: ready, Reason: string(phase), ObservedGeneration: observed}}
		}
		return a
	}
	removed := addon(1, capstanv1.PhaseSynced, metav1.ConditionTrue, 1)
	removed.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	cases := []struct {
		name string
		a    *capstanv1.Addon
		want string
	}{
		{"Synced", addon(2, capstanv1.PhaseSynced, metav1.ConditionTrue, 2), ""},
		{"Degraded", addon(2, capstanv1.PhaseDegraded, metav1.ConditionFalse, 2), ""},
		{"Degraded at an older generation", addon(3, capstanv1.PhaseDegraded, metav1.ConditionFalse, 2), "its latest change is not synced yet"},
		{"rolling out", addon(2, capstanv1.PhaseProgressing, metav1.ConditionFalse, 2), "Progressing: Progressing"},
		{"Failed", addon(2, capstanv1.PhaseFailed, metav1.ConditionFalse, 2), "Failed: Failed"},
		{"not reconciled", addon(1, "", "", 0), "not reconciled yet"},
		{"being removed", removed, "being removed"},
	}
	for _, c := range cases {
		if got := notReady(c.a); got != c.want {
			t.Errorf("%s: %q; want %q", c.name, got, c.want)
		}
	}
}
