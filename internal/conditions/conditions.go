// Package conditions writes the kstatus conditions that every Capstan
// object reports (Ready, Reconciling and Stalled, with observedGeneration),
// in one way for the Addon and the AddonRepository controllers, so that
// `kubectl wait --for=condition=Ready` and kstatus read them alike.
package conditions

import (
	"unicode/utf8"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// The condition types Capstan owns. Any other condition on an object is
// kept as it is.
const (
	Ready       = capstanv1.ConditionReady
	Reconciling = capstanv1.ConditionReconciling
	Stalled     = capstanv1.ConditionStalled
)

// Owned lists the condition types Set writes.
var Owned = []string{Ready, Reconciling, Stalled}

// Summary is how one reconcile of an object ended.
type Summary struct {
	// Ready is true when the object is what its spec asks for.
	Ready bool
	// Reconciling is true while the controller is still working on it.
	Reconciling bool
	// Stalled is true when only a person can move it on.
	Stalled bool
	// Reason and Message say why, for every condition that is true, and
	// for Ready.
	Reason, Message string
}

// maxMessage bounds a condition's message, which the API server limits to
// 32 KiB.
const maxMessage = 32 << 10

// Set writes Ready, Reconciling and Stalled from s, each with
// observedGeneration. A transition time changes only when a condition's
// status changes. Conditions of other types are kept.
func Set(conds *[]metav1.Condition, generation int64, s Summary) {
	set := func(t string, status bool, reason, msg string) {
		c := metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: generation}
		if status {
			c.Status = metav1.ConditionTrue
		}
		Put(conds, c)
	}
	set(Ready, s.Ready, s.Reason, s.Message)
	if s.Reconciling {
		set(Reconciling, true, s.Reason, s.Message)
	} else {
		set(Reconciling, false, "Idle", "The controller is not working on this object.")
	}
	if s.Stalled {
		set(Stalled, true, s.Reason, s.Message)
	} else {
		set(Stalled, false, "Progressing", "Nothing stops the controller.")
	}
}

// Put writes one condition, of any type, as apimeta.SetStatusCondition
// does, with its message cut to the API server's limit. Every condition
// Capstan writes goes through it: a status with one message too long is
// refused whole, and each reconcile would be refused again while the
// conditions already stored, an old Ready=True among them, stayed.
func Put(conds *[]metav1.Condition, c metav1.Condition) {
	c.Message = Truncate(c.Message, maxMessage)
	apimeta.SetStatusCondition(conds, c)
}

// Truncate shortens s to at most n bytes, marking the cut, which falls
// between characters.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
