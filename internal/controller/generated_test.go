package controller_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestGeneratedFieldOfACustomResourceWhoseCRDComesWithIt installs a chart
// whose CRD is in crds/ and whose resource of it has a field the chart
// generates at random. Keeping that field as it runs reads the resource
// before the sync creates its CRD, when the API server serves no such
// kind: the resource is new, the sync creates the CRD and then the
// resource, and the next sync keeps the field as it runs.
func TestGeneratedFieldOfACustomResourceWhoseCRDComesWithIt(t *testing.T) {
	ns := newNamespace(t)
	suffix := strings.ReplaceAll(ns[len(ns)-5:], "-", "")
	kind, plural := "Widget"+suffix, "widgets"+suffix
	url, _ := charts.publish(t, chart{name: "widgets", version: "1.0.0", files: map[string]string{
		"crds/widgets.yaml":     crdYAML(kind, plural),
		"templates/widget.yaml": "apiVersion: example.com/v1\nkind: " + kind + "\nmetadata:\n  name: first\nspec:\n  token: {{ randAlphaNum 8 | quote }}\n",
	}})
	a := create(t, newAddon(controllerNS, "widgets-"+suffix, url, withTarget(ns)))
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	cr := live(t, "example.com/v1", kind, ns, "first")
	if cr == nil {
		t.Fatalf("the custom resource was not created: %s", describeStatus(got))
	}
	token, _, _ := unstructured.NestedString(cr.Object, "spec", "token")
	if len(token) != 8 {
		t.Fatalf("spec.token = %q; want the 8 characters the chart generates", token)
	}
	update(t, got, func(cur *capstanv1.Addon) { cur.Spec.SyncRequest++ })
	waitFor(t, a, 90*time.Second, "a second sync", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.ObservedGeneration == cur.Generation
	})
	if again, _, _ := unstructured.NestedString(live(t, "example.com/v1", kind, ns, "first").Object, "spec", "token"); again != token {
		t.Errorf("spec.token changed from %q to %q on a sync with nothing new", token, again)
	}
}
