package install_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
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
	return run(t, "helm", args...)
}

// run runs the tool bin/name on the local control plane, with a home of
// its own.
func run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	dir := os.Getenv("CAPSTAN_BIN_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "bin")
	}
	home := t.TempDir()
	cmd := exec.CommandContext(t.Context(), filepath.Join(dir, name), args...)
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

// everyOption sets every value of charts/capstan away from its default.
const everyOption = `
image: {repository: registry.example/capstan, tag: v9.9.9, pullPolicy: Always}
imagePullSecrets: [{name: pull}]
replicas: 2
leaderElect: false
addonsServiceAccount: platform-addons
trustedNamespaces: [platform, infra]
platformConfigMap: facts
resyncInterval: 10m
driftDelay: 15s
hookTimeout: 20m
maxConcurrentReconciles: 16
maxConcurrentPerTenant: 3
watchLabelSelector: capstan.dev/tier=a
shard: a
pruneApprovalThreshold: 0.25
maxObjectsPerAddon: 800
extraArgs: [--fetch-timeout=90s, --pprof-bind-address=127.0.0.1:6060]
render: {timeout: 10s, memoryLimit: 256Mi, workers: 4}
gitMemoryBudget: 1Gi
fetch: {allow: [10.0.0.0/8], deny: [charts.internal], denyPrivate: true, caConfigMap: ca}
remoteClusters: {allow: [192.0.2.10/32]}
notifications: {secrets: [capstan-notify-platform, capstan-notify-audit], allow: [10.96.0.0/12, hooks.internal:8443]}
api: {enabled: true, port: 9443, service: {type: NodePort, port: 8443}, tlsSecretName: capstan-tls}
metrics: {enabled: true, port: 9090, serviceMonitor: {enabled: true, interval: 1m}}
resources: {requests: {cpu: 200m, memory: 256Mi}, limits: {memory: 2Gi}}
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: dedicated, operator: Equal, value: platform, effect: NoSchedule}]
affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: tier, operator: In, values: [platform]}]}]}}}
podAnnotations: {example.com/team: platform}
priorityClassName: system-cluster-critical
networkPolicy: {enabled: true}
podDisruptionBudget: {enabled: true, minAvailable: 1}
`

// TestChartRendersAsHelmTemplate renders charts/capstan with capstan
// render and with helm template, with the default values, with every
// option set, and with the API and metrics off, and compares them.
func TestChartRendersAsHelmTemplate(t *testing.T) {
	every := filepath.Join(t.TempDir(), "every.yaml")
	if err := os.WriteFile(every, []byte(everyOption), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, set := range map[string][]string{
		"defaults":     nil,
		"every option": {"-f", every, "--api-versions", "monitoring.coreos.com/v1/ServiceMonitor"},
		"no endpoints": {"--set", "api.enabled=false,metrics.enabled=false,networkPolicy.enabled=true"},
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
			if len(h) < 10 {
				t.Fatalf("helm template rendered %d objects; the chart has more", len(h))
			}
			if diff := cmp.Diff(h, c); diff != "" {
				t.Errorf("capstan render and helm template differ (-helm +capstan):\n%s", diff)
			}
			if name == "every option" && !strings.Contains(want, "--notify-secret=capstan-notify-audit") {
				t.Errorf("every option: the notification Secrets are not the controller's flags")
			}
			if name == "every option" && !strings.Contains(want, "--git-memory-budget=1Gi") {
				t.Errorf("every option: gitMemoryBudget is not the controller's --git-memory-budget")
			}
			if name == "every option" && !strings.Contains(want, "--notify-allow=10.96.0.0/12,hooks.internal:8443") {
				t.Errorf("every option: notifications.allow is not the controller's --notify-allow")
			}
		})
	}
	for _, bad := range []struct{ set, want string }{
		{"replicas=0", "replicas"},
		{"addonsServiceAccount=Platform_Addons", "addonsServiceAccount"},
		{"unknownKey=1", "unknownKey"},
		{"shard=Shard_A", "shard"},
		{"pruneApprovalThreshold=0", "pruneApprovalThreshold"},
		{"gitMemoryBudget=lots", "gitMemoryBudget"},
		// The controller refuses a budget below 32Mi at start, so the
		// schema refuses it before an upgrade can crash-loop the pod.
		{"gitMemoryBudget=16Mi", "gitMemoryBudget"},
		{"gitMemoryBudget=0", "gitMemoryBudget"},
		{"gitMemoryBudget=1024", "gitMemoryBudget"},
		{"gitMemoryBudget=33554431", "gitMemoryBudget"},
		{"gitMemoryBudget=32767Ki", "gitMemoryBudget"},
		{"gitMemoryBudget=33554k", "gitMemoryBudget"},
		{"gitMemoryBudget=33M", "gitMemoryBudget"},
		{"gitMemoryBudget=31.9Mi", "gitMemoryBudget"},
		{"gitMemoryBudget=0.03Gi", "gitMemoryBudget"},
		// The flag's 0, the node's CPUs, sizes the workers by the node,
		// past the pod's fixed memory limit.
		{"render.workers=0", "workers"},
		{"maxConcurrentPerTenant=-2", "maxConcurrentPerTenant"},
		{"extraArgs={leader-elect}", "extraArgs"},
		{"notifications.secrets={Team_Hook}", "notifications"},
		{"notifications.secrets={a..b}", "notifications"},
		{"notifications.secrets={a,a}", "notifications"},
	} {
		if out, err := helm(t, "template", "capstan", chart, "--set", bad.set); err == nil || !strings.Contains(out, bad.want) {
			t.Errorf("%s must be refused by the schema, naming %s: %v\n%s", bad.set, bad.want, err, out)
		}
	}
	// Ports that clash render fine by the schema and crash-loop the pod,
	// so the chart refuses them, naming the value to change; capstan
	// render refuses them as helm template does.
	for _, bad := range []struct{ set, want string }{
		{"api.port=8081", "set api.port to another port"},
		{"metrics.port=8081", "set metrics.port to another port"},
		{"api.port=9090,metrics.port=9090", "api.port and metrics.port are both 9090"},
		// A budget that keeps every replica available blocks every drain.
		{"podDisruptionBudget.enabled=true", "podDisruptionBudget.minAvailable 1 leaves no replica of 1 to evict"},
	} {
		if out, err := helm(t, "template", "capstan", chart, "--set", bad.set); err == nil || !strings.Contains(out, bad.want) {
			t.Errorf("helm template --set %s must fail saying %q: %v\n%s", bad.set, bad.want, err, out)
		}
		cmd := cli.NewRootCommand()
		cmd.SetArgs([]string{"render", "capstan", chart, "--kube-version", "v1.33.2", "--set", bad.set})
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		if err := cmd.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("capstan render --set %s must fail saying %q: %v", bad.set, bad.want, err)
		}
	}
	for _, good := range []string{"gitMemoryBudget=32Mi", "gitMemoryBudget=33554432", "gitMemoryBudget=32768Ki", "gitMemoryBudget=0.03125Gi", "gitMemoryBudget=33.554432M"} {
		if out, err := helm(t, "template", "capstan", chart, "--set-string", good); err != nil {
			t.Errorf("helm template --set-string %s: a budget of at least 32Mi must pass the schema: %v\n%s", good, err, out)
		}
	}
	if out, err := helm(t, "template", "capstan", chart, "--set", "render.workers=1"); err != nil {
		t.Errorf("helm template --set render.workers=1: %v\n%s", err, out)
	}
	for _, good := range []string{"api.enabled=false,api.port=8081", "metrics.enabled=false,metrics.port=8080"} {
		if out, err := helm(t, "template", "capstan", chart, "--set", good); err != nil {
			t.Errorf("helm template --set %s: a port that is not listened on must not clash: %v\n%s", good, err, out)
		}
	}
	if out, err := helm(t, "template", "capstan", chart, "--set", "metrics.serviceMonitor.enabled=true"); err == nil || !strings.Contains(out, "Prometheus Operator") {
		t.Errorf("a ServiceMonitor without its CRD must fail with a reason: %v\n%s", err, out)
	}
}

// TestChartShardsDoNotCollide renders the chart as the main release and as
// a shard: the shard's cluster-wide objects carry its name, and it leaves
// the user roles to the main release, so both install side by side.
func TestChartShardsDoNotCollide(t *testing.T) {
	clusterScoped := func(out string) map[string]bool {
		names := map[string]bool{}
		for _, obj := range documents(t, out) {
			kind, _ := obj["kind"].(string)
			if kind == "ClusterRole" || kind == "ClusterRoleBinding" {
				names[kind+"/"+obj["metadata"].(map[string]any)["name"].(string)] = true
			}
		}
		return names
	}
	main, err := helm(t, "template", "capstan", chart, "-n", "capstan-system")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, main)
	}
	shard, err := helm(t, "template", "capstan", chart, "-n", "capstan-shard-a", "--set", "shard=a")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, shard)
	}
	m, s := clusterScoped(main), clusterScoped(shard)
	if len(m) < 6 || len(s) < 3 {
		t.Fatalf("cluster-wide RBAC: main %v, shard %v", m, s)
	}
	for name := range s {
		if m[name] {
			t.Errorf("the shard's %s collides with the main release's", name)
		}
	}
	if !strings.Contains(shard, "--watch-label-selector=capstan.dev/shard=a") {
		t.Errorf("the shard does not select its Addons:\n%s", shard)
	}
}

// TestChartRolloutStrategy renders the controller's Deployment with and
// without leader election: with it, the new pod comes up beside the old
// one (maxSurge 1, maxUnavailable 0), so a pod that waits for CRDs of its
// version holds the rollout while the old one keeps reconciling; without
// it, the old pod goes first (maxSurge 0), so two controllers never run
// at once.
func TestChartRolloutStrategy(t *testing.T) {
	surge := map[string]any{"maxSurge": float64(1), "maxUnavailable": float64(0)}
	oldFirst := map[string]any{"maxSurge": float64(0), "maxUnavailable": float64(1)}
	for _, c := range []struct {
		set      string
		elect    bool
		strategy map[string]any
	}{
		{"leaderElect=true", true, surge},
		{"leaderElect=true,replicas=2", true, surge},
		{"leaderElect=false,replicas=2", true, surge},
		{"leaderElect=false", false, oldFirst},
	} {
		t.Run(c.set, func(t *testing.T) {
			out, err := helm(t, "template", "capstan", chart, "-n", "capstan-system", "--set", c.set,
				"--show-only", "templates/deployment.yaml")
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, out)
			}
			d := documents(t, out)[0]
			if elect := strings.Contains(out, "- --leader-elect\n"); elect != c.elect {
				t.Fatalf("--leader-elect rendered %v, want %v", elect, c.elect)
			}
			want := map[string]any{"type": "RollingUpdate", "rollingUpdate": c.strategy}
			if diff := cmp.Diff(want, d["spec"].(map[string]any)["strategy"]); diff != "" {
				t.Errorf("the rollout strategy (-want +got):\n%s", diff)
			}
		})
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
	env := map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if env["POD_NAME"] != "metadata.name" || env["POD_NAMESPACE"] != "metadata.namespace" {
		t.Errorf("the controller cannot find its own Pod to label it as the leader: its downward API environment is %v", env)
	}
	api := &corev1.Service{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "capstan-system", Name: "capstan"}, api); err != nil {
		t.Fatal(err)
	}
	if api.Spec.Selector[capstanv1.LeaderLabel] != "true" {
		t.Errorf("the API's Service does not select the leader's Pod: %v", api.Spec.Selector)
	}
	upgradeCRDs(t)
	// A shard installs beside it, in a namespace of its own, and its pod
	// runs too; it applies its cluster-profile add-ons as an account of
	// another name.
	if out, err := helm(t, "install", "capstan-shard-a", chart, "-n", "capstan-shard-a", "--create-namespace", "--set", "shard=a,addonsServiceAccount=shard-a-addons", "--wait", "--timeout", "3m"); err != nil {
		t.Fatalf("helm install of a shard beside the main release: %v\n%s", err, out)
	}
	shard := &appsv1.Deployment{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "capstan-shard-a", Name: "capstan-controller"}, shard); err != nil {
		t.Fatal(err)
	}
	if args := strings.Join(shard.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--watch-label-selector=capstan.dev/shard=a") || !strings.Contains(args, "--addons-service-account=shard-a-addons") {
		t.Errorf("the shard runs with %q", args)
	}
	// RBAC lets the shard's controller impersonate that account and no
	// other, and lets the account do what a cluster add-on does.
	for _, check := range []struct {
		user string
		attr authorizationv1.ResourceAttributes
		want bool
	}{
		{"system:serviceaccount:capstan-shard-a:capstan-controller", authorizationv1.ResourceAttributes{Namespace: "capstan-shard-a", Verb: "impersonate", Resource: "serviceaccounts", Name: "shard-a-addons"}, true},
		{"system:serviceaccount:capstan-shard-a:capstan-controller", authorizationv1.ResourceAttributes{Namespace: "capstan-shard-a", Verb: "impersonate", Resource: "serviceaccounts", Name: "capstan-addons"}, false},
		{"system:serviceaccount:capstan-shard-a:shard-a-addons", authorizationv1.ResourceAttributes{Verb: "create", Resource: "namespaces"}, true},
		// The leader labels its own Pod, in its namespace and nowhere else.
		{"system:serviceaccount:capstan-shard-a:capstan-controller", authorizationv1.ResourceAttributes{Namespace: "capstan-shard-a", Verb: "patch", Resource: "pods", Name: "capstan-controller-0"}, true},
		{"system:serviceaccount:capstan-shard-a:capstan-controller", authorizationv1.ResourceAttributes{Namespace: "default", Verb: "patch", Resource: "pods", Name: "web-0"}, false},
		// It reads pods (a hook Job's, for its progress) but deletes none:
		// a Job's pods go with it, deleted by the garbage collector.
		{"system:serviceaccount:capstan-shard-a:capstan-controller", authorizationv1.ResourceAttributes{Namespace: "kube-system", Verb: "list", Resource: "pods"}, true},
		{"system:serviceaccount:capstan-shard-a:capstan-controller", authorizationv1.ResourceAttributes{Namespace: "kube-system", Verb: "delete", Resource: "pods", Name: "kube-proxy-x"}, false},
		{"system:serviceaccount:capstan-system:capstan-controller", authorizationv1.ResourceAttributes{Namespace: "capstan-system", Verb: "delete", Resource: "pods", Name: "capstan-controller-0"}, false},
	} {
		// NOTE: RBAC decides from its informers' caches, which may not
		// hold the release's bindings yet; a refusal is asked once they
		// grant the rest.
		review := &authorizationv1.SubjectAccessReview{}
		var asked error
		_ = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			review = &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: check.user, ResourceAttributes: &check.attr}}
			asked = c.Create(ctx, review)
			return asked == nil && review.Status.Allowed == check.want, asked
		})
		if asked != nil {
			t.Fatalf("asking whether %s may %s %s: %v", check.user, check.attr.Verb, check.attr.Resource, asked)
		}
		if review.Status.Allowed != check.want {
			t.Errorf("%s may %s %s %q: %v, want %v (%s)", check.user, check.attr.Verb, check.attr.Resource, check.attr.Name, review.Status.Allowed, check.want, review.Status.Reason)
		}
	}
	for _, rel := range []struct{ name, ns string }{{"capstan-shard-a", "capstan-shard-a"}, {"capstan", "capstan-system"}} {
		if out, err := helm(t, "uninstall", rel.name, "-n", rel.ns, "--wait"); err != nil {
			t.Errorf("helm uninstall %s: %v\n%s", rel.name, err, out)
		}
	}
}

// TestChartNotesOfAShard installs a shard's release as a dry run: its notes
// say that the release without a shard must leave the shard's Addons
// first, with the command to do it, as two controllers that select one
// Addon both apply it and run its hooks. A release without a shard has
// no notes.
func TestChartNotesOfAShard(t *testing.T) {
	out, err := helm(t, "install", "capstan-shard-a", chart, "-n", "capstan-shard-a", "--dry-run=client", "--set", "shard=a")
	if err != nil {
		t.Fatalf("helm install --dry-run of a shard: %v\n%s", err, out)
	}
	for _, want := range []string{"selector, capstan.dev/shard=a, selects", "--set-string watchLabelSelector='!capstan.dev/shard'"} {
		if !strings.Contains(out, want) {
			t.Errorf("the notes of a shard's release do not say %q:\n%s", want, out)
		}
	}
	out, err = helm(t, "install", "capstan", chart, "-n", "capstan-system", "--dry-run=client")
	if err != nil || strings.Contains(out, "watchLabelSelector") {
		t.Errorf("the release without a shard: %v, notes:\n%s", err, out)
	}
}

// TestChartIsASubchart renders a parent chart that carries charts/capstan
// as a dependency, with a global value: Helm hands every subchart the
// parent's globals, so the schema must take them. The dependency also has
// Helm's usual condition, capstan.enabled, which Helm checks against this
// chart's schema too, whether it turns capstan on or off.
func TestChartIsASubchart(t *testing.T) {
	parent := t.TempDir()
	if err := os.CopyFS(filepath.Join(parent, "charts", "capstan"), os.DirFS(chart)); err != nil {
		t.Fatal(err)
	}
	version := chartVersion(t)
	parentChart := "apiVersion: v2\nname: platform\nversion: 0.1.0\ndependencies:\n- name: capstan\n  version: " + version + "\n  condition: capstan.enabled\n"
	if err := os.WriteFile(filepath.Join(parent, "Chart.yaml"), []byte(parentChart), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		set     []string
		enabled bool
	}{
		{nil, true},
		{[]string{"--set", "global.imageRegistry=registry.example"}, true},
		{[]string{"--set", "capstan.enabled=true"}, true},
		{[]string{"--set", "capstan.enabled=false"}, false},
	} {
		args := append([]string{"platform", parent, "-n", "capstan-system", "--kube-version", "v1.33.2"}, c.set...)
		out, err := helm(t, append([]string{"template"}, args...)...)
		if err != nil || strings.Contains(out, "name: capstan-controller") != c.enabled {
			t.Errorf("helm template of a parent chart %v (capstan rendered: %v): %v\n%s", c.set, c.enabled, err, out)
		}
		cmd := cli.NewRootCommand()
		cmd.SetArgs(append([]string{"render"}, args...))
		var stdout, stderr bytes.Buffer
		cmd.SetOut(&stdout)
		cmd.SetErr(&stderr)
		if err := cmd.ExecuteContext(context.Background()); err != nil {
			t.Errorf("capstan render of a parent chart %v: %v\n%s", c.set, err, stderr.String())
		} else if strings.Contains(stdout.String(), "name: capstan-controller") != c.enabled {
			t.Errorf("capstan render of a parent chart %v: capstan rendered is not %v", c.set, c.enabled)
		}
	}
}

// chartVersion reads the version of charts/capstan, for a parent chart's
// dependency on it.
func chartVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Version string `json:"version"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil || meta.Version == "" {
		t.Fatalf("the version of %s: %v", chart, err)
	}
	return meta.Version
}

// upgradeCRDs applies a next release's CRDs, one description changed, over
// those helm install applied, as docs/install.md says an upgrade does.
// Helm 4 applies crds/ server-side as the field manager helm, so
// kubectl's own server-side apply of a changed field conflicts; the
// documented command, as helm, does not, nor does a later helm install
// (the shard's, in TestChartInstalls) over it.
func upgradeCRDs(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(chart, "crds", "capstan.dev_addons.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	version := crd["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)
	version["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["description"] = "Addon, as the next release describes it."
	if data, err = yaml.Marshal(crd); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "capstan.dev_addons.yaml"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "kubectl", "apply", "--server-side", "-f", dir); err == nil || !strings.Contains(out, "conflict") {
		t.Errorf("kubectl apply --server-side over Helm 4's CRDs must conflict, or the upgrade needs no --force-conflicts: %v\n%s", err, out)
	}
	if out, err := run(t, "kubectl", "apply", "--server-side", "--field-manager=helm", "--force-conflicts", "-f", dir); err != nil {
		t.Errorf("the documented CRD upgrade: %v\n%s", err, out)
	}
	out, err := run(t, "kubectl", "get", "crd", "addons.capstan.dev", "-o", "jsonpath={.spec.versions[0].schema.openAPIV3Schema.description}")
	if err != nil || out != "Addon, as the next release describes it." {
		t.Errorf("the CRD after the upgrade describes Addons as %q: %v", out, err)
	}
}
