package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes a kubeconfig whose contexts, one per name, each
// point at their own server and namespace; the first is current.
func writeKubeconfig(t *testing.T, dir string, names ...string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	for _, name := range names {
		kc.Clusters[name] = &clientcmdapi.Cluster{Server: "https://" + name + ".invalid"}
		kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: "t"}
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: name + "-ns"}
	}
	kc.CurrentContext = names[0]
	file := filepath.Join(dir, names[0])
	if err := clientcmd.WriteToFile(*kc, file); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestKubeconfigIsFoundAsKubectlFindsIt: the cluster and the namespace
// come from the one kubeconfig kubectl would use: --kubeconfig, else
// $KUBECONFIG, else ~/.kube/config; --context picks another context of it.
// (A pod's own account comes last, only when none of them holds one; a
// test cannot be in a pod.)
func TestKubeconfigIsFoundAsKubectlFindsIt(t *testing.T) {
	dir := t.TempDir()
	home := writeKubeconfig(t, dir, "home")
	env := writeKubeconfig(t, dir, "env", "env-other")
	explicit := writeKubeconfig(t, dir, "explicit")
	saved := clientcmd.RecommendedHomeFile
	clientcmd.RecommendedHomeFile = home
	t.Cleanup(func() { clientcmd.RecommendedHomeFile = saved })

	for _, tc := range []struct {
		name                string
		env                 string
		kubeconfig, context string
		want                string
	}{
		{"~/.kube/config", "", "", "", "home"},
		{"KUBECONFIG over ~/.kube/config", env, "", "", "env"},
		{"--kubeconfig over KUBECONFIG", env, explicit, "", "explicit"},
		{"--context", env, "", "env-other", "env-other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.env)
			f := &clusterFlags{kubeconfig: tc.kubeconfig, kubeContext: tc.context}
			cfg, err := f.config()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != "https://"+tc.want+".invalid" || f.namespace != tc.want+"-ns" {
				t.Errorf("talks to %s in namespace %q; want %s's server and namespace", cfg.Host, f.namespace, tc.want)
			}
		})
	}
	t.Setenv("KUBECONFIG", env)
	if _, err := (&clusterFlags{kubeContext: "nowhere"}).config(); err == nil {
		t.Error("--context of a context the kubeconfig has not was accepted")
	}
}

// TestKubeconfigNamespaceThatCannotExist: a context's namespace that is no
// namespace name is named as the context's, not as a --namespace the
// person did not give; and a command of every namespace (-A) needs none.
func TestKubeconfigNamespaceThatCannotExist(t *testing.T) {
	file := writeKubeconfig(t, t.TempDir(), "Team_A")
	_, err := (&clusterFlags{kubeconfig: file}).config()
	if err == nil || !strings.Contains(err.Error(), `the namespace "Team_A-ns" of kubeconfig context "Team_A"`) || strings.Contains(err.Error(), "--namespace \"") {
		t.Errorf("a context's namespace that cannot exist: %v; want it named as the context's", err)
	}
	if _, err := (&clusterFlags{kubeconfig: file, allNamespaces: true}).config(); err != nil {
		t.Errorf("-A with a context's namespace that cannot exist: %v; want no namespace needed", err)
	}
}
