package controller

import (
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/render"
)

// TestLifecycleDecision is seed 000's hook table, with the retry of a
// failed post hook.
func TestLifecycleDecision(t *testing.T) {
	pending := func(event, hash string) *capstanv1.PendingHook {
		return &capstanv1.PendingHook{Event: event, Hash: hash}
	}
	cases := []struct {
		name      string
		applied   string
		pending   *capstanv1.PendingHook
		adopt     bool
		adopted   bool
		want      Lifecycle
		pre, post string
	}{
		{name: "first sync", want: LifecycleInstall, pre: "pre-install", post: "post-install"},
		{name: "adopting what runs", adopt: true, adopted: true, want: LifecycleNone},
		{name: "adopt set, nothing runs yet", adopt: true, want: LifecycleInstall, pre: "pre-install", post: "post-install"},
		{name: "render changed", applied: "old", want: LifecycleUpgrade, pre: "pre-upgrade", post: "post-upgrade"},
		{name: "nothing new", applied: "new", want: LifecycleNone},
		{name: "failed post-install, same render", applied: "new", pending: pending("post-install", "new"), want: LifecycleRetryPost, post: "post-install"},
		{name: "failed post-upgrade, same render", applied: "new", pending: pending("post-upgrade", "new"), want: LifecycleRetryPost, post: "post-upgrade"},
		{name: "failed post-install, then a new render", applied: "old", pending: pending("post-install", "old"), want: LifecycleUpgrade, pre: "pre-upgrade", post: "post-upgrade"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &scope{addon: &capstanv1.Addon{}, render: &render.Result{Hash: "new"}}
			s.addon.Spec.Adopt = c.adopt
			s.addon.Status.AppliedHash = c.applied
			s.addon.Status.PendingHook = c.pending
			s.previews = []plan.ObjectResult{{Adopted: c.adopted}}
			s.lifecycle = (&AddonReconciler{}).lifecycle(s)
			pre, post := s.events()
			if s.lifecycle != c.want || pre != c.pre || post != c.post {
				t.Errorf("lifecycle %q (%q, %q), want %q (%q, %q)", s.lifecycle, pre, post, c.want, c.pre, c.post)
			}
		})
	}
}
