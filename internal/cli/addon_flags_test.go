package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestClusterFlagsRefuseANamespaceThatCannotExist: the API server answers a
// read in such a namespace with "not found", which sends a person looking
// for the Addon; the CLI names the flag before it dials anything.
func TestClusterFlagsRefuseANamespaceThatCannotExist(t *testing.T) {
	for _, ns := range []string{"INVALID", "a_b", "-a", strings.Repeat("a", 64)} {
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

// TestCommandsCheckTheirFlagsBeforeConnecting: a namespace that cannot
// exist and an -o that cannot be printed are named before any cluster is
// dialled (the kubeconfig here does not exist), rather than after a call
// that reads or computes for nothing.
func TestCommandsCheckTheirFlagsBeforeConnecting(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"addon", "remove", "blog", "-n", "Tenant"}, `--namespace "Tenant" is not a namespace name`},
		{[]string{"addon", "remove", "blog", "--gitops", "http://127.0.0.1:1/ops.git", "--uninstall", "-n", "Tenant"}, `--namespace "Tenant" is not a namespace name`},
		{[]string{"plan", "blog", "-n", "Tenant"}, `--namespace "Tenant" is not a namespace name`},
		{[]string{"addon", "plan", "blog", "-o", "xml"}, `-o "xml": give yaml or json`},
		{[]string{"addon", "get", "blog", "-o", "xml"}, `-o "xml": give yaml or json`},
		{[]string{"addon", "history", "blog", "-o", "table"}, `-o "table": give yaml or json`},
	} {
		root := NewRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append(tc.args, "--kubeconfig", "/nonexistent/kubeconfig"))
		if err := root.ExecuteContext(t.Context()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want %q", tc.args, err, tc.want)
		}
	}
	// NOTE: a wait that ends before it starts would fail the command
	// after its request was written, as if the request had failed.
	for _, args := range [][]string{
		{"addon", "sync", "blog", "--yes"},
		{"addon", "install", "blog", "--yes"},
		{"addon", "refresh", "blog"},
		{"addon", "remove", "blog"},
		{"addon", "test", "blog"},
	} {
		for _, timeout := range []string{"0", "-1s"} {
			root := NewRootCommand()
			root.SetOut(&bytes.Buffer{})
			root.SetErr(&bytes.Buffer{})
			root.SetArgs(append(args, "--timeout", timeout, "-n", "tenant", "--kubeconfig", "/nonexistent/kubeconfig"))
			if err := root.ExecuteContext(t.Context()); err == nil || !strings.Contains(err.Error(), "--timeout ") || !strings.Contains(err.Error(), "give a positive duration") {
				t.Errorf("%v --timeout %s: %v; want the --timeout refused before connecting", args, timeout, err)
			}
		}
		root := NewRootCommand()
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		root.SetArgs(append(args, "--timeout", "0", "--wait=false", "-n", "tenant", "--kubeconfig", "/nonexistent/kubeconfig"))
		if err := root.ExecuteContext(t.Context()); err == nil || strings.Contains(err.Error(), "--timeout") {
			t.Errorf("%v --wait=false --timeout 0: %v; want the timeout accepted, and the missing kubeconfig refused", args, err)
		}
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
		// The secret typed where the file's name goes.
		{"auth.password=@" + secret, "--secret-input auth.password=@...: there is no such file"},
	} {
		v := &valuesFlags{secretInputs: []string{tc.arg}}
		_, _, err := v.read()
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), secret) {
			t.Errorf("--secret-input %q: %v; want %q and no secret", tc.arg, err, tc.want)
		}
	}
}
