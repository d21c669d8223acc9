package plan

import (
	"encoding/json"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/render"
)

// GeneratedPlaceholder stands, in what a plan's hash covers, for a value
// the chart generates at random.
const GeneratedPlaceholder = "(generated at random)"

// Generated is what a chart generates at random in one render
// (render.Result.Generated, found by rendering it twice): a certificate
// from genCA, a password from randAlphaNum, a time from now, a random name.
//
// A plan's hash binds an approval to what a person can review. Such a
// value is new on every render, and renders are not kept, so a hash that
// covered it would change on every reconcile and no approval of a plan
// that creates such an object, or runs such a hook, would ever apply. The
// digests of those objects and hooks cover each generated field as
// GeneratedPlaceholder instead, and the render's inputs (the values, the
// chart, the release), so that an approval still goes stale for any
// change but the random bytes, even one inside a generated field (a host
// in a URL that also holds a random password). The sync applies the
// random values of the render it makes then: they were never reviewable.
type Generated struct {
	// Paths are each object's or hook's generated fields, by
	// ObjectRef.Key of the prepared object; a number indexes a list;
	// metadata.name (render.NamePath) when the chart names it at random.
	Paths map[string][][]string
	// Inputs identifies the render's inputs (render.Result.Hash).
	Inputs string
}

// pathsOf returns the generated fields of obj.
func (g Generated) pathsOf(obj *unstructured.Unstructured) [][]string {
	if len(g.Paths) == 0 {
		return nil
	}
	return g.Paths[capstanv1.RefOf(obj).Key()]
}

// RandomName reports whether the chart names obj at random.
func (g Generated) RandomName(obj *unstructured.Unstructured) bool {
	return slices.ContainsFunc(g.pathsOf(obj), func(p []string) bool { return slices.Equal(p, render.NamePath) })
}

// Reviewable returns a copy of obj with each of its generated fields set
// to GeneratedPlaceholder, or obj itself when it has none.
func (g Generated) Reviewable(obj *unstructured.Unstructured) *unstructured.Unstructured {
	paths := g.pathsOf(obj)
	if len(paths) == 0 {
		return obj
	}
	out := obj.DeepCopy()
	for _, p := range paths {
		render.SetFieldAt(out.Object, p, GeneratedPlaceholder)
	}
	return out
}

// CreateDigest is CreateDigest of obj as a person can review it: its
// generated fields as GeneratedPlaceholder, bound to the render's inputs.
// An object with no generated field has the digest CreateDigest gives it.
func (g Generated) CreateDigest(obj *unstructured.Unstructured) string {
	if len(g.pathsOf(obj)) == 0 {
		return CreateDigest(obj)
	}
	raw, _ := json.Marshal(g.Reviewable(obj).Object)
	return digest("create", raw, "generated", g.Inputs)
}

// ManifestDigest is ManifestDigest of obj as a person can review it, for
// a hook, and for an update whose digest is the whole manifest's (an
// object deleted and created anew, one whose labels the sync puts back):
// its generated fields as GeneratedPlaceholder, bound to the render's
// inputs. One with no generated field has the digest ManifestDigest gives
// it.
func (g Generated) ManifestDigest(obj *unstructured.Unstructured) string {
	if len(g.pathsOf(obj)) == 0 {
		return ManifestDigest(obj)
	}
	raw, _ := json.Marshal(g.Reviewable(obj).Object)
	return digest("manifest", raw, "generated", g.Inputs)
}

// changeDigest is ChangeDigest of an update of obj, with each generated
// field that the update changes as GeneratedPlaceholder, bound to the
// render's inputs: a field the chart now generates that the live object
// lacks (a key a new chart version adds to a Secret that exists). A
// generated field the live object has keeps its live value (the
// controller's keepGenerated), and changes nothing. An update that
// changes no generated field has the digest ChangeDigest gives it.
func (g Generated) changeDigest(obj *unstructured.Unstructured, live, desired map[string]any) string {
	var masked map[string]any
	for _, p := range g.pathsOf(obj) {
		if slices.Equal(p, render.NamePath) {
			continue
		}
		// NOTE: the API server writes a Secret's stringData into data, so
		// a generated stringData key is found, after the dry run, there;
		// keepGenerated moves a key the live Secret has into data, with
		// its live value, so only a new key is a change here.
		if render.IsCoreSecret(obj) && len(p) == 2 && p[0] == "stringData" {
			p = []string{"data", p[1]}
		}
		want, ok := render.FieldAt(desired, p)
		if !ok {
			continue
		}
		if have, ok := render.FieldAt(live, p); ok && reflect.DeepEqual(have, want) {
			continue
		}
		if masked == nil {
			masked = (&unstructured.Unstructured{Object: desired}).DeepCopy().Object
		}
		render.SetFieldAt(masked, p, GeneratedPlaceholder)
	}
	if masked == nil {
		return ChangeDigest(live, desired)
	}
	return digest(ChangeDigest(live, masked), "generated", g.Inputs)
}
