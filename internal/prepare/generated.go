package prepare

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/render"
)

// RenderedObject finds the prepared object, or hook's object, that g
// names: one of Result.Generated, which names the namespace its object
// was put in, so that an object rendered without a namespace is not taken
// for another of the same kind and name in another namespace. It returns
// nil for what Prepare left out: an object marked never to be applied
// (apply.Ignored).
func RenderedObject(g render.Generated, objs []*unstructured.Unstructured, hooks []render.Hook) *unstructured.Unstructured {
	if g.Hook {
		objs = make([]*unstructured.Unstructured, 0, len(hooks))
		for _, h := range hooks {
			objs = append(objs, h.Object)
		}
	}
	group := schema.FromAPIVersionAndKind(g.APIVersion, g.Kind).Group
	for _, o := range objs {
		if o.GetName() != g.Name || o.GetKind() != g.Kind || o.GroupVersionKind().Group != group {
			continue
		}
		if o.GetNamespace() == g.Namespace {
			return o
		}
	}
	return nil
}

// RuleRandomValues names the violation of a restricted add-on's chart
// that renders a field, or a name, differently each time.
const RuleRandomValues = "random-values"

// RandomValues refuses what a restricted add-on's chart renders at random:
// a tenant's chart must render the same every time. A value it makes at
// random (genCA, randAlphaNum, now) would change on every sync, and a name
// it makes at random would create another object, or run another hook, on
// every sync. generated, objs and hooks are the prepared ones
// (Result.Generated, Objects, Hooks); the tests are left
// out, as they are checked when they run. namespace is the add-on's.
func RandomValues(generated []render.Generated, objs []*unstructured.Unstructured, hooks []render.Hook, namespace string) []capstanv1.Violation {
	checked := make(map[*unstructured.Unstructured]bool, len(objs)+len(hooks))
	for _, o := range objs {
		checked[o] = true
	}
	for _, h := range hooks {
		if !h.TestOnly() {
			checked[h.Object] = true
		}
	}
	var out []capstanv1.Violation
	for _, g := range generated {
		if !checked[RenderedObject(g, objs, hooks)] {
			continue // marked never to be applied (apply.Ignored), or a test, checked when it runs
		}
		ref := capstanv1.ObjectRef{APIVersion: g.APIVersion, Kind: g.Kind, Namespace: namespace, Name: g.Name}
		if g.RandomName() {
			out = append(out, capstanv1.Violation{Object: ref, Path: "metadata.name", Rule: RuleRandomValues,
				Message: "the chart names this object differently each time (randAlphaNum, uuidv4, now…), so every sync would create another; give it a fixed name"})
			continue
		}
		for _, p := range g.Paths {
			out = append(out, capstanv1.Violation{Object: ref, Path: strings.Join(p, "."), Rule: RuleRandomValues,
				Message: "the chart renders this field differently each time (genCA, randAlphaNum, now…); declare the value in values.schema.json with x-capstan-generate, which Capstan generates once and keeps"})
		}
	}
	return out
}
