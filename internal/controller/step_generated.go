package controller

import (
	"context"
	"fmt"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/prepare"
	"capstan.dev/capstan/internal/render"
)

// keepGenerated leaves as they run the fields a chart generates at random
// (a certificate from genCA, a password from randAlphaNum): a field that
// differs between two renders with the same inputs takes the live
// object's value, so a sync with nothing new changes nothing, as a second
// `helm install` would never happen. A new object gets the value of this
// render, as helm install gives it. The plan says which fields are kept.
//
// A restricted add-on reads only objects of its namespace that it applied
// before (its inventory), and keeps fields only of one shown to be its own
// (apply.NotOurs), as keepRunning does: the read is the controller's own
// and comes before the guardrails, so a tenant's chart must not make it
// read anything else, and whether a field is "kept as it runs" would tell
// the tenant whether an object it does not hold exists. Its random fields
// are violations anyway (random-values).
//
// An object whose kind a CRD of this render defines is new when that CRD
// is not served yet: the sync creates the CRD before it.
func (r *AddonReconciler) keepGenerated(ctx context.Context, s *scope) (bool, error) {
	if len(s.generated) == 0 {
		return false, nil
	}
	s.generatedNotices = nil
	restricted := s.profile == capstanv1.ProfileRestricted
	applied := map[string]bool{}
	for _, ref := range capstanv1.RefsOf(s.addon.Status.Inventory) {
		applied[ref.Key()] = true
	}
	for _, g := range s.generated {
		obj := s.renderedObject(g)
		if obj == nil || g.Hook {
			continue // a hook is created anew each time it runs
		}
		if g.RandomName() {
			s.generatedNotices = append(s.generatedNotices, capstanv1.Notice{
				Path: "objects/" + obj.GetKind() + "/" + obj.GetName(),
				Message: "the chart names this object at random (randAlphaNum, uuidv4, now), so each sync creates it anew under another name " +
					"and the prune deletes the one before; give it a fixed name",
			})
			continue
		}
		ref := capstanv1.RefOf(obj)
		var live *unstructured.Unstructured
		if !restricted || (obj.GetNamespace() == s.addon.Namespace && applied[ref.Key()]) {
			var err error
			live, err = s.applier.Get(ctx, ref)
			switch {
			case apimeta.IsNoMatchError(err) && definedHere(s.objects, obj):
				// NOTE: the sync creates its CRD first, so no such object
				// can exist yet: it is new, as the preview says too.
				live = nil
			case apimeta.IsNoMatchError(err):
				return false, fmt.Errorf("the cluster serves no %s, the kind of %s %s that the chart renders, and the chart holds no CRD of it: "+
					"install the CRD that defines it first (%w)", obj.GroupVersionKind().GroupKind(), obj.GetKind(), client.ObjectKeyFromObject(obj), err)
			case err != nil:
				return false, fmt.Errorf("reading %s to keep the fields its chart generates: %w", ref, err)
			}
			if restricted && live != nil && apply.NotOurs(s.addon, live) != "" {
				// NOTE: the inventory is saved before anything is applied,
				// so it may name an object someone else created since; it
				// reads as absent, and the notice says nothing of it.
				live = nil
			}
		}
		kept := 0
		if live != nil {
			for _, p := range g.Paths {
				if keepSecretStringData(obj, live, p) {
					kept++
				} else if v, ok := render.FieldAt(live.Object, p); ok && render.SetFieldAt(obj.Object, p, v) {
					kept++
				}
			}
		}
		fields := make([]string, 0, len(g.Paths))
		for _, p := range g.Paths {
			fields = append(fields, strings.Join(p, "."))
		}
		what := "are kept as they run"
		if kept == 0 {
			what = "are set by this render, as the object is new"
		}
		s.generatedNotices = append(s.generatedNotices, capstanv1.Notice{
			Path: "objects/" + obj.GetKind() + "/" + obj.GetName(),
			Message: fmt.Sprintf("the chart generates %s at random (genCA, randAlphaNum, now), so each render differs; they %s, "+
				"and change only when the object is created anew", strings.Join(fields, ", "), what),
		})
	}
	return false, nil
}

// keepSecretStringData keeps a generated key of a core Secret's
// stringData (path stringData.KEY) as it runs, and reports whether it did.
// The API server stores no stringData: it writes each key, base64, into
// data, so the live value is data.KEY. The manifest then holds that value
// in data and drops the key from stringData (and stringData, once empty),
// so the apply writes what runs and the plan shows no change. A live
// Secret without that key keeps the render's value, as a new key would.
func keepSecretStringData(obj, live *unstructured.Unstructured, p []string) bool {
	if !render.IsCoreSecret(obj) || len(p) != 2 || p[0] != "stringData" {
		return false
	}
	v, ok := render.FieldAt(live.Object, []string{"data", p[1]})
	if !ok {
		return false
	}
	render.SetSecretData(obj.Object, p[1], v)
	return true
}

// renderedObject finds the prepared object, or hook's object, that a
// render's Generated names: one of s.generated, in the namespace its
// object was put in (prepare.RenderedObject).
func (s *scope) renderedObject(g render.Generated) *unstructured.Unstructured {
	return prepare.RenderedObject(g, s.objects, s.hooks)
}

// definedHere reports whether a CRD among objs defines obj's kind.
func definedHere(objs []*unstructured.Unstructured, obj *unstructured.Unstructured) bool {
	_, ok := prepare.CRDScopes(objs)[obj.GroupVersionKind().GroupKind()]
	return ok
}
