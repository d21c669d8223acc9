package controller

import (
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// outcome is how one reconcile ended, before it becomes conditions.
type outcome struct {
	Phase   capstanv1.Phase
	Reason  string
	Message string
	// Stalled is true when only a person can move the add-on on.
	Stalled bool
}

// setConditions writes Ready, Reconciling and Stalled from an outcome,
// following the kstatus conventions. A transition time changes only when a
// condition's status changes. Conditions the controller does not own are
// kept.
func setConditions(status *capstanv1.AddonStatus, generation int64, o outcome) {
	ready := metav1.ConditionFalse
	if o.Phase == capstanv1.PhaseSynced {
		ready = metav1.ConditionTrue
	}
	reconciling := metav1.ConditionFalse
	if o.Phase == capstanv1.PhaseProgressing || o.Phase == capstanv1.PhaseDeleting {
		reconciling = metav1.ConditionTrue
	}
	stalled := metav1.ConditionFalse
	if o.Stalled {
		stalled = metav1.ConditionTrue
	}
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		apimeta.SetStatusCondition(&status.Conditions, metav1.Condition{
			Type: t, Status: s, Reason: reason, Message: truncate(msg, 32<<10), ObservedGeneration: generation,
		})
	}
	set(capstanv1.ConditionReady, ready, o.Reason, o.Message)
	if reconciling == metav1.ConditionTrue {
		set(capstanv1.ConditionReconciling, reconciling, o.Reason, o.Message)
	} else {
		set(capstanv1.ConditionReconciling, reconciling, "Idle", "The controller is not working on this add-on.")
	}
	if o.Stalled {
		set(capstanv1.ConditionStalled, stalled, o.Reason, o.Message)
	} else {
		set(capstanv1.ConditionStalled, stalled, "Progressing", "Nothing stops the controller.")
	}
	status.Phase = o.Phase
	status.ObservedGeneration = generation
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
