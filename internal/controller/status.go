package controller

import (
	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/conditions"
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
// following the kstatus conventions (conditions.Set), and the phase.
func setConditions(status *capstanv1.AddonStatus, generation int64, o outcome) {
	conditions.Set(&status.Conditions, generation, conditions.Summary{
		Ready:       o.Phase == capstanv1.PhaseSynced,
		Reconciling: o.Phase == capstanv1.PhaseProgressing || o.Phase == capstanv1.PhaseDeleting,
		Stalled:     o.Stalled,
		Reason:      o.Reason,
		Message:     o.Message,
	})
	status.Phase = o.Phase
	status.ObservedGeneration = generation
}

func truncate(s string, n int) string { return conditions.Truncate(s, n) }
