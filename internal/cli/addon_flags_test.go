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

// TestSecretInputIsNeverEchoed: a --secret-input written wrong may be the
// secret itself, so its error shows at most the path before =@.
func TestSecretInputIsNeverEchoed(t *testing.T) {
	const secret = "hunter2-S3CRET"
	for _, tc := range []struct{ arg, want string }{
		{secret, "--secret-input #1:"},
		{"auth.password=" + secret, "--secret-input #1:"},
		{"auth.password=@", `--secret-input "auth.password=@":`},
		{"=@" + secret, "--secret-input #1:"},
	} {
		v := &valuesFlags{secretInputs: []string{tc.arg}}
		_, _, err := v.read()
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), secret) {
			t.Errorf("--secret-input %q: %v; want %q and no secret", tc.arg, err, tc.want)
		}
	}
}
