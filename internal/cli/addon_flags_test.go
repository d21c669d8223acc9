package cli

import (
	"strings"
	"testing"
)

// TestClusterFlagsRefuseANamespaceThatCannotExist: the API server answers a
// read in such a namespace with "not found", which sends a person looking
// for the Addon; the CLI names the flag before it dials anything.
func TestClusterFlagsRefuseANamespaceThatCannotExist(t *testing.T) {
	for _, ns := range []string{"INVALID", "a_b", "-a", strings.Repeat("a", 64), ""} {
		f := &clusterFlags{namespace: ns, kubeconfig: "/nonexistent/kubeconfig"}
		if _, err := f.client(); err == nil || !strings.Contains(err.Error(), "is not a namespace name") {
			t.Errorf("--namespace %q: %v; want it refused by name", ns, err)
		}
	}
	f := &clusterFlags{namespace: "tenant-a", kubeconfig: "/nonexistent/kubeconfig"}
	if _, err := f.client(); err == nil || strings.Contains(err.Error(), "is not a namespace name") {
		t.Errorf("--namespace tenant-a: %v; want it accepted, and the missing kubeconfig refused", err)
	}
}
