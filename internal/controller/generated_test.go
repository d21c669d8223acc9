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

// TestGeneratedStringDataKeptAsItRuns installs a chart whose Secret puts a
// password from randAlphaNum in stringData. The API server keeps no
// stringData: it writes each key into data. A later sync with nothing new
// must find the password there, keep it as it runs and plan no update of
// the Secret, rather than take the object for new and change the password
// on every sync.
func TestGeneratedStringDataKeptAsItRuns(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "db", version: "1.0.0", files: map[string]string{
		"templates/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  user: app\n  password: {{ randAlphaNum 16 | quote }}\n",
	}})
	a := create(t, newAddon(controllerNS, "db-"+ns, url, withTarget(ns)))
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	secret := live(t, "v1", "Secret", ns, "db")
	if secret == nil {
		t.Fatalf("the Secret was not created: %s", describeStatus(got))
	}
	password, _, _ := unstructured.NestedString(secret.Object, "data", "password")
	if password == "" {
		t.Fatalf("the Secret holds no data.password: %v", secret.Object["data"])
	}
	for i := 0; i < 2; i++ {
		got = update(t, got, func(cur *capstanv1.Addon) { cur.Spec.SyncRequest++ })
		got = waitFor(t, got, 90*time.Second, "another sync", func(cur *capstanv1.Addon) bool {
			return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.ObservedGeneration == cur.Generation
		})
		if s := got.Status.Plan.Summary; s.Update != 0 || s.Create != 0 {
			t.Errorf("sync %d planned %+v; want nothing created or updated", i+2, s)
		}
		kept := false
		for _, n := range got.Status.Plan.Notices {
			kept = kept || n.Path == "objects/Secret/db" && strings.Contains(n.Message, "kept as they run")
		}
		if !kept {
			t.Errorf("sync %d: notices %+v; want the Secret's password kept as it runs", i+2, got.Status.Plan.Notices)
		}
		again, _, _ := unstructured.NestedString(live(t, "v1", "Secret", ns, "db").Object, "data", "password")
		if again != password {
			t.Fatalf("sync %d changed data.password on a sync with nothing new", i+2)
		}
	}
	if user, _, _ := unstructured.NestedString(live(t, "v1", "Secret", ns, "db").Object, "data", "user"); user != "YXBw" {
		t.Errorf("data.user = %q; want app, base64 (YXBw)", user)
	}
}
