package controller_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// registeringChart marks itself an add-on with a primary Service, as a
// chart written for Capstan does.
func registeringChart(version string) chart {
	return chart{name: "wiki", version: version, files: map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: wiki\nversion: " + version + "\nannotations:\n  capstan.dev/addon: \"true\"\n  capstan.dev/primary: wiki:http\n",
		"templates/svc.yaml": `apiVersion: v1
kind: Service
metadata:
  name: wiki
spec:
  selector: {app: wiki}
  ports:
    - {name: http, port: 8080}
`,
	}}
}

// serveManifest serves a manifest from the suite's loopback chart server,
// which the suite's fetch guard allows, and returns its address.
func serveManifest(path, doc string) string {
	charts.mu.Lock()
	charts.files[path] = []byte(doc)
	charts.mu.Unlock()
	return charts.srv.URL + path
}

// redirectManifest makes the suite's chart server answer path with a
// redirect to target, and returns its address.
func redirectManifest(path, target string) string {
	charts.mu.Lock()
	charts.redirects[path] = target
	charts.mu.Unlock()
	return charts.srv.URL + path
}

func registeredCondition(a *capstanv1.Addon) *metav1.Condition {
	return apimeta.FindStatusCondition(a.Status.Conditions, capstanv1.ConditionRegistered)
}

// TestRegistrationFromThePrimary installs an add-on whose chart marks
// itself an add-on. Kwok runs no containers, so the manifest comes from a
// loopback server named by spec.registration (the cluster profile's
// override); the controller reads it once the add-on is Ready, through the
// fetch guard, and records its tiles. A manifest under another name, and a
// name another add-on registered first, are refused with a condition.
func TestRegistrationFromThePrimary(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, registeringChart("1.0.0"))
	manifest := serveManifest("/manifests/"+ns+"/wiki.json",
		`{"name":"wiki","consoleURL":"https://wiki.example/admin","tiles":[{"title":"Wiki","icon":"W","link":"https://wiki.example/"}],"setup":["Create the first page."]}`)

	// Another add-on of the name holds it already: here a suspended one
	// whose status says it registered it first.
	other := newNamespace(t)
	rival := create(t, newAddon(other, "wiki", url, withSpec(func(s *capstanv1.AddonSpec) { s.Suspend = true })))
	t.Cleanup(func() { deleteAddon(t, rival) })
	waitPhase(t, rival, capstanv1.PhaseSuspended)
	claim := func(reg *capstanv1.Registration) {
		t.Helper()
		updateStatus(t, rival, func(cur *capstanv1.Addon) { cur.Status.Registration = reg })
	}
	claim(&capstanv1.Registration{Name: "wiki", Source: "https://elsewhere.example/", ReadAt: metav1.Now()})

	a := create(t, newAddon(controllerNS, "wiki", url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Registration = &capstanv1.RegistrationSource{URL: manifest}
	})))
	t.Cleanup(func() { deleteAddon(t, a) })
	got := waitFor(t, a, 90*time.Second, "the name refused as taken", func(cur *capstanv1.Addon) bool {
		c := registeredCondition(cur)
		return c != nil && c.Reason == "NameTaken"
	})
	if c := registeredCondition(got); !strings.Contains(c.Message, other+"/wiki") || got.Status.Registration != nil {
		t.Errorf("condition %q, registration %+v; want the holder named and nothing recorded", c.Message, got.Status.Registration)
	}
	if got.Status.Phase != capstanv1.PhaseSynced {
		t.Errorf("a refused registration must not stop the add-on: phase %s", got.Status.Phase)
	}

	// Once the name is free, a sync registers it.
	claim(nil)
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.SyncRequest++ })
	got = waitFor(t, a, 90*time.Second, "Registered", func(cur *capstanv1.Addon) bool {
		c := registeredCondition(cur)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	reg := got.Status.Registration
	if reg == nil || reg.Name != "wiki" || len(reg.Tiles) != 1 || reg.Tiles[0].Link != "https://wiki.example/" ||
		reg.ConsoleURL != "https://wiki.example/admin" || reg.Source != manifest || reg.AppliedHash != got.Status.AppliedHash {
		t.Fatalf("status.registration = %+v", reg)
	}
	// The first keeps its name when another claims it later.
	claim(&capstanv1.Registration{Name: "wiki", Source: "https://elsewhere.example/", ReadAt: metav1.Now()})
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.SyncRequest++ })
	got = waitFor(t, a, 90*time.Second, "the sync request handled", func(cur *capstanv1.Addon) bool {
		return cur.Status.LastSyncRequest == cur.Spec.SyncRequest && cur.Status.Phase == capstanv1.PhaseSynced
	})
	if c := registeredCondition(got); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("the add-on that registered first lost its name: %+v", c)
	}
	claim(nil)

	// A manifest that names another add-on is refused.
	serveManifest("/manifests/"+ns+"/wiki.json", `{"name":"blog"}`)
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.SyncRequest++ })
	got = waitFor(t, a, 90*time.Second, "the manifest refused", func(cur *capstanv1.Addon) bool {
		c := registeredCondition(cur)
		return c != nil && c.Reason == "ManifestInvalid"
	})
	if c := registeredCondition(got); !strings.Contains(c.Message, `names the add-on "blog", not "wiki"`) || got.Status.Registration != nil {
		t.Errorf("the condition says %q, registration %+v", c.Message, got.Status.Registration)
	}
}

// TestRegistrationRefusesAnExternalNamePrimary installs an add-on whose
// primary is an ExternalName Service, which names a host outside the
// cluster: the controller reads nothing from it (no read is attempted, so
// nothing is dialled) and says what to fix, and the add-on stays Synced.
func TestRegistrationRefusesAnExternalNamePrimary(t *testing.T) {
	ns := newNamespace(t)
	c := registeringChart("1.0.0")
	c.files["templates/svc.yaml"] = `apiVersion: v1
kind: Service
metadata:
  name: wiki
spec:
  type: ExternalName
  externalName: metadata.invalid
  ports:
    - {name: http, port: 8080}
`
	url, _ := charts.publish(t, c)
	a := create(t, newAddon(controllerNS, "wiki", url, withTarget(ns)))
	t.Cleanup(func() { deleteAddon(t, a) })
	got := waitFor(t, a, 90*time.Second, "the primary refused", func(cur *capstanv1.Addon) bool {
		c := registeredCondition(cur)
		return c != nil && c.Reason == "PrimaryRefused"
	})
	if c := registeredCondition(got); !strings.Contains(c.Message, "ExternalName") || !strings.Contains(c.Message, "ClusterIP Service") ||
		got.Status.Registration != nil {
		t.Errorf("condition %q, registration %+v; want the ExternalName refused with what to fix", c.Message, got.Status.Registration)
	}
	if got.Status.Phase != capstanv1.PhaseSynced {
		t.Errorf("a refused registration must not stop the add-on: phase %s", got.Status.Phase)
	}
}

// TestRegistrationRefusesAPrimaryWithEndpointsByHand installs an add-on
// whose primary Service has a selector, beside an EndpointSlice written by
// hand with the Service's name, as a tenant allowed to write EndpointSlices
// could: its cluster IP would route there too, so the controller reads
// nothing from it and names the EndpointSlice. The endpointslice
// controller's own EndpointSlice of the Service is not refused.
func TestRegistrationRefusesAPrimaryWithEndpointsByHand(t *testing.T) {
	ns := newNamespace(t)
	ready := true
	byHand := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "wiki-by-hand", Labels: map[string]string{discoveryv1.LabelServiceName: "wiki"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"192.0.2.10"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
	}
	if err := admin.Create(t.Context(), byHand); err != nil {
		t.Fatal(err)
	}
	url, _ := charts.publish(t, registeringChart("1.0.0"))
	a := create(t, newAddon(controllerNS, "wiki", url, withTarget(ns)))
	t.Cleanup(func() { deleteAddon(t, a) })
	got := waitFor(t, a, 90*time.Second, "the primary refused", func(cur *capstanv1.Addon) bool {
		c := registeredCondition(cur)
		return c != nil && c.Reason == "PrimaryRefused"
	})
	if c := registeredCondition(got); !strings.Contains(c.Message, "EndpointSlice wiki-by-hand") || !strings.Contains(c.Message, "delete that EndpointSlice") ||
		got.Status.Registration != nil {
		t.Errorf("condition %q, registration %+v; want the EndpointSlice written by hand named, with what to fix", c.Message, got.Status.Registration)
	}
	if got.Status.Phase != capstanv1.PhaseSynced {
		t.Errorf("a refused registration must not stop the add-on: phase %s", got.Status.Phase)
	}
	// The endpointslice controller writes one of its own, with the label
	// the check takes as its mark.
	var managed []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		list := &discoveryv1.EndpointSliceList{}
		if err := admin.List(t.Context(), list, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: "wiki"}); err != nil {
			t.Fatal(err)
		}
		managed = managed[:0]
		for _, es := range list.Items {
			managed = append(managed, es.Name+"="+es.Labels[discoveryv1.LabelManagedBy])
		}
		if slices.ContainsFunc(list.Items, func(es discoveryv1.EndpointSlice) bool {
			return es.Labels[discoveryv1.LabelManagedBy] == "endpointslice-controller.k8s.io"
		}) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Service's EndpointSlices %v; want one of the endpointslice controller", managed)
		}
	}
}

// TestRegistrationFollowsTheAdminAddressRedirect names in
// spec.registration.url (the cluster admin's address) an address that
// redirects to a valid manifest on the same server: the controller
// follows it, through the fetch guard, and registers the manifest. A
// redirect from the primary, which a tenant may run, is not followed:
// TestRegisterFollowsNoRedirectFromThePrimary.
func TestRegistrationFollowsTheAdminAddressRedirect(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, registeringChart("1.0.0"))
	target := serveManifest("/manifests/"+ns+"/target/wiki.json", `{"name":"wiki-moved"}`)
	from := redirectManifest("/manifests/"+ns+"/moved/wiki.json", target)
	a := create(t, newAddon(controllerNS, "wiki-moved", url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Registration = &capstanv1.RegistrationSource{URL: from}
	})))
	t.Cleanup(func() { deleteAddon(t, a) })
	got := waitFor(t, a, 90*time.Second, "the redirect followed", func(cur *capstanv1.Addon) bool {
		c := registeredCondition(cur)
		return c != nil && c.Reason != "ManifestUnreadable"
	})
	if c := registeredCondition(got); c.Reason != "Registered" || got.Status.Registration == nil || got.Status.Registration.Name != "wiki-moved" {
		t.Errorf("condition %s: %q, registration %+v; want the manifest the redirect points to registered", c.Reason, c.Message, got.Status.Registration)
	}
}

// TestRegistrationRemembersAMissingManifest names a manifest the server
// does not have (404): the controller says so (ManifestMissing) and does
// not read it again at every requeue, as it would a server that is down.
func TestRegistrationRemembersAMissingManifest(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, registeringChart("1.0.0"))
	hits, mend := charts.breakPath("/manifests/"+ns+"/missing/", http.StatusNotFound, "")
	defer mend()
	a := create(t, newAddon(controllerNS, "wiki-missing", url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Registration = &capstanv1.RegistrationSource{URL: charts.srv.URL + "/manifests/" + ns + "/missing/wiki.json"}
	})))
	t.Cleanup(func() { deleteAddon(t, a) })
	got := waitFor(t, a, 90*time.Second, "the manifest missing", func(cur *capstanv1.Addon) bool {
		c := registeredCondition(cur)
		return c != nil && c.Reason == "ManifestMissing"
	})
	if c := registeredCondition(got); !strings.Contains(c.Message, "404") || !strings.Contains(c.Message, "spec.registration.url") {
		t.Errorf("condition %q; want the 404 and spec.registration.url named", c.Message)
	}
	// A requeue every 30 s would read it twice more in 65 s.
	time.Sleep(65 * time.Second)
	if hits() != 1 {
		t.Errorf("the missing manifest was read %d times in 65 s, want once", hits())
	}
}
