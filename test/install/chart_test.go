package install_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"capstan.dev/capstan/internal/cli"
	"capstan.dev/capstan/internal/testcluster"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) {
	testcluster.Main(m, func(c *testcluster.Cluster) { cluster = c })
}

const chart = "../../charts/capstan"

// helm runs bin/helm with a home of its own.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	dir := os.Getenv("CAPSTAN_BIN_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "bin")
	}
	home := t.TempDir()
	cmd := exec.CommandContext(t.Context(), filepath.Join(dir, "helm"), args...)
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "KUBECONFIG=" + cluster.Kubeconfig,
		"HELM_CACHE_HOME=" + home + "/cache", "HELM_CONFIG_HOME=" + home + "/config", "HELM_DATA_HOME=" + home + "/data"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// documents splits a multi-document YAML stream into parsed objects.
func documents(t *testing.T, out string) []map[string]any {
	t.Helper()
	var docs []map[string]any
	for _, doc := range strings.Split(out, "\n---") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("not YAML: %v\n%s", err, doc)
		}
		if obj != nil {
			docs = append(docs, obj)
		}
	}
	return docs
}

// TestChartRendersAsHelmTemplate renders charts/capstan with capstan
// render and with helm template, with the default values and with every
// option on, and compares them.
func TestChartRendersAsHelmTemplate(t *testing.T) {
	for name, set := range map[string][]string{
		"defaults": nil,
		"every option": {"--set", "replicas=2,trustedNamespaces={platform,infra},watchLabelSelector=capstan.dev/shard=a," +
			"fetch.allow={10.0.0.0/8},fetch.denyPrivate=true,fetch.caConfigMap=ca,api.tlsSecretName=capstan-tls," +
			"metrics.serviceMonitor.enabled=true,networkPolicy.enabled=true,podDisruptionBudget.enabled=true,platformConfigMap=facts",
			"--api-versions", "monitoring.coreos.com/v1/ServiceMonitor"},
	} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"capstan", chart, "-n", "capstan-system", "--kube-version", "v1.33.2"}, set...)
			want, err := helm(t, append(append([]string{"template"}, args...), "--include-crds")...)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, want)
			}
			var stdout, stderr bytes.Buffer
			cmd := cli.NewRootCommand()
			cmd.SetArgs(append([]string{"render"}, args...))
			cmd.SetOut(&stdout)
			cmd.SetErr(&stderr)
			if err := cmd.ExecuteContext(context.Background()); err != nil {
				t.Fatalf("capstan render: %v\n%s", err, stderr.String())
			}
			h, c := documents(t, want), documents(t, stdout.String())
			if len(h) < 12 {
				t.Fatalf("helm template rendered %d objects; the chart has more", len(h))
			}
			if diff := cmp.Diff(h, c); diff != "" {
				t.Errorf("capstan render and helm template differ (-helm +capstan):\n%s", diff)
			}
		})
	}
	if out, err := helm(t, "template", "capstan", chart, "--set", "metrics.serviceMonitor.enabled=true"); err == nil || !strings.Contains(out, "Prometheus Operator") {
		t.Errorf("a ServiceMonitor without its CRD must fail with a reason: %v\n%s", err, out)
	}
	if out, err := helm(t, "template", "capstan", chart, "--set", "replicas=0"); err == nil || !strings.Contains(out, "replicas") {
		t.Errorf("replicas=0 must be refused by the schema: %v\n%s", err, out)
	}
}

// TestChartInstalls installs charts/capstan with helm install on the local
// control plane, where kwok runs the controller's pod, and waits for the
// Deployment to be Available.
func TestChartInstalls(t *testing.T) {
	if out, err := helm(t, "install", "capstan", chart, "-n", "capstan-system", "--create-namespace", "--wait", "--timeout", "3m"); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	c, err := client.New(cluster.Config, client.Options{Scheme: cli.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	err = wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: "capstan-system", Name: "capstan-controller"}, d); err != nil {
			return false, nil
		}
		for _, cond := range d.Status.Conditions {
			if cond.Type == appsv1.DeploymentAvailable && cond.Status == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the Deployment is not Available: %+v", d.Status)
	}
	args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " ")
	if !strings.Contains(args, "controller --leader-elect") || d.Spec.Template.Spec.SecurityContext.RunAsNonRoot == nil {
		t.Errorf("the controller runs with %q and %+v", args, d.Spec.Template.Spec.SecurityContext)
	}
	if out, err := helm(t, "uninstall", "capstan", "-n", "capstan-system", "--wait"); err != nil {
		t.Errorf("helm uninstall: %v\n%s", err, out)
	}
}
