package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFailedAfterApply: a failed object ends the wait after an apply once
// the grace after it has passed, with or without spec.healthTimeout.
func TestFailedAfterApply(t *testing.T) {
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-ago)} }
	cases := []struct {
		name    string
		failed  bool
		applied *metav1.Time
		want    bool
	}{
		{"failed within the grace", true, at(10 * time.Second), false},
		{"failed past the grace", true, at(31 * time.Second), true},
		{"failed, at the grace's end", true, at(30 * time.Second), true},
		{"failed, nothing applied", true, nil, true},
		{"in progress long after", false, at(time.Hour), false},
	}
	for _, c := range cases {
		if got := failedAfterApply(c.failed, c.applied, 30*time.Second, now); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
