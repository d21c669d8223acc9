package controller

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/render"
)

// TestRefusedDeleteHooks decides which violations keep an uninstall from
// running its delete hooks: a delete hook's own, and the Addon's spec's or
// chart's; never another object's, nor a hook's of another event alone.
func TestRefusedDeleteHooks(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "blog"}}
	hook := func(name string, events ...string) render.Hook {
		obj := &unstructured.Unstructured{}
		obj.SetAPIVersion("v1")
		obj.SetKind("ConfigMap")
		obj.SetNamespace("tenant")
		obj.SetName(name)
		return render.Hook{Object: obj, Events: events}
	}
	cm := func(ns, name string) capstanv1.ObjectRef {
		return capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: name}
	}
	spec := capstanv1.ObjectRef{APIVersion: capstanv1.GroupVersion.String(), Kind: "Addon", Namespace: "tenant", Name: "blog"}
	otherAddon := capstanv1.ObjectRef{APIVersion: capstanv1.GroupVersion.String(), Kind: "Addon", Namespace: "tenant", Name: "shop"}
	hooks := []render.Hook{hook("pre", "pre-delete"), hook("post", "post-delete"), hook("both", "pre-install", "pre-delete"), hook("install", "pre-install")}
	for _, tc := range []struct {
		name  string
		hooks []render.Hook
		on    capstanv1.ObjectRef
		want  bool
	}{
		{"a pre-delete hook", hooks, cm("tenant", "pre"), true},
		{"a post-delete hook", hooks, cm("tenant", "post"), true},
		{"a hook of an install and a delete event", hooks, cm("tenant", "both"), true},
		{"a pre-install hook alone", hooks, cm("tenant", "install"), false},
		{"an object that is no hook", hooks, cm("tenant", "settings"), false},
		{"the Addon's spec or chart", hooks, spec, true},
		{"another Addon", hooks, otherAddon, false},
		{"the Addon's spec, with no delete hook to run", hooks[3:], spec, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := capstanv1.Violation{Object: tc.on, Rule: "namespace-not-allowed"}
			got := refusedDeleteHooks(addon, tc.hooks, []capstanv1.Violation{v})
			if (len(got) > 0) != tc.want {
				t.Errorf("refused = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestWithoutDeleteEvents takes the delete events out of every hook and
// keeps the hooks, and the caller's, as they were.
func TestWithoutDeleteEvents(t *testing.T) {
	obj := &unstructured.Unstructured{}
	in := []render.Hook{{Object: obj, Events: []string{"pre-install", "pre-delete"}}, {Object: obj, Events: []string{"post-delete"}}}
	out := withoutDeleteEvents(in)
	if len(out) != 2 || !slices.Equal(out[0].Events, []string{"pre-install"}) || len(out[1].Events) != 0 {
		t.Errorf("got %+v", out)
	}
	if !slices.Equal(in[0].Events, []string{"pre-install", "pre-delete"}) {
		t.Errorf("the render's hooks changed: %+v", in[0].Events)
	}
}

// TestNeverApplied: an Addon with nothing in its inventory and no apply
// recorded was never applied; any one of them says it was.
func TestNeverApplied(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name   string
		status capstanv1.AddonStatus
		want   bool
	}{
		{"nothing", capstanv1.AddonStatus{}, true},
		{"an inventory (an install that began)", capstanv1.AddonStatus{Inventory: []capstanv1.ObjectID{{ObjectRef: capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: "b"}}}}, false},
		{"an applied render", capstanv1.AddonStatus{AppliedHash: "abc"}, false},
		{"an apply's time", capstanv1.AddonStatus{LastAppliedTime: &now}, false},
		{"a revision", capstanv1.AddonStatus{History: []capstanv1.Revision{{Number: 1}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := neverApplied(&capstanv1.Addon{Status: tc.status}); got != tc.want {
				t.Errorf("neverApplied = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDeleteHooksAhead decides whether a refusal of the delete hooks is
// worth a DeleteHooksRefused event at this look: while a refused hook is
// still to run. A chart whose signature failed is not rendered, so its
// hooks are unknown: it is said at the look that would run the pre-delete
// hooks, and not again at each look of an uninstall that waits for a wave.
func TestDeleteHooksAhead(t *testing.T) {
	hook := func(events ...string) render.Hook {
		obj := &unstructured.Unstructured{}
		obj.SetAPIVersion("v1")
		obj.SetKind("ConfigMap")
		obj.SetName("h")
		return render.Hook{Object: obj, Events: events}
	}
	preDone := capstanv1.AddonStatus{PreHooksDone: &capstanv1.PendingHook{Event: "pre-delete"}}
	for _, tc := range []struct {
		name    string
		status  capstanv1.AddonStatus
		hooks   []render.Hook
		unknown bool
		want    bool
	}{
		{name: "a pre-delete hook before the pre-delete stage", hooks: []render.Hook{hook("pre-delete")}, want: true},
		{name: "a pre-delete hook after it", status: preDone, hooks: []render.Hook{hook("pre-delete")}},
		{name: "a post-delete hook after it", status: preDone, hooks: []render.Hook{hook("post-delete")}, want: true},
		{name: "no delete hook", hooks: []render.Hook{hook("pre-install")}},
		{name: "an unsigned chart before the pre-delete stage", unknown: true, want: true},
		{name: "an unsigned chart at a later look", status: preDone, unknown: true},
		{name: "a pre-install stage that is over is not the pre-delete's", status: capstanv1.AddonStatus{PreHooksDone: &capstanv1.PendingHook{Event: "pre-install"}}, unknown: true, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := deleteHooksAhead(&capstanv1.Addon{Status: tc.status}, tc.hooks, tc.unknown); got != tc.want {
				t.Errorf("deleteHooksAhead = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRenderFailedAhead decides whether a delete render that failed for
// good is worth a DeleteHooksRefused event: its hooks are unknown, so it
// is said at the look that would run the pre-delete hooks, and at a retry
// of post-delete hooks an earlier render found; not again at a later look
// of an uninstall that had none pending.
func TestRenderFailedAhead(t *testing.T) {
	preDone := &capstanv1.PendingHook{Event: "pre-delete"}
	for _, tc := range []struct {
		name   string
		status capstanv1.AddonStatus
		want   bool
	}{
		{name: "before the pre-delete stage", want: true},
		{name: "after it, with no post-delete hook pending", status: capstanv1.AddonStatus{PreHooksDone: preDone}},
		{name: "after it, with post-delete hooks pending", status: capstanv1.AddonStatus{PreHooksDone: preDone, PendingHook: &capstanv1.PendingHook{Event: "post-delete"}}, want: true},
		{name: "a pending post-install event is not the uninstall's", status: capstanv1.AddonStatus{PreHooksDone: preDone, PendingHook: &capstanv1.PendingHook{Event: "post-install"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := renderFailedAhead(&capstanv1.Addon{Status: tc.status}); got != tc.want {
				t.Errorf("renderFailedAhead = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestNothingApplied lets an uninstall go without selecting a cluster only
// when nothing was applied and no hook ran, is pending or was recorded.
func TestNothingApplied(t *testing.T) {
	hook := &capstanv1.PendingHook{Event: "pre-delete"}
	for _, tc := range []struct {
		name   string
		status capstanv1.AddonStatus
		want   bool
	}{
		{"nothing", capstanv1.AddonStatus{}, true},
		{"an applied render", capstanv1.AddonStatus{AppliedHash: "abc"}, false},
		{"a hook that runs", capstanv1.AddonStatus{Hook: &capstanv1.HookProgress{Event: "pre-install"}}, false},
		{"a pending post hook", capstanv1.AddonStatus{PendingHook: hook}, false},
		{"a stage recorded done", capstanv1.AddonStatus{PreHooksDone: hook}, false},
		{"SyncFail hooks", capstanv1.AddonStatus{SyncFailHooks: hook}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nothingApplied(&capstanv1.Addon{Status: tc.status}); got != tc.want {
				t.Errorf("nothingApplied = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestInventoryHere finds an inventory recorded in the controller's own
// cluster under a cluster-profile spec.kubeConfig: a former cluster,
// whatever the kubeconfig holds. Unrecorded, or recorded remotely, it
// needs the kubeconfig to say.
func TestInventoryHere(t *testing.T) {
	kc := &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: "edge"}}
	for _, tc := range []struct {
		name    string
		profile capstanv1.Profile
		kc      *capstanv1.KubeConfigReference
		at      *capstanv1.InventoryCluster
		want    bool
	}{
		{"recorded here, a remote named", capstanv1.ProfileCluster, kc, &capstanv1.InventoryCluster{}, true},
		{"recorded remotely", capstanv1.ProfileCluster, kc, &capstanv1.InventoryCluster{Identity: "sha256:1", Server: "https://10.0.0.1"}, false},
		{"not recorded", capstanv1.ProfileCluster, kc, nil, false},
		{"no remote named", capstanv1.ProfileCluster, nil, &capstanv1.InventoryCluster{}, false},
		{"restricted, which never goes remote", capstanv1.ProfileRestricted, kc, &capstanv1.InventoryCluster{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &capstanv1.Addon{Spec: capstanv1.AddonSpec{KubeConfig: tc.kc}, Status: capstanv1.AddonStatus{InventoryCluster: tc.at}}
			if got := inventoryHere(&scope{addon: a, profile: tc.profile}); got != tc.want {
				t.Errorf("inventoryHere = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestOrphanHint names what turns a deletion into an Orphan one: the
// annotation, the policy, or both.
func TestOrphanHint(t *testing.T) {
	annotated := map[string]string{capstanv1.UninstallAnnotation: "true"}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		policy      capstanv1.DeletionPolicy
		profile     capstanv1.Profile
		want        []string
	}{
		{"the annotation", annotated, "", capstanv1.ProfileCluster, []string{capstanv1.UninstallAnnotation}},
		{"the policy", nil, capstanv1.DeletionDelete, capstanv1.ProfileCluster, []string{"spec.deletionPolicy: Orphan"}},
		{"both", annotated, capstanv1.DeletionDelete, capstanv1.ProfileCluster, []string{capstanv1.UninstallAnnotation, "spec.deletionPolicy: Orphan"}},
		{"a restricted add-on's default", nil, "", capstanv1.ProfileRestricted, []string{"spec.deletionPolicy: Orphan"}},
		{"a restricted add-on's default, marked too", annotated, "", capstanv1.ProfileRestricted, []string{capstanv1.UninstallAnnotation, "spec.deletionPolicy: Orphan"}},
		{"a restricted add-on set to Orphan, marked", annotated, capstanv1.DeletionOrphan, capstanv1.ProfileRestricted, []string{capstanv1.UninstallAnnotation}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}, Spec: capstanv1.AddonSpec{DeletionPolicy: tc.policy}}
			got := orphanHint(a, tc.profile)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("orphanHint = %q, want it to name %q", got, w)
				}
			}
			if len(tc.want) == 1 && strings.Contains(got, " and ") {
				t.Errorf("orphanHint = %q names more than %q", got, tc.want[0])
			}
		})
	}
}
