package cli

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"capstan.dev/capstan/internal/testcontroller"
)

// chartServer serves the archive of a chart demo 1.0.0 of files over
// https on loopback, and returns the archive's URL and a CA file that
// trusts the server.
func chartServer(t *testing.T, files map[string]string) (url, caFile string) {
	t.Helper()
	archive, err := testcontroller.ChartArchive("demo", files)
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(archive) }))
	t.Cleanup(server.Close)
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return server.URL + "/demo-1.0.0.tgz", caFile
}

// writeDefinition writes content as addons/name.yaml of a new folder and
// returns its path.
func writeDefinition(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "addons", name+".yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRenderGitopsDefinitionOfAChart: a definition file of a gitops
// repository renders as the Addon the syncer makes of it: its chart, its
// values, its namespace. A value the chart's fail message quotes is
// hidden, as for an Addon file.
func TestRenderGitopsDefinitionOfAChart(t *testing.T) {
	url, caFile := chartServer(t, map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: demo\nversion: 1.0.0\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n  namespace: {{ .Release.Namespace }}\ndata:\n  level: {{ .Values.level | quote }}\n" +
			"{{- if eq .Values.mode \"broken\" }}{{ fail (printf \"mode %s with password %s is not supported\" .Values.mode .Values.password) }}{{ end }}\n",
	})
	def := writeDefinition(t, "demo", "name: demo\nnamespace: tenant\nreleaseName: shop\nhelm:\n  url: "+url+"\nvalues:\n  level: debug\n  mode: fine\n")
	out, stderr, err := runCapstan(t, "render", "-f", def, "--fetch-allow=127.0.0.1/32", "--ca-file", caFile)
	if err != nil {
		t.Fatalf("capstan render -f addons/demo.yaml: %v\n%s", err, stderr)
	}
	got := objectsOf(t, out)
	cm, ok := got["v1/ConfigMap/tenant/shop"]
	if !ok || len(got) != 1 {
		t.Fatalf("objects = %v, want the ConfigMap tenant/shop of the release name and namespace the definition sets", got)
	}
	if level := str(cm["data"].(map[string]any)["level"]); level != "debug" {
		t.Errorf("data.level = %q, want the definition's value debug", level)
	}

	const secret = "S3CRET-hunter2"
	broken := writeDefinition(t, "demo", "name: demo\nhelm:\n  url: "+url+"\nvalues:\n  mode: broken\n  password: "+secret+"\n")
	out, stderr, err = runCapstan(t, "render", "-f", broken, "--fetch-allow=127.0.0.1/32", "--ca-file", caFile)
	if err == nil || !strings.Contains(err.Error(), "is not supported") {
		t.Fatalf("render of a definition whose chart fails: %v; want the chart's fail message", err)
	}
	if all := out + stderr + err.Error(); strings.Contains(all, secret) {
		t.Errorf("the definition's value is printed:\n%s", all)
	}
}

// TestRenderGitopsDefinitionOfAFolderOfItsRepository: a git.path without
// git.url is a folder of the gitops repository, which the syncer renders at
// the commit of the definition; capstan render checks and renders it from
// the checkout that holds the file, at its HEAD commit.
func TestRenderGitopsDefinitionOfAFolderOfItsRepository(t *testing.T) {
	url := gitRepoWith(t, map[string]string{
		"addons/app.yaml":    "name: app\nnamespace: tenant\ngit:\n  path: deploy/app\n",
		"deploy/app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  level: info\n",
	})
	dir := strings.TrimPrefix(url, "file://")
	out, stderr, err := runCapstan(t, "render", "-f", filepath.Join(dir, "addons", "app.yaml"))
	if err != nil {
		t.Fatalf("capstan render -f addons/app.yaml: %v\n%s", err, stderr)
	}
	if got := objectsOf(t, out); len(got) != 1 || got["v1/ConfigMap//settings"] == nil {
		t.Errorf("objects = %v, want the folder's ConfigMap settings", got)
	}
	if !strings.Contains(stderr, "the definition file as it is on disk") {
		t.Errorf("stderr = %q, want it to say the folder is rendered at HEAD and the file as it is on disk", stderr)
	}

	// The folder is checked at the commit rendered, HEAD, as the syncer
	// checks it at the definition's commit, not in the working tree: a
	// folder not committed is missing, with the syncer's message.
	for name, content := range map[string]string{
		"addons/new.yaml":    "name: new\ngit:\n  path: deploy/new\n",
		"deploy/new/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fresh\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err = runCapstan(t, "render", "-f", filepath.Join(dir, "addons", "new.yaml"))
	if err == nil || !strings.Contains(err.Error(), `the folder "deploy/new" does not exist at this commit: commit the folder with its definition`) {
		t.Errorf("render of a definition whose folder is not committed: %v; want the syncer's message", err)
	}

	// A folder committed but not in the working tree (a sparse checkout,
	// or removed by hand) renders as committed.
	if err := os.RemoveAll(filepath.Join(dir, "deploy", "app")); err != nil {
		t.Fatal(err)
	}
	out, stderr, err = runCapstan(t, "render", "-f", filepath.Join(dir, "addons", "app.yaml"))
	if err != nil {
		t.Fatalf("render of a definition whose committed folder is not checked out: %v\n%s", err, stderr)
	}
	if got := objectsOf(t, out); len(got) != 1 || got["v1/ConfigMap//settings"] == nil {
		t.Errorf("objects = %v, want the committed folder's ConfigMap settings", got)
	}

	// Outside a git checkout there is no commit to render the folder at.
	loose := writeDefinition(t, "app", "name: app\ngit:\n  path: deploy/app\n")
	if _, _, err := runCapstan(t, "render", "-f", loose); err == nil || !strings.Contains(err.Error(), "no git checkout") {
		t.Errorf("render of a git.path definition outside git: %v; want it refused, naming the checkout", err)
	}
}

// TestRenderRefusesABadDefinitionAndWhatIsNeither: a definition the syncer
// would not apply fails with its problems, each with the file and line;
// a file that is neither an Addon nor a definition is refused, saying what
// it holds and what capstan render -f takes.
func TestRenderRefusesABadDefinitionAndWhatIsNeither(t *testing.T) {
	for _, tc := range []struct{ content, want string }{
		{"name: other\nhelm:\n  url: https://charts.example.test/demo-1.0.0.tgz\n", ":1: name"},
		{"name: demo\nhelm:\n  url: https://charts.example.test/demo-1.0.0.tgz\n  chartz: demo\n", ":4: helm.chartz: unknown field"},
		// A git: with url or path is a source, and the file a definition.
		{"name: demo\ngit:\n  path: deploy/demo\n  branch: main\n", ":4: git.branch: unknown field"},
	} {
		bad := writeDefinition(t, "demo", tc.content)
		_, _, err := runCapstan(t, "render", "-f", bad)
		if err == nil || !strings.Contains(err.Error(), bad+tc.want) || !strings.Contains(err.Error(), "gitops definition") {
			t.Errorf("render of an invalid definition: %v; want an error that says %q", err, bad+tc.want)
		}
	}

	cases := []struct{ name, content, want string }{
		{"values", "replicas: 2\nimage:\n  tag: v1\n", "a mapping of image, replicas, which is neither an Addon"},
		{"another kind", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n", "holds a Deployment (apps/v1), not an Addon"},
		{"a list", "- name: demo\n", "holds a list"},
		// Chart values often have a top-level name: or a git: block of
		// their own: a definition names its source.
		{"values with a name", "name: web\nreplicaCount: 2\nimage: {tag: v1}\n", "a mapping of image, name, replicaCount, which is neither an Addon"},
		{"values with a git block", "name: gitea\ngit:\n  image: gitea/gitea\n  lfs: true\n", "a mapping of git, name, which is neither an Addon"},
		{"values with a git string", "git: https://git.example.test/app.git\n", "a mapping of git, which is neither an Addon"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runCapstan(t, "render", "-f", writeAddon(t, tc.content))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "definition of a gitops repository") {
				t.Fatalf("error = %v, want one that says %q and what capstan render -f takes", err, tc.want)
			}
			if strings.Contains(tc.want, "a mapping of") && !strings.Contains(err.Error(), "to render a chart, give its release name and path: capstan render NAME CHART -f") {
				t.Errorf("error = %v, want the way to give values to a chart", err)
			}
		})
	}
}

// TestRenderGitopsDefinitionNamesItsOwnFields: the messages of a render
// name the fields of the Addon (spec.values, spec.chart.url); for a
// definition, whose fields are values and helm.url, one line says which
// is which, on stderr before the first such message, or with the error.
func TestRenderGitopsDefinitionNamesItsOwnFields(t *testing.T) {
	url := gitRepoWith(t, map[string]string{
		"addons/app.yaml":    "name: app\ngit:\n  path: deploy/app\nvalues:\n  level: debug\n",
		"deploy/app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n",
	})
	const note = "spec.chart is its helm, spec.git its git, spec.values its values, spec.valuesFrom its valuesFrom"
	file := filepath.Join(strings.TrimPrefix(url, "file://"), "addons", "app.yaml")
	_, stderr, err := runCapstan(t, "render", "-f", file)
	if err == nil || !strings.Contains(stderr, "spec.values") {
		t.Fatalf("render of a folder definition with values: %v\n%s; want the values refused, naming spec.values", err, stderr)
	}
	if i := strings.Index(stderr, note); i < 0 || i > strings.Index(stderr, "spec.values:") {
		t.Errorf("stderr = %q, want the line that maps the Addon's fields to the definition's before the first one named", stderr)
	}

	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "gone", http.StatusNotFound) }))
	t.Cleanup(server.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	def := writeDefinition(t, "demo", "name: demo\nhelm:\n  url: "+server.URL+"/demo-1.0.0.tgz\n")
	_, stderr, err = runCapstan(t, "render", "-f", def, "--fetch-allow=127.0.0.1/32", "--ca-file", caFile)
	if err == nil || !strings.Contains(err.Error(), "spec.chart.url") || !strings.Contains(err.Error(), note) {
		t.Errorf("render of a definition whose chart is missing: %v\n%s; want the error to name spec.chart.url and map it to helm", err, stderr)
	}

	// An Addon file's fields are the ones named: no line.
	addon := writeAddon(t, "apiVersion: capstan.dev/v1alpha1\nkind: Addon\nmetadata:\n  name: demo\nspec:\n  chart:\n    url: "+server.URL+"/demo-1.0.0.tgz\n")
	_, stderr, err = runCapstan(t, "render", "-f", addon, "--fetch-allow=127.0.0.1/32", "--ca-file", caFile)
	if err == nil || strings.Contains(err.Error()+stderr, note) {
		t.Errorf("render of an Addon file whose chart is missing: %v\n%s; want no line about a definition", err, stderr)
	}
}
