package controller

import (
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
