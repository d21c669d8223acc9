package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestLapseOf: what objects that are not Current make of an add-on that
// has been healthy since its last apply. An autoscale, a rollout restart
// or an eviction is in progress for seconds and makes nothing Degraded;
// a failure does at once, and so does a rollout that outlasts the grace.
func TestLapseOf(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	grace := 10 * time.Minute
	cases := []struct {
		name     string
		failed   bool
		warned   bool
		since    time.Time
		degraded bool
		left     time.Duration
	}{
		{"first found in progress (an HPA scaling 3 to 5)", false, false, now, false, grace},
		{"in progress for a while", false, false, now.Add(-4 * time.Minute), false, 6 * time.Minute},
		{"in progress past the grace", false, false, now.Add(-10*time.Minute - time.Second), true, 0},
		{"in progress for the grace exactly", false, false, now.Add(-grace), true, 0},
		{"failed, first found", true, false, now, true, 0},
		{"in progress, but Degraded already (it failed before)", false, true, now.Add(-time.Minute), true, 0},
	}
	for _, c := range cases {
		degraded, left := lapseOf(c.failed, c.warned, c.since, grace, now)
		if degraded != c.degraded || left != c.left {
			t.Errorf("%s: degraded %v, left %s; want %v, %s", c.name, degraded, left, c.degraded, c.left)
		}
	}
}

// TestNotCurrentSince: the grace counts from the Healthy condition's turn
// to False, kept in status over looks and restarts; a look that finds the
// objects not Current first starts it.
func TestNotCurrentSince(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	healthy := func(st metav1.ConditionStatus, at time.Time) *capstanv1.AddonStatus {
		return &capstanv1.AddonStatus{Conditions: []metav1.Condition{{Type: capstanv1.ConditionHealthy, Status: st, LastTransitionTime: metav1.NewTime(at)}}}
	}
	cases := []struct {
		name string
		st   *capstanv1.AddonStatus
		want time.Time
	}{
		{"no Healthy condition", &capstanv1.AddonStatus{}, now},
		{"Healthy True until this look", healthy(metav1.ConditionTrue, now.Add(-time.Hour)), now},
		{"Healthy False for three minutes", healthy(metav1.ConditionFalse, now.Add(-3*time.Minute)), now.Add(-3 * time.Minute)},
		{"Healthy Unknown", healthy(metav1.ConditionUnknown, now.Add(-time.Hour)), now},
		{"a transition time ahead of this clock", healthy(metav1.ConditionFalse, now.Add(time.Minute)), now},
	}
	for _, c := range cases {
		if got := notCurrentSince(c.st, now); !got.Equal(c.want) {
			t.Errorf("%s: %s; want %s", c.name, got, c.want)
		}
	}
}

// TestInWarning: an add-on is in a warning while it is Failed, Blocked or
// Degraded, and through the phases on the way until it is Synced; one
// Synced that keeps warningSince for its incident's close is not.
func TestInWarning(t *testing.T) {
	since := &metav1.Time{Time: time.Now()}
	cases := []struct {
		name string
		st   capstanv1.AddonStatus
		was  capstanv1.Phase
		want bool
	}{
		{"Synced", capstanv1.AddonStatus{}, capstanv1.PhaseSynced, false},
		{"Synced, its incident's close not delivered yet", capstanv1.AddonStatus{WarningSince: since}, capstanv1.PhaseSynced, false},
		{"Degraded", capstanv1.AddonStatus{WarningSince: since}, capstanv1.PhaseDegraded, true},
		{"held by a gate after it was Degraded", capstanv1.AddonStatus{WarningSince: since}, capstanv1.PhaseOutOfSync, true},
		{"Degraded by a Capstan that kept no warningSince", capstanv1.AddonStatus{}, capstanv1.PhaseDegraded, true},
		{"Progressing, waiting on a dependency", capstanv1.AddonStatus{}, capstanv1.PhaseProgressing, false},
	}
	for _, c := range cases {
		if got := inWarning(&c.st, c.was); got != c.want {
			t.Errorf("%s: %v; want %v", c.name, got, c.want)
		}
	}
}
