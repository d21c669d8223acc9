package cli

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestTheNamespaceIsTheContexts: without -n, a command works in the
// namespace the kubeconfig's current context names, as kubectl does, and
// never in a fixed one: the same name in the controller's namespace is
// left alone.
func TestTheNamespaceIsTheContexts(t *testing.T) {
	cluster, c := apiServer(t)
	tenant, other := testNamespace(t, c), testNamespace(t, c)
	newAddon(t, c, tenant, "web", nil)
	newAddon(t, c, other, "web", nil)

	kc, err := clientcmd.LoadFromFile(cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kc.Contexts[kc.CurrentContext].Namespace = tenant
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"addon", "get", "web", "-o", "json", "--kubeconfig", path},
		{"addon", "get", "web", "-o", "json", "--kubeconfig", path, "-n", other},
	} {
		out, err := runRoot(t, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		var a capstanv1.Addon
		if err := json.Unmarshal([]byte(out), &a); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		want := tenant
		if slices.Contains(args, "-n") {
			want = other
		}
		if a.Namespace != want {
			t.Errorf("%v read the Addon of namespace %q, want %q", args, a.Namespace, want)
		}
	}
	// Without a namespace in the context, it is "default", as for kubectl.
	kc.Contexts[kc.CurrentContext].Namespace = ""
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	f := &clusterFlags{kubeconfig: path}
	if _, err := f.config(); err != nil || f.namespace != "default" {
		t.Errorf("a context without a namespace gave %q, %v; want default", f.namespace, err)
	}
}

// runRoot runs the command line as given, with no kubeconfig added.
func runRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := NewRootCommand()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.ExecuteContext(t.Context())
	return out.String(), err
}
