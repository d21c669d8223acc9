package controller

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/netguard"
)

// fleetKubeconfig is a kubeconfig for server; building its clients dials
// nothing (the REST mapper and discovery are lazy).
func fleetKubeconfig(server string) []byte {
	return []byte(strings.ReplaceAll(`apiVersion: v1
kind: Config
current-context: edge
contexts:
- name: edge
  context: {cluster: edge, user: installer}
clusters:
- name: edge
  cluster:
    server: SERVER
users:
- name: installer
  user:
    token: abc
    as: system:serviceaccount:capstan:installer
`, "SERVER", server))
}

// TestRemoteClustersKeyedByKubeconfig: two add-ons whose kubeconfigs are
// two keys of one Secret each keep their own clients, so neither rebuilds
// (and cancels the watch cache of) the other's on every reconcile; an
// unnamed key is the default key.
func TestRemoteClustersKeyedByKubeconfig(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := capstanv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	r := &AddonReconciler{
		Client: fake.NewClientBuilder().WithScheme(scheme).Build(),
		Config: Config{RemoteGuard: netguard.Config{Allow: []string{"127.0.0.0/8"}}},
	}
	addon := func(name, key string) *capstanv1.Addon {
		return &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: name},
			Spec: capstanv1.AddonSpec{KubeConfig: &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: "fleet"}, Key: key}}}
	}
	x, y := addon("x", "edge-1"), addon("y", "edge-2")
	edge1, edge2 := fleetKubeconfig("https://127.0.0.1:6443"), fleetKubeconfig("https://127.0.0.2:6443")

	cx, err := r.remoteCluster(remoteKeyOf(x), edge1)
	if err != nil {
		t.Fatal(err)
	}
	cy, err := r.remoteCluster(remoteKeyOf(y), edge2)
	if err != nil {
		t.Fatal(err)
	}
	if cx == cy || cx.server != "https://127.0.0.1:6443" || cy.server != "https://127.0.0.2:6443" {
		t.Fatalf("the two keys share a cluster: %s and %s", cx.server, cy.server)
	}
	for i := 0; i < 2; i++ {
		again, err := r.remoteCluster(remoteKeyOf(x), edge1)
		if err != nil {
			t.Fatal(err)
		}
		if again != cx {
			t.Fatalf("x's clients were rebuilt after y's reconcile")
		}
		if again, _ := r.remoteCluster(remoteKeyOf(y), edge2); again != cy {
			t.Fatalf("y's clients were rebuilt after x's reconcile")
		}
	}
	if remoteKeyOf(addon("z", "")) != remoteKeyOf(addon("z", kubeConfigDefaultKey)) {
		t.Errorf("an unnamed key is not the default key %q", kubeConfigDefaultKey)
	}
}
