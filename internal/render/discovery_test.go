package render

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/discovery"

	"capstan.dev/capstan/internal/testcluster"
)

// TestCapabilitiesFromDiscovery reads the capabilities of the real local
// control plane, and renders a chart that branches on them.
func TestCapabilitiesFromDiscovery(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local control plane")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cluster, err := testcluster.Start(ctx)
	if err != nil {
		t.Fatalf("start the local control plane (run make bin if its binaries are missing): %v", err)
	}
	defer cluster.Stop()
	dc, err := discovery.NewDiscoveryClientForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	caps, err := CapabilitiesFromDiscovery(dc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(caps.KubeVersion, "v1.") || !caps.ExactAPIVersions || !slices.IsSorted(caps.APIVersions) {
		t.Errorf("capabilities = version %q, exact %v, sorted %v", caps.KubeVersion, caps.ExactAPIVersions, slices.IsSorted(caps.APIVersions))
	}
	for _, want := range []string{"v1", "apps/v1", "apps/v1/Deployment", "networking.k8s.io/v1/Ingress", "apiextensions.k8s.io/v1"} {
		if !slices.Contains(caps.APIVersions, want) {
			t.Errorf("the API list lacks %s", want)
		}
	}
	res, err := Helm(ctx, loadChart(t, "caps"), nil, Options{ReleaseName: "c", Namespace: "default", Capabilities: caps})
	if err != nil {
		t.Fatal(err)
	}
	kinds := names(res.Objects)
	if !slices.Contains(kinds, "Ingress//c") || slices.Contains(kinds, "ServiceMonitor//c") {
		t.Errorf("objects = %v: want the Ingress this cluster serves, and no ServiceMonitor, whose API it lacks", kinds)
	}
	info := res.Objects[0].Object["data"].(map[string]any)
	if info["kubeVersion"] != caps.KubeVersion {
		t.Errorf(".Capabilities.KubeVersion.Version = %v, want the server's %s", info["kubeVersion"], caps.KubeVersion)
	}
}
