package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/render"
)

// TestContinuesSyncIsWorkedOutOnce: whether a sync goes on from one a
// stop left half-way is decided once a reconcile, at its first use once
// the preview has the plan's changes, and every later use (the gate, the
// sync's record) gets that answer; the decision itself still holds a
// plan that changes what was not approved, or a new request.
func TestContinuesSyncIsWorkedOutOnce(t *testing.T) {
	stopped := func(changes ...string) *scope {
		return &scope{
			addon: &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Generation: 2},
				Spec: capstanv1.AddonSpec{SyncRequest: 5},
				Status: capstanv1.AddonStatus{LastSyncRequest: 4, SyncInProgress: &capstanv1.SyncInProgress{
					Plan: "sha256:p", SyncRequest: 5, Generation: 2, RenderHash: "sha256:r", Changes: []string{"a", "b", "c"}}}},
			render:  &render.Result{Hash: "sha256:r"},
			changes: changes,
		}
	}
	for _, c := range []struct {
		name string
		s    *scope
		want bool
	}{
		{"what is left of the approved plan", stopped("b", "c"), true},
		{"nothing left to change", stopped(), true},
		{"a change that was not approved", stopped("b", "d"), false},
		{"no sync began", func() *scope { s := stopped("a"); s.addon.Status.SyncInProgress = nil; return s }(), false},
		{"a new request", func() *scope { s := stopped("a"); s.addon.Spec.SyncRequest = 6; return s }(), false},
		{"another render", func() *scope { s := stopped("a"); s.render = &render.Result{Hash: "sha256:other"}; return s }(), false},
		{"another generation", func() *scope { s := stopped("a"); s.addon.Generation = 3; return s }(), false},
		{"no render", func() *scope { s := stopped("a"); s.render = nil; return s }(), false},
	} {
		if got := c.s.continuesSync(); got != c.want {
			t.Errorf("%s: %v; want %v", c.name, got, c.want)
		}
	}
	// Once worked out, the answer is the reconcile's: the later uses do
	// not compare the changes with the approved plan again.
	s := stopped("a")
	if !s.continuesSync() {
		t.Fatal("a sync that goes on: no")
	}
	s.changes = []string{"z"}
	if !s.continuesSync() {
		t.Error("the second use worked the answer out again; want the first answer kept for the reconcile")
	}
}
