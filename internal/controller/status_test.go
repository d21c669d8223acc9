package controller

import (
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

func TestSetConditions(t *testing.T) {
	tests := []struct {
		o                           outcome
		ready, reconciling, stalled metav1.ConditionStatus
	}{
		{outcome{Phase: capstanv1.PhaseSynced, Reason: "Synced"}, "True", "False", "False"},
		{outcome{Phase: capstanv1.PhaseProgressing, Reason: "Applying"}, "False", "True", "False"},
		{outcome{Phase: capstanv1.PhaseBlocked, Reason: "GuardrailViolations", Stalled: true}, "False", "False", "True"},
		{outcome{Phase: capstanv1.PhaseOutOfSync, Reason: "AwaitingApproval"}, "False", "False", "False"},
		{outcome{Phase: capstanv1.PhaseSuspended, Reason: "Suspended"}, "False", "False", "False"},
	}
	for _, tt := range tests {
		t.Run(string(tt.o.Phase), func(t *testing.T) {
			var s capstanv1.AddonStatus
			s.Conditions = []metav1.Condition{{Type: "Custom", Status: "True", Reason: "Mine", LastTransitionTime: metav1.Now()}}
			setConditions(&s, 7, tt.o)
			for typ, want := range map[string]metav1.ConditionStatus{"Ready": tt.ready, "Reconciling": tt.reconciling, "Stalled": tt.stalled} {
				c := apimeta.FindStatusCondition(s.Conditions, typ)
				if c == nil || c.Status != want || c.ObservedGeneration != 7 || c.Reason == "" {
					t.Fatalf("%s = %+v, want %s", typ, c, want)
				}
			}
			if apimeta.FindStatusCondition(s.Conditions, "Custom") == nil {
				t.Fatalf("a condition the controller does not own was wiped")
			}
			if s.Phase != tt.o.Phase || s.ObservedGeneration != 7 {
				t.Fatalf("phase %s generation %d", s.Phase, s.ObservedGeneration)
			}
		})
	}
}

func TestTransitionTimeChangesOnlyWithStatus(t *testing.T) {
	var s capstanv1.AddonStatus
	setConditions(&s, 1, outcome{Phase: capstanv1.PhaseOutOfSync, Reason: "AwaitingApproval", Message: "a"})
	first := apimeta.FindStatusCondition(s.Conditions, "Ready").LastTransitionTime
	time.Sleep(1100 * time.Millisecond)
	setConditions(&s, 2, outcome{Phase: capstanv1.PhaseBlocked, Reason: "ValuesErrors", Message: "b", Stalled: true})
	if got := apimeta.FindStatusCondition(s.Conditions, "Ready").LastTransitionTime; !got.Equal(&first) {
		t.Fatalf("Ready stayed False, yet its transition time moved")
	}
	setConditions(&s, 3, outcome{Phase: capstanv1.PhaseSynced, Reason: "Synced"})
	if got := apimeta.FindStatusCondition(s.Conditions, "Ready").LastTransitionTime; got.Equal(&first) {
		t.Fatalf("Ready became True, yet its transition time did not move")
	}
}
