package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/gitops/gitserver"
	"capstan.dev/capstan/internal/testcontroller"
)

// charts is where the rendering tests keep their charts.
const charts = "../render/testdata/charts"

// helmBinary returns bin/helm, built by `make bin` (hack/helm/build.sh) from
// the Helm version capstan links, or fails the test saying how to build it.
func helmBinary(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CAPSTAN_BIN_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "bin")
	}
	p, err := filepath.Abs(filepath.Join(dir, "helm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run make bin (or hack/helm/build.sh) to build the Helm CLI the equivalence tests compare with", p)
	}
	return p
}

// runCapstan runs `capstan args...` in process and returns stdout, stderr and the error.
func runCapstan(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := NewRootCommand()
	cmd.SetArgs(args)
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	err := cmd.ExecuteContext(context.Background())
	return stdout.String(), stderr.String(), err
}

// runHelm runs bin/helm with a home of its own, so no user configuration leaks in.
func runHelm(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helmBinary(t), args...)
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "HELM_CACHE_HOME=" + home + "/cache",
		"HELM_CONFIG_HOME=" + home + "/config", "HELM_DATA_HOME=" + home + "/data"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// objectsOf parses multi-document YAML into objects keyed by apiVersion,
// kind, namespace and name. A key seen twice fails the test.
func objectsOf(t *testing.T, out string) map[string]map[string]any {
	t.Helper()
	objs := map[string]map[string]any{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("output is not YAML: %v", err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("output document is not YAML: %v\n%s", err, doc)
		}
		if obj == nil {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		key := strings.Join([]string{str(obj["apiVersion"]), str(obj["kind"]), str(meta["namespace"]), str(meta["name"])}, "/")
		if _, dup := objs[key]; dup {
			t.Fatalf("%s is rendered twice", key)
		}
		objs[key] = obj
	}
	return objs
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// TestRenderMatchesHelmTemplate renders each chart with capstan render and
// with helm template of the same Helm version, with the same flags, and
// compares the parsed objects field for field.
func TestRenderMatchesHelmTemplate(t *testing.T) {
	helmBinary(t)
	tgz := filepath.Join(t.TempDir(), "packaged")
	if _, stderr, err := runHelm(t, "package", filepath.Join(charts, "web"), "--destination", tgz); err != nil {
		t.Fatalf("helm package: %v: %s", err, stderr)
	}
	cases := []struct {
		name  string
		args  []string
		upTo  int // the number of objects, so that an empty render cannot pass
		hooks bool
	}{
		{name: "helpers, files, tpl and notes", args: []string{"shop", charts + "/web", "-n", "apps"}, upTo: 4},
		{name: "values files and --set", args: []string{"shop", charts + "/web", "-n", "apps", "-f", "../render/testdata/values/web-prod.yaml",
			"--set", "replicaCount=6,image.tag=2.2.0", "--set-string", "env.FEATURE_X=007"}, upTo: 4},
		{name: "packaged archive", args: []string{"shop", tgz + "/web-1.2.3.tgz", "-n", "apps"}, upTo: 4},
		{name: "subcharts with defaults", args: []string{"stack", charts + "/umbrella", "-n", "stack"}, upTo: 3},
		{name: "subcharts: alias on, tag off", args: []string{"stack", charts + "/umbrella", "-n", "stack",
			"--set", "worker.enabled=true,tags.extras=false,global.environment=prod"}, upTo: 3},
		{name: "library chart", args: []string{"lib", charts + "/withlib", "-n", "default"}, upTo: 3},
		{name: "crds and a custom resource", args: []string{"op", charts + "/operator", "-n", "operators", "--api-versions", "example.com/v1"}, upTo: 6},
		{name: "crds without the API", args: []string{"op", charts + "/operator", "-n", "operators"}, upTo: 5},
		{name: "hooks on install", args: []string{"h", charts + "/hooks", "-n", "jobs"}, upTo: 4, hooks: true},
		{name: "hooks on upgrade", args: []string{"h", charts + "/hooks", "-n", "jobs", "--is-upgrade"}, upTo: 4, hooks: true},
		{name: "capabilities of a new cluster", args: []string{"c", charts + "/caps", "-n", "default", "--kube-version", "v1.33.2",
			"--api-versions", "monitoring.coreos.com/v1,networking.k8s.io/v1/Ingress"}, upTo: 3},
		{name: "capabilities of an old cluster", args: []string{"c", charts + "/caps", "-n", "default", "--kube-version", "1.26"}, upTo: 1},
		{name: "schema and required satisfied", args: []string{"s", charts + "/secured", "-n", "secure",
			"-f", charts + "/secured/values-prod.yaml"}, upTo: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The Kubernetes version is given unless the case gives one:
			// without it, Helm's SDK in a test binary defaults to v1.20.
			args := tc.args
			if !strings.Contains(strings.Join(args, " "), "--kube-version") {
				args = append(args, "--kube-version", "v1.33.2")
			}
			helmOut, helmErr, err := runHelm(t, append([]string{"template"}, append(args, "--include-crds", "--skip-tests")...)...)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, helmErr)
			}
			renderArgs := append([]string{"render"}, args...)
			if tc.hooks {
				renderArgs = append(renderArgs, "--show-hooks")
			} else {
				helmOut, _, _ = runHelm(t, append([]string{"template"}, append(args, "--include-crds", "--skip-tests", "--no-hooks")...)...)
			}
			out, stderr, err := runCapstan(t, renderArgs...)
			if err != nil {
				t.Fatalf("capstan render: %v\n%s", err, stderr)
			}
			want, got := objectsOf(t, helmOut), objectsOf(t, out)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("capstan render and helm template differ (-helm +capstan):\n%s", diff)
			}
			if len(got) < tc.upTo {
				t.Errorf("rendered %d objects, want at least %d", len(got), tc.upTo)
			}
		})
	}
}

// TestRenderFailsWhereHelmFails checks that bad values fail both, and that
// capstan's error names the template and gives the chart's own message,
// the values the user gave hidden in it.
func TestRenderFailsWhereHelmFails(t *testing.T) {
	helmBinary(t)
	const secret = "topsecret-user-name"
	cases := []struct {
		name, want string
		args       []string
		noSecret   bool
	}{
		{name: "schema: replicas over the maximum", want: "values don't meet the specifications of the schema",
			args: []string{"s", charts + "/secured", "--set", "replicas=20,auth.password=x"}},
		{name: "schema: mode outside the enum", want: "values don't meet the specifications of the schema",
			args: []string{"s", charts + "/secured", "--set", "mode=loose,auth.password=x"}},
		{name: "required value missing", want: "secured/templates/secret.yaml line 8 column 15: auth.password is required for user (hidden)",
			args: []string{"s", charts + "/secured", "--set", "auth.username=" + secret}, noSecret: true},
		{name: "fail with a value", want: "secured/templates/check.yaml line 2 column 4: mode (hidden) cannot be used with password (hidden)",
			args: []string{"s", charts + "/secured", "--set", "mode=broken,auth.password=" + secret}, noSecret: true},
		{name: "chart needs a newer cluster", want: "requires Kubernetes >=1.25.0-0",
			args: []string{"c", charts + "/caps", "--kube-version", "v1.24.0"}},
		{name: "chart apiVersion v3", want: `chart apiv3 has Chart.yaml apiVersion "v3", which Helm 4 cannot install`,
			args: []string{"a", charts + "/apiv3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if !strings.Contains(strings.Join(args, " "), "--kube-version") {
				args = append(args, "--kube-version", "v1.33.2")
			}
			if _, _, err := runHelm(t, append([]string{"template"}, args...)...); err == nil {
				t.Fatal("helm template succeeded; the case does not exercise a failure")
			}
			out, _, err := runCapstan(t, append([]string{"render"}, args...)...)
			if err == nil {
				t.Fatalf("capstan render succeeded:\n%s", out)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one that says %q", err, tc.want)
			}
			if tc.noSecret && strings.Contains(err.Error(), secret) {
				t.Errorf("the error carries the value: %v", err)
			}
		})
	}
}

func TestRenderWarnsOfUnknownHookEvents(t *testing.T) {
	out, stderr, err := runCapstan(t, "render", "h", charts+"/hooks", "--show-hooks", "--kube-version", "v1.33.2")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "h-typo") || !strings.Contains(stderr, `"pre-instal"`) {
		t.Errorf("stderr = %q, want a warning naming the hook h-typo and its event", stderr)
	}
	if strings.Contains(out, "h-typo") || strings.Contains(out, "h-test") {
		t.Errorf("the output holds the hook with an unknown event or the test hook:\n%s", out)
	}
}

func TestRenderRestricted(t *testing.T) {
	// The operator chart creates CRDs and cluster RBAC: the restricted
	// profile refuses them, and the command fails after printing.
	out, stderr, err := runCapstan(t, "render", "op", charts+"/operator", "-n", "team", "--restricted", "--kube-version", "v1.33.2")
	if err == nil || !strings.Contains(err.Error(), "guardrails") {
		t.Fatalf("error = %v, want a guardrail failure", err)
	}
	if !strings.Contains(stderr, "ClusterRole op-operator") || out == "" {
		t.Errorf("stderr = %q, want the ClusterRole named as a violation, and the objects printed", stderr)
	}
	// The secured chart stays inside the guardrails once hardened, but is
	// not written for Capstan: Chart.yaml lacks the annotation.
	_, stderr, err = runCapstan(t, "render", "s", charts+"/secured", "-n", "team", "--restricted", "--kube-version", "v1.33.2",
		"--set", "auth.password=x")
	if err == nil || !strings.Contains(stderr, "(chart-for-capstan)") {
		t.Errorf("restricted render of a chart without %s: %v, stderr %q; want a chart-for-capstan violation", capstanv1.ChartAddonAnnotation, err, stderr)
	}
	secured := filepath.Join(t.TempDir(), "secured")
	if err := os.CopyFS(secured, os.DirFS(charts+"/secured")); err != nil {
		t.Fatal(err)
	}
	chartYAML := "apiVersion: v2\nname: secured\nversion: 2.1.0\nannotations:\n  " + capstanv1.ChartAddonAnnotation + ": \"true\"\n"
	if err := os.WriteFile(filepath.Join(secured, "Chart.yaml"), []byte(chartYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err = runCapstan(t, "render", "s", secured, "-n", "team", "--restricted", "--kube-version", "v1.33.2",
		"--set", "auth.password=x")
	if err != nil {
		t.Fatalf("restricted render of a conforming chart: %v\n%s", err, stderr)
	}
	if !strings.Contains(out, "runAsNonRoot: true") {
		t.Errorf("the hardened Deployment has no runAsNonRoot:\n%s", out)
	}
}

// gitRepo makes a git repository on disk with a base and an overlay, and
// returns its file:// URL.
func gitRepo(t *testing.T) string {
	t.Helper()
	return gitRepoWith(t, map[string]string{
		"deploy/base/kustomization.yaml": "resources: [cm.yaml]\n",
		"deploy/base/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  level: info\n",
		"deploy/prod/kustomization.yaml": "namespace: prod\nnamePrefix: prod-\nresources: [../base]\n",
	})
}

// gitRepoWith makes a git repository on disk of files, and returns its
// file:// URL.
func gitRepoWith(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."},
		{"-c", "user.name=t", "-c", "user.email=t@example.test", "commit", "-q", "-m", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return "file://" + dir
}

func TestRenderAddonFile(t *testing.T) {
	url := gitRepo(t)
	addon := filepath.Join(t.TempDir(), "addon.yaml")
	content := "apiVersion: capstan.dev/v1alpha1\nkind: Addon\nmetadata:\n  name: settings\n  namespace: team\nspec:\n  git:\n    url: " +
		url + "\n    path: deploy/prod\n"
	if err := os.WriteFile(addon, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runCapstan(t, "render", "-f", addon)
	if err != nil {
		t.Fatalf("capstan render -f addon.yaml: %v\n%s", err, stderr)
	}
	got := objectsOf(t, out)
	if _, ok := got["v1/ConfigMap/prod/prod-settings"]; !ok || len(got) != 1 {
		t.Errorf("objects = %v, want the overlay's ConfigMap prod/prod-settings", got)
	}

	notAddon := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(notAddon, []byte("replicas: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCapstan(t, "render", "-f", notAddon); err == nil || !strings.Contains(err.Error(), "neither an Addon") {
		t.Errorf("error = %v, want one that says the file is neither an Addon nor a definition", err)
	}
}

// TestRenderAddonFileOfAFolderLaidOutForFlux: an Addon whose git folder,
// served over HTTP, has no kustomization but a subfolder with one renders
// as Flux's kustomize-controller builds it: the subfolder with its
// namePrefix, and the loose Deployment beside it.
func TestRenderAddonFileOfAFolderLaidOutForFlux(t *testing.T) {
	srv := gitserver.Start(t)
	url := srv.Create(t, "fleet")
	gitserver.Clone(t, url).
		Write("clusters/prod/web.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  selector: {matchLabels: {app: web}}\n"+
			"  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: web, image: registry.example/web:1}]\n").
		Write("clusters/prod/monitoring/kustomization.yaml", "namePrefix: mon-\nresources: [settings.yaml]\n").
		Write("clusters/prod/monitoring/settings.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n").
		CommitAndPush("fleet")
	addon := filepath.Join(t.TempDir(), "addon.yaml")
	content := "apiVersion: capstan.dev/v1alpha1\nkind: Addon\nmetadata:\n  name: fleet\nspec:\n  git:\n    url: " + url +
		"\n    revision: main\n    path: clusters/prod\n"
	if err := os.WriteFile(addon, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runCapstan(t, "render", "-f", addon, "--fetch-allow=127.0.0.1/32")
	if err != nil {
		t.Fatalf("capstan render -f addon.yaml: %v\n%s", err, stderr)
	}
	got := objectsOf(t, out)
	for _, key := range []string{"v1/ConfigMap//mon-settings", "apps/v1/Deployment//web"} {
		if _, ok := got[key]; !ok || len(got) != 2 {
			t.Errorf("objects = %v, want %s among two", got, key)
		}
	}
}

// TestRenderHidesGivenValuesInSchemaErrors: Helm's schema error quotes a
// value that breaks a pattern, and capstan render's output often lands in a
// CI log; the value given is masked, as in a chart's fail message.
func TestRenderHidesGivenValuesInSchemaErrors(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"Chart.yaml":         "apiVersion: v2\nname: pinned\nversion: 0.1.0\n",
		"values.schema.json": `{"type":"object","properties":{"pw":{"type":"string","pattern":"^[a-z]+$"}}}`,
		"templates/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: pinned\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const secret = "S3CRET-hunter2"
	_, _, err := runCapstan(t, "render", "r", dir, "--set", "pw="+secret)
	if err == nil || !strings.Contains(err.Error(), "values don't meet the specifications of the schema") {
		t.Fatalf("error = %v, want the schema's", err)
	}
	if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "(hidden)") {
		t.Errorf("the error shows the value, or does not say it is hidden: %v", err)
	}
}

// TestRenderAddonFileOfManifestsRefusesValues: a git folder of manifests
// has no values, so --set would be silently dropped.
func TestRenderAddonFileOfManifestsRefusesValues(t *testing.T) {
	addon := filepath.Join(t.TempDir(), "addon.yaml")
	content := "apiVersion: capstan.dev/v1alpha1\nkind: Addon\nmetadata:\n  name: settings\nspec:\n  git:\n    url: " +
		gitRepo(t) + "\n    path: deploy/prod\n"
	if err := os.WriteFile(addon, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--set", "--set-string"} {
		if _, _, err := runCapstan(t, "render", "-f", addon, flag, "level=debug"); err == nil || !strings.Contains(err.Error(), "has no values") {
			t.Errorf("render -f %s: %v; want it refused", flag, err)
		}
	}
}

// TestRenderAddonFileIsStrict: a misspelt field of an Addon file (spec.value
// for spec.values) is an error that names it, not a render of the chart's
// defaults.
func TestRenderAddonFileIsStrict(t *testing.T) {
	addon := filepath.Join(t.TempDir(), "addon.yaml")
	content := "apiVersion: capstan.dev/v1alpha1\nkind: Addon\nmetadata:\n  name: settings\nspec:\n  git:\n    url: " +
		gitRepo(t) + "\n    path: deploy/prod\n  value:\n    replicas: 3\n"
	if err := os.WriteFile(addon, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCapstan(t, "render", "-f", addon)
	if err == nil || !strings.Contains(err.Error(), `unknown field "spec.value"`) {
		t.Errorf("render of an Addon with spec.value: %v; want an error naming the field\n%s", err, out)
	}
}

// TestRenderAddonFileHasTheFetchGuardsFlags: an Addon file's chart is
// fetched through the fetch guard, whose refusal of a loopback address
// names --fetch-allow; capstan render has that flag, and --ca-file.
func TestRenderAddonFileHasTheFetchGuardsFlags(t *testing.T) {
	archive, err := testcontroller.ChartArchive("demo", map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: demo\nversion: 1.0.0\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(archive) }))
	t.Cleanup(server.Close)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	addon := filepath.Join(dir, "addon.yaml")
	content := "apiVersion: capstan.dev/v1alpha1\nkind: Addon\nmetadata:\n  name: demo\nspec:\n  chart:\n    url: " + server.URL + "/demo-1.0.0.tgz\n"
	if err := os.WriteFile(addon, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCapstan(t, "render", "-f", addon)
	if err == nil || !strings.Contains(err.Error(), "--fetch-allow=127.0.0.1") {
		t.Fatalf("render of a chart on loopback: %v; want the guard's refusal, naming --fetch-allow", err)
	}
	out, stderr, err := runCapstan(t, "render", "-f", addon, "--fetch-allow=127.0.0.1/32", "--ca-file", caFile)
	if err != nil {
		t.Fatalf("render with --fetch-allow: %v\n%s", err, stderr)
	}
	if _, ok := objectsOf(t, out)["v1/ConfigMap//demo"]; !ok {
		t.Errorf("render with --fetch-allow printed\n%s\nwant the chart's ConfigMap", out)
	}
}
