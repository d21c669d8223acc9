package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/notify"
)

// TestBusyGitBudgetPostsNoTransition: a read refused for the busy git
// memory budget is a wait: the read after it is compared with what stood
// before the wait, also when this process has posted nothing of the
// repository yet (after a restart, or for a new repository), so that a
// repository that was synced posts no "Synced" and no close of an
// incident never opened, and one that was failing posts its warning once.
func TestBusyGitBudgetPostsNoTransition(t *testing.T) {
	repo := func(name string, ready metav1.ConditionStatus, reason string) *capstanv1.AddonRepository {
		r := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: name},
			Spec: capstanv1.AddonRepositorySpec{URL: "https://git.example/infra.git"}}
		if reason != "" {
			r.Status.Conditions = []metav1.Condition{{Type: capstanv1.ConditionReady, Status: ready, Reason: reason}}
		}
		return r
	}
	const (
		none = ""
		busy = ReasonGitMemoryBusy
	)
	type step struct {
		ready  metav1.ConditionStatus
		reason string
	}
	synced := step{metav1.ConditionTrue, ReasonSynced}
	failed := step{metav1.ConditionFalse, ReasonUnreadable}
	waited := step{metav1.ConditionFalse, busy}
	cases := []struct {
		name string
		// status is the repository's status as the cache holds it when
		// this process starts, then what each sync writes.
		status step
		syncs  []step
		// want is, per sync, the previous severity of the event it
		// posts, or "-" for none.
		want []string
	}{
		{name: "synced, busy after a restart, synced", status: synced, syncs: []step{waited, synced}, want: []string{"-", "-"}},
		{name: "synced, busy twice, synced", status: synced, syncs: []step{waited, waited, synced}, want: []string{"-", "-", "-"}},
		{name: "failing, busy after a restart, failing", status: failed, syncs: []step{waited, failed}, want: []string{"-", "-"}},
		{name: "failing, busy after a restart, synced", status: failed, syncs: []step{waited, synced},
			want: []string{"-", string(notify.SeverityWarning)}},
		{name: "new, busy, synced", status: step{reason: none}, syncs: []step{waited, synced}, want: []string{"-", ""}},
		{name: "new, busy, failing", status: step{reason: none}, syncs: []step{waited, failed}, want: []string{"-", ""}},
		{name: "busy at the restart, synced", status: waited, syncs: []step{synced}, want: []string{""}},
		{name: "synced, failing, busy, synced", status: synced, syncs: []step{failed, waited, synced},
			want: []string{string(notify.SeverityInfo), "-", string(notify.SeverityWarning)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &AddonRepositoryReconciler{}
			before := repo("infra", tc.status.ready, tc.status.reason)
			for i, s := range tc.syncs {
				after := repo("infra", s.ready, s.reason)
				got := "-"
				if e := r.transition(before, after); e != nil {
					got = string(e.PreviousSeverity)
				}
				if got != tc.want[i] {
					t.Fatalf("sync %d (%s): posted an event after a previous severity %q; want %q (\"-\": none)", i+1, s.reason, got, tc.want[i])
				}
				before = after
			}
		})
	}
}
