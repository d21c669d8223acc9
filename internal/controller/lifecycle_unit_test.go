package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/render"
)

// TestLifecycleDecision is Helm's hook table as Capstan runs it, with the retry of a
// failed post hook.
func TestLifecycleDecision(t *testing.T) {
	pending := func(event, hash string) *capstanv1.PendingHook {
		return &capstanv1.PendingHook{Event: event, Hash: hash}
	}
	cases := []struct {
		name      string
		applied   string
		pending   *capstanv1.PendingHook
		preDone   *capstanv1.PendingHook
		adopt     bool
		adopted   bool
		folder    bool
		changes   bool
		prunes    bool
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
		{name: "stopped after pre-install, same render", preDone: pending("pre-install", "new"), want: LifecycleInstall, post: "post-install"},
		{name: "stopped after pre-install, then a new render", preDone: pending("pre-install", "old"), want: LifecycleUpgrade, pre: "pre-upgrade", post: "post-upgrade"},
		// The install began before the pre-upgrade hooks: it never
		// becomes an install again.
		{name: "stopped after pre-upgrade of a begun install, same render", preDone: pending("pre-upgrade", "new"), want: LifecycleUpgrade, post: "post-upgrade"},
		{name: "stopped after pre-upgrade of a begun install, then a new render", preDone: pending("pre-upgrade", "old"), want: LifecycleUpgrade, pre: "pre-upgrade", post: "post-upgrade"},
		// A folder's new render (a new commit) runs hooks only when it
		// changes an object, or when a post event is pending.
		{name: "folder, first sync", folder: true, want: LifecycleInstall, pre: "pre-install", post: "post-install"},
		{name: "folder, new commit, no object changes", folder: true, applied: "old", want: LifecycleNone},
		{name: "folder, new commit, an object changes", folder: true, applied: "old", changes: true, want: LifecycleUpgrade, pre: "pre-upgrade", post: "post-upgrade"},
		{name: "folder, new commit, a prune", folder: true, applied: "old", prunes: true, want: LifecycleUpgrade, pre: "pre-upgrade", post: "post-upgrade"},
		{name: "folder, failed post-upgrade, then a commit that changes nothing", folder: true, applied: "old", pending: pending("post-upgrade", "old"), want: LifecycleRetryPost, post: "post-upgrade"},
		{name: "folder, failed post-upgrade, then a commit that changes an object", folder: true, applied: "old", changes: true, pending: pending("post-upgrade", "old"), want: LifecycleUpgrade, pre: "pre-upgrade", post: "post-upgrade"},
		{name: "folder, failed post-upgrade, same render", folder: true, applied: "new", pending: pending("post-upgrade", "new"), want: LifecycleRetryPost, post: "post-upgrade"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &scope{addon: &capstanv1.Addon{}, render: &render.Result{Hash: "new", Folder: c.folder}}
			s.addon.Spec.Adopt = c.adopt
			s.addon.Status.AppliedHash = c.applied
			s.addon.Status.PendingHook = c.pending
			s.addon.Status.PreHooksDone = c.preDone
			s.previews = []plan.ObjectResult{{Adopted: c.adopted}}
			if c.changes {
				s.previews[0].Action = capstanv1.ActionUpdate
			} else {
				s.previews[0].Action = capstanv1.ActionUnchanged
			}
			if c.prunes {
				s.prune = []capstanv1.ObjectRef{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: "old"}}
			}
			s.lifecycle = (&AddonReconciler{}).lifecycle(s)
			pre, post := s.events()
			if s.lifecycle != c.want || pre != c.pre || post != c.post {
				t.Errorf("lifecycle %q (%q, %q), want %q (%q, %q)", s.lifecycle, pre, post, c.want, c.pre, c.post)
			}
		})
	}
}

// TestTransientHookErrors: a hook the API server could not take for a
// moment is retried with backoff; a hook that failed or timed out stalls.
func TestTransientHookErrors(t *testing.T) {
	gr := schema.GroupResource{Group: "batch", Resource: "jobs"}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"too many requests", &hooks.Error{Reason: hooks.ReasonCreateFailed, Err: apierrors.NewTooManyRequests("slow down", 1)}, true},
		{"server timeout", &hooks.Error{Reason: hooks.ReasonCreateFailed, Err: apierrors.NewServerTimeout(gr, "create", 1)}, true},
		{"conflict", &hooks.Error{Reason: hooks.ReasonCreateFailed, Err: apierrors.NewConflict(gr, "db-seed", errors.New("terminating"))}, true},
		{"forbidden", &hooks.Error{Reason: hooks.ReasonCreateFailed, Err: apierrors.NewForbidden(gr, "db-seed", errors.New("no"))}, false},
		{"job failed", &hooks.Error{Reason: "BackoffLimitExceeded"}, false},
		{"timeout", &hooks.Error{Reason: hooks.ReasonTimeout, Err: context.DeadlineExceeded}, false},
		{"not a hook error", errors.New("boom"), false},
	}
	for _, c := range cases {
		if got := transientHookError(fmt.Errorf("wrapped: %w", c.err)); got != c.want {
			t.Errorf("%s: transient = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestKeepIdentity: the watch cache keeps no annotation (a Secret's
// last-applied-configuration can hold its data) and only Capstan's labels.
func TestKeepIdentity(t *testing.T) {
	o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: "s", Namespace: "n", ResourceVersion: "7",
		Labels:      map[string]string{capstanv1.AddonLabel: "a", capstanv1.ManagedByLabel: "capstan", "team": "x"},
		Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"password":"c2VjcmV0"}}`},
	}}
	out, err := keepIdentity(o)
	if err != nil {
		t.Fatal(err)
	}
	m := out.(*metav1.PartialObjectMetadata)
	if m.Annotations != nil || len(m.Labels) != 2 || m.Labels["team"] != "" || m.ResourceVersion != "7" || m.Name != "s" {
		t.Errorf("kept %+v", m.ObjectMeta)
	}
}

// TestAdoptFormerHash: a folder applied by a Capstan whose render hash
// left the namespace out is the same render when its objects are where
// that apply put them, so the upgrade of Capstan adds no revision; when
// the target namespace changed meanwhile, its objects move, and it stays
// a new render.
func TestAdoptFormerHash(t *testing.T) {
	cm := func(ns string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		u.SetNamespace(ns)
		u.SetName("settings")
		return u
	}
	inventory := capstanv1.IDsOf([]capstanv1.ObjectRef{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: "settings"}})
	cases := []struct {
		name        string
		applied     string
		former      string
		objectsIn   string
		pending     string
		wantApplied string
		wantPending string
	}{
		{name: "the render applied before", applied: "former", former: "former", objectsIn: "a", pending: "former", wantApplied: "new", wantPending: "new"},
		{name: "the target namespace changed", applied: "former", former: "former", objectsIn: "b", pending: "former", wantApplied: "former", wantPending: "former"},
		{name: "another render applied before", applied: "older", former: "former", objectsIn: "a", pending: "older", wantApplied: "older", wantPending: "older"},
		{name: "a render without a former hash", applied: "", former: "", objectsIn: "a", wantApplied: ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &scope{addon: &capstanv1.Addon{}, render: &render.Result{Hash: "new", FormerHash: c.former, Folder: true}}
			s.objects = []*unstructured.Unstructured{cm(c.objectsIn)}
			s.addon.Status.AppliedHash, s.addon.Status.Inventory = c.applied, inventory
			if c.pending != "" {
				s.addon.Status.PendingHook = &capstanv1.PendingHook{Event: "post-upgrade", Hash: c.pending}
			}
			s.adoptFormerHash()
			if got := s.addon.Status.AppliedHash; got != c.wantApplied {
				t.Errorf("appliedHash = %q, want %q", got, c.wantApplied)
			}
			if p := s.addon.Status.PendingHook; p != nil && p.Hash != c.wantPending {
				t.Errorf("pendingHook.hash = %q, want %q", p.Hash, c.wantPending)
			}
		})
	}
}
