package controller

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/render"
)

// TestItemsOfAHookListAreNotPruned: an item of a chart's List that is a
// hook was applied as a plain object by a Capstan that read each item's
// own annotations, and is in the inventory; the render that makes it a
// hook spares it from the prune, as a folder's object that became a hook
// is, rather than delete a running object no hook may make again (a
// pre-install hook runs at no upgrade). A chart's other hooks were never
// applied, and spare nothing.
func TestItemsOfAHookListAreNotPruned(t *testing.T) {
	cm := func(name string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("v1")
		o.SetKind("ConfigMap")
		o.SetNamespace("apps")
		o.SetName(name)
		return o
	}
	item, hook := cm("from-a-list"), cm("a-hook")
	s := &scope{
		addon:   &capstanv1.Addon{},
		profile: capstanv1.ProfileCluster,
		render:  &render.Result{},
		hooks: []render.Hook{
			{Object: item, Events: []string{"pre-install"}, Annotation: "helm.sh/hook", List: true},
			{Object: hook, Events: []string{"pre-install"}, Annotation: "helm.sh/hook"},
		},
	}
	s.addon.Status.Inventory = capstanv1.IDsOf([]capstanv1.ObjectRef{capstanv1.RefOf(item), capstanv1.RefOf(hook)})
	spared := s.leftOutOfInventory()
	if len(spared) != 1 || spared[0].Ref != capstanv1.RefOf(item) || spared[0].KeptBy != "helm.sh/hook: pre-install (a hook now)" {
		t.Fatalf("spared %+v; want only the List's item, a hook now", spared)
	}
	// A restricted add-on prunes what its chart leaves out: a tenant
	// cannot keep an object past the prune by wrapping it in a hook List.
	s.profile = capstanv1.ProfileRestricted
	if spared := s.leftOutOfInventory(); len(spared) != 0 {
		t.Fatalf("restricted: spared %+v; want nothing", spared)
	}
}

// TestUnknownDeletePolicyNotice: a delete policy that neither Helm nor,
// for a folder's hook, Argo CD knows does nothing, and with no known one
// beside it the default before-hook-creation does not apply either; the
// plan says so in a notice on the hook, naming the known policies.
func TestUnknownDeletePolicyNotice(t *testing.T) {
	hook := func(folder bool, annotation string, policies ...string) render.Hook {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("batch/v1")
		o.SetKind("Job")
		o.SetNamespace("apps")
		o.SetName("migrate")
		o.SetAnnotations(map[string]string{annotation: strings.Join(policies, ",")})
		return render.Hook{Object: o, Events: []string{"pre-upgrade"}, DeletePolicies: policies, Template: "app/templates/migrate.yaml", Folder: folder}
	}
	const helmDelete, argoDelete = "helm.sh/hook-delete-policy", render.ArgoHookDeleteAnnotation
	for _, c := range []struct {
		name      string
		hook      render.Hook
		want, not []string
	}{
		{"a typo alone", hook(false, helmDelete, "before-hook-creaton"),
			[]string{helmDelete, "app/templates/migrate.yaml", `"before-hook-creaton"`, "the default, before-hook-creation, does not apply either", "before-hook-creation, hook-succeeded, hook-failed"}, nil},
		{"an empty policy", hook(false, helmDelete, ""),
			[]string{helmDelete, `"" (empty`, "the default, before-hook-creation, does not apply either"}, nil},
		{"a typo beside a known policy", hook(false, helmDelete, "hook-succeeded", "hook-faild"),
			[]string{`"hook-faild"`}, []string{`"hook-succeeded"`, "does not apply either"}},
		{"a folder's typo", hook(true, argoDelete, "hooksucceded"),
			[]string{argoDelete, `"hooksucceded"`, "BeforeHookCreation, HookSucceeded, HookFailed"}, nil},
		{"known policies", hook(false, helmDelete, "before-hook-creation", "hook-succeeded", "hook-failed"), nil, nil},
		{"a folder's known policy", hook(true, argoDelete, "hook-succeeded"), nil, nil},
		{"no policy", hook(false, "other", []string{}...), nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			notices := hookNotices([]render.Hook{c.hook})
			if len(c.want) == 0 {
				if len(notices) != 0 {
					t.Fatalf("notices %+v; want none", notices)
				}
				return
			}
			if len(notices) != 1 || notices[0].Path != "hooks/Job/migrate" {
				t.Fatalf("notices %+v; want one on hooks/Job/migrate", notices)
			}
			for _, w := range c.want {
				if !strings.Contains(notices[0].Message, w) {
					t.Errorf("%q; want %q in it", notices[0].Message, w)
				}
			}
			for _, n := range c.not {
				if strings.Contains(notices[0].Message, n) {
					t.Errorf("%q; want no %q in it", notices[0].Message, n)
				}
			}
		})
	}
}
