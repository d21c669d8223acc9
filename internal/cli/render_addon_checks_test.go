package cli

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/testcontroller"
)

// writeAddon writes an Addon file and returns its path.
func writeAddon(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "addon.yaml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// folderAddon is an Addon file of the folder app of the repository at url,
// in namespace tenant, with spec lines added.
func folderAddon(url, spec string) string {
	return "apiVersion: capstan.dev/v1alpha1\nkind: Addon\nmetadata:\n  name: app\n  namespace: tenant\nspec:\n  git:\n    url: " +
		url + "\n    path: app\n" + spec
}

// wantRules fails the test unless the render failed and stderr names each rule.
func wantRules(t *testing.T, stderr string, err error, rules ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("render succeeded; want it to fail on %v\n%s", rules, stderr)
	}
	for _, r := range rules {
		if !strings.Contains(stderr, "("+r+")") {
			t.Errorf("stderr does not name rule %s:\n%s", r, stderr)
		}
	}
}

// TestRenderRestrictedAddonIsCheckedAsTheControllerChecksIt: a restricted
// Addon renders into its own namespace under its own name, and its spec
// may not ask for another namespace, a release name or a namespace to
// create; capstan render --restricted checks all that, as the controller
// does, rather than render for spec.targetNamespace and pass.
func TestRenderRestrictedAddonIsCheckedAsTheControllerChecksIt(t *testing.T) {
	url := gitRepoWith(t, map[string]string{
		"app/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: kube-system\ndata:\n  level: info\n",
		"app/mine.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mine\ndata:\n  level: info\n",
	})
	addon := writeAddon(t, folderAddon(url, "  targetNamespace: kube-system\n  releaseName: other\n  createNamespace: true\n"))
	_, stderr, err := runCapstan(t, "render", "-f", addon, "--restricted")
	wantRules(t, stderr, err, "target-namespace", "release-name", "create-namespace", "namespace-not-allowed")
	if strings.Contains(stderr, "ConfigMap mine") {
		t.Errorf("the ConfigMap of no namespace is refused, but it goes into the Addon's namespace:\n%s", stderr)
	}

	// --namespace naming another namespace than the Addon's is refused.
	plain := writeAddon(t, folderAddon(url, ""))
	if _, _, err := runCapstan(t, "render", "-f", plain, "--restricted", "-n", "kube-system"); err == nil || !strings.Contains(err.Error(), "namespace tenant") {
		t.Errorf("restricted render with --namespace of another namespace: %v; want it refused", err)
	}
}

// TestRenderRestrictedChartIsCheckedAsTheControllerChecksIt: a restricted
// add-on installs only a chart written for Capstan, which renders the same
// every time; capstan render --restricted refuses the others, given as a
// chart folder or in an Addon file.
func TestRenderRestrictedChartIsCheckedAsTheControllerChecksIt(t *testing.T) {
	files := map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: demo\nversion: 1.0.0\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\ndata:\n  password: {{ randAlphaNum 16 | quote }}\n",
	}
	dir := t.TempDir()
	for name, content := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, stderr, err := runCapstan(t, "render", "demo", dir, "-n", "tenant", "--restricted", "--kube-version", "v1.33.2")
	wantRules(t, stderr, err, "chart-for-capstan", "random-values")

	archive, err := testcontroller.ChartArchive("demo", files)
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(archive) }))
	t.Cleanup(server.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	addon := writeAddon(t, "apiVersion: capstan.dev/v1alpha1\nkind: Addon\nmetadata:\n  name: demo\n  namespace: tenant\nspec:\n  chart:\n    url: "+
		server.URL+"/demo-1.0.0.tgz\n")
	_, stderr, err = runCapstan(t, "render", "-f", addon, "--restricted", "--fetch-allow=127.0.0.1/32", "--ca-file", caFile)
	wantRules(t, stderr, err, "chart-for-capstan", "random-values")
	if !strings.Contains(stderr, "ConfigMap demo data.password") {
		t.Errorf("stderr does not name the random field ConfigMap demo data.password:\n%s", stderr)
	}
}

// TestRenderRefusesSyncWavesThatAreNotNumbers: the controller Blocks an
// object whose sync wave is not a whole number in every profile, and so
// does capstan render.
func TestRenderRefusesSyncWavesThatAreNotNumbers(t *testing.T) {
	url := gitRepoWith(t, map[string]string{
		"app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  annotations:\n    capstan.dev/sync-wave: first\n",
	})
	out, stderr, err := runCapstan(t, "render", "-f", writeAddon(t, folderAddon(url, "")))
	wantRules(t, stderr, err, "sync-wave")
	if !strings.Contains(out, "name: settings") {
		t.Errorf("the objects are not printed before the violations:\n%s", out)
	}
}

// TestRenderAddonFileRefusesFieldsItsSourceHasNoUseFor: values for a git
// folder, substitute or decryption for a chart Block the Addon; capstan
// render fails on them rather than drop them.
func TestRenderAddonFileRefusesFieldsItsSourceHasNoUseFor(t *testing.T) {
	url := gitRepoWith(t, map[string]string{"app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n"})
	chartAddon := func(spec string) string {
		return "apiVersion: capstan.dev/v1alpha1\nkind: Addon\nmetadata:\n  name: demo\nspec:\n  chart:\n    url: https://charts.example.test/demo-1.0.0.tgz\n" + spec
	}
	cases := []struct{ name, addon, want string }{
		{"values for a folder", folderAddon(url, "  values:\n    replicas: 2\n"), "(git-source)"},
		{"valuesFrom for a folder", folderAddon(url, "  valuesFrom:\n  - kind: ConfigMap\n    name: v\n"), "(git-source)"},
		{"substitute for a chart", chartAddon("  substitute:\n    level: debug\n"), "(chart-source)"},
		{"substituteFrom for a chart", chartAddon("  substituteFrom:\n  - kind: ConfigMap\n    name: v\n"), "(chart-source)"},
		{"decryption for a chart", chartAddon("  decryption:\n    secretRef:\n      name: keys\n"), "(chart-source)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, err := runCapstan(t, "render", "-f", writeAddon(t, tc.addon))
			if err == nil {
				t.Fatalf("render succeeded:\n%s", out)
			}
			if !strings.Contains(stderr+err.Error(), tc.want) {
				t.Errorf("error %v, stderr %q; want %s named", err, stderr, tc.want)
			}
		})
	}
}

// TestRenderAddonFileWithVerifyWarns: spec.chart.verify names a Secret of
// keys, which capstan render does not read. The controller accepts such
// an Addon, restricted or not, and Blocks it only on a signature that is
// missing or wrong, so the chart renders, with a warning that its
// signature was not checked.
func TestRenderAddonFileWithVerifyWarns(t *testing.T) {
	archive, err := testcontroller.ChartArchive("demo", map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: demo\nversion: 1.0.0\nannotations:\n  " + capstanv1.ChartAddonAnnotation + ": \"true\"\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\ndata:\n  level: info\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(archive) }))
	t.Cleanup(server.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	addon := writeAddon(t, "apiVersion: capstan.dev/v1alpha1\nkind: Addon\nmetadata:\n  name: demo\n  namespace: tenant\nspec:\n  chart:\n    url: "+
		server.URL+"/demo-1.0.0.tgz\n    verify:\n      provenance:\n        secretRef:\n          name: keyring\n")
	for _, profile := range [][]string{nil, {"--restricted"}} {
		args := append([]string{"render", "-f", addon, "--fetch-allow=127.0.0.1/32", "--ca-file", caFile}, profile...)
		out, stderr, err := runCapstan(t, args...)
		if err != nil {
			t.Fatalf("render %v: %v\n%s", profile, err, stderr)
		}
		if !strings.Contains(out, "name: demo") {
			t.Errorf("render %v does not print the chart's ConfigMap:\n%s", profile, out)
		}
		if !strings.Contains(stderr, "Warning: spec.chart.verify") || !strings.Contains(stderr, "signature is not checked") {
			t.Errorf("render %v does not warn that the signature is not checked:\n%s", profile, stderr)
		}
	}
}

// TestRenderAddonFileIsReadStrictly: a key given twice, a second document
// and an apiVersion that is not the Addon's are errors, not a render of
// one of the keys, of the first document, or of what the API server would
// refuse.
func TestRenderAddonFileIsReadStrictly(t *testing.T) {
	url := gitRepoWith(t, map[string]string{"app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n"})
	good := folderAddon(url, "")
	if _, stderr, err := runCapstan(t, "render", "-f", writeAddon(t, "# the app\n---\n"+good+"---\n")); err != nil {
		t.Fatalf("render of an Addon between empty documents: %v\n%s", err, stderr)
	}
	cases := []struct{ name, addon, want string }{
		{"a key twice", good + "  git:\n    url: " + url + "\n    path: other\n", `key "git" already set`},
		{"two documents", good + "---\n" + strings.Replace(good, "name: app", "name: second", 1), "2 YAML documents"},
		{"another apiVersion", strings.Replace(good, "capstan.dev/v1alpha1", "capstan.dev/v1", 1), capstanv1.GroupVersion.String()},
		{"no apiVersion", strings.Replace(good, "apiVersion: capstan.dev/v1alpha1\n", "", 1), capstanv1.GroupVersion.String()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := runCapstan(t, "render", "-f", writeAddon(t, tc.addon))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one that says %q\n%s", err, tc.want, out)
			}
		})
	}
}

// TestRenderSkipSchemaValidationKeepsCapstansRules: the flag skips the
// chart's values.schema.json, not Capstan's own values rules: a secret
// input written in spec.values Blocks the Addon whatever the flag says, so
// the render fails on it too.
func TestRenderSkipSchemaValidationKeepsCapstansRules(t *testing.T) {
	archive, err := testcontroller.ChartArchive("secret", map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: secret\nversion: 1.0.0\n",
		"values.schema.json": `{"type":"object","properties":{"replicas":{"type":"integer"},` +
			`"auth":{"type":"object","properties":{"password":{"type":"string","writeOnly":true}}}}}`,
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: secret\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(archive) }))
	t.Cleanup(server.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	addon := func(values string) string {
		return writeAddon(t, "apiVersion: capstan.dev/v1alpha1\nkind: Addon\nmetadata:\n  name: secret\n  namespace: tenant\nspec:\n  chart:\n    url: "+
			server.URL+"/secret-1.0.0.tgz\n  values:\n"+values)
	}
	render := func(file string) (string, error) {
		_, stderr, err := runCapstan(t, "render", "-f", file, "--skip-schema-validation", "--fetch-allow=127.0.0.1/32", "--ca-file", caFile)
		return stderr, err
	}
	if stderr, err := render(addon("    replicas: many\n")); err != nil {
		t.Errorf("a schema error with --skip-schema-validation: %v; want it skipped\n%s", err, stderr)
	}
	stderr, err := render(addon("    auth:\n      password: hunter2\n"))
	wantRules(t, stderr, err, "writeOnly")
	if strings.Contains(stderr, "hunter2") {
		t.Errorf("the render's error shows the secret:\n%s", stderr)
	}
}
