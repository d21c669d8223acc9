package cli

import (
	"bytes"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"capstan.dev/capstan/internal/testcontroller"
)

// countingServer serves a chart archive at every path, as a chart
// repository, a registry or an API server would be asked, and counts the
// requests; kubeconfig points the command's cluster at it too, so that a
// refusal before anything is fetched or written shows as no request.
func countingServer(t *testing.T) (chartURL, kubeconfig string, fetch []string, requests *atomic.Int64) {
	t.Helper()
	archive, err := testcontroller.ChartArchive("blog", map[string]string{"Chart.yaml": "apiVersion: v2\nname: blog\nversion: 1.0.0\n"})
	if err != nil {
		t.Fatal(err)
	}
	requests = &atomic.Int64{}
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		_, _ = w.Write(archive)
	}))
	t.Cleanup(server.Close)
	dir := t.TempDir()
	kubeconfig = filepath.Join(dir, "kubeconfig")
	config := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + server.URL +
		"\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: t}\n"
	if err := os.WriteFile(kubeconfig, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return server.URL + "/blog-1.0.0.tgz", kubeconfig, []string{"--fetch-allow", "127.0.0.1/32", "--ca-file", caFile}, requests
}

// addRefusedBeforeAnyRequest runs capstan addon add with values, so that
// the chart would be fetched to check them, and wants it refused with
// want in the error, not hide in it, and no request made. CHART in args
// stands for the counting server's chart archive.
func addRefusedBeforeAnyRequest(t *testing.T, args []string, want, hide string) {
	t.Helper()
	chartURL, kubeconfig, fetch, requests := countingServer(t)
	args = slices.Clone(args)
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "CHART", chartURL)
	}
	root := NewRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append(append(append([]string{"addon", "add"}, args...), "--set", "replicas=2", "--kubeconfig", kubeconfig), fetch...))
	err := root.ExecuteContext(t.Context())
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%v: %v; want an error naming %q\n%s", args, err, want, out.String())
	}
	if hide != "" && err != nil && strings.Contains(err.Error()+out.String(), hide) {
		t.Errorf("%v: the output shows %q: %v\n%s", args, hide, err, out.String())
	}
	if n := requests.Load(); n > 0 {
		t.Errorf("%v: %d requests were made before the refusal", args, n)
	}
}

// TestAddRefusesCredentialsInASourceBeforeAnyRequest: a source address
// with credentials in it would be stored in the Addon's spec, which every
// reader of the Addon sees; capstan addon add refuses it by its flag,
// without quoting it, before the chart is fetched or the cluster called.
func TestAddRefusesCredentialsInASourceBeforeAnyRequest(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"blog", "--repo", "https://user:s3cr3tTOKEN@127.0.0.1/charts", "--chart", "blog"}, "--repo must not carry credentials"},
		{[]string{"blog", "--chart-url", "https://user:s3cr3tTOKEN@127.0.0.1/blog-1.0.0.tgz"}, "--chart-url must not carry credentials"},
		{[]string{"blog", "--chart-url", "https://s3cr3tTOKEN@127.0.0.1/blog-1.0.0.tgz"}, "--chart-url must not carry credentials"},
		{[]string{"blog", "--oci", "oci://user:s3cr3tTOKEN@127.0.0.1/charts/blog", "--version", "1.0.0"}, "--oci must not carry credentials"},
		{[]string{"blog", "--git", "https://user:s3cr3tTOKEN@127.0.0.1/r.git", "--path", "blog"}, "--git must not carry credentials"},
		{[]string{"blog", "--git", "https://ghp_s3cr3tTOKEN@127.0.0.1/r.git", "--path", "blog"}, "--git must not carry credentials"},
		{[]string{"blog", "--git", "git:s3cr3tTOKEN@127.0.0.1:org/r.git", "--path", "blog"}, "--git must not carry credentials"},
	} {
		args := tc.args
		if args[1] == "--git" {
			// A folder of git has no values to check: the command would
			// go straight to the cluster.
			addRefusedBeforeAnyRequestNoValues(t, args, tc.want, "s3cr3tTOKEN")
			continue
		}
		addRefusedBeforeAnyRequest(t, args, tc.want, "s3cr3tTOKEN")
	}
}

// addRefusedBeforeAnyRequestNoValues is addRefusedBeforeAnyRequest
// without values, for --git.
func addRefusedBeforeAnyRequestNoValues(t *testing.T, args []string, want, hide string) {
	t.Helper()
	_, kubeconfig, _, requests := countingServer(t)
	root := NewRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append(append([]string{"addon", "add"}, args...), "--kubeconfig", kubeconfig))
	err := root.ExecuteContext(t.Context())
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error()+out.String(), hide) {
		t.Errorf("%v: %v; want an error naming %q, not showing %q\n%s", args, err, want, hide, out.String())
	}
	if n := requests.Load(); n > 0 {
		t.Errorf("%v: %d requests were made before the refusal", args, n)
	}
}

// TestAddCountingServerSeesAGoodAdd checks the check above can fail: a
// good add fetches the chart and calls the cluster.
func TestAddCountingServerSeesAGoodAdd(t *testing.T) {
	chartURL, kubeconfig, fetch, requests := countingServer(t)
	root := NewRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"addon", "add", "blog", "--chart-url", chartURL, "--set", "replicas=2", "--kubeconfig", kubeconfig}, fetch...))
	_ = root.ExecuteContext(t.Context())
	if requests.Load() == 0 {
		t.Fatalf("a good add made no request\n%s", out.String())
	}
}

// TestAddRefusesBadNamesAndChartFlagsBeforeAnyRequest: with values to
// check, capstan addon add fetches the chart first; a name the API
// refuses, chart flags the CRD refuses, or a secret input at no
// targetPath is refused by the flag's name before that fetch, not after a
// download and in spec terms.
func TestAddRefusesBadNamesAndChartFlagsBeforeAnyRequest(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("hunter2"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"Bad_Name", "--chart-url", "CHART"}, `addon "Bad_Name"`},
		{[]string{strings.Repeat("a", 60), "--chart-url", "CHART"}, "at most 53 characters"},
		{[]string{"blog", "--oci", "oci://127.0.0.1/charts/blog", "--version", "1.0.0", "--repo", "https://127.0.0.1/charts", "--chart", "blog"}, "--repo and --oci: give one chart source"},
		{[]string{"blog", "--oci", "oci://127.0.0.1/charts/blog", "--version", "1.0.0", "--chart-url", "CHART"}, "--oci and --chart-url: give one chart source"},
		{[]string{"blog", "--repo", "https://127.0.0.1/charts", "--chart-url", "CHART"}, "--repo and --chart-url: give one chart source"},
		{[]string{"blog", "--chart-url", "CHART", "--chart", "blog"}, "--chart names a chart in --repo"},
		{[]string{"blog", "--repo", "https://127.0.0.1/charts"}, "--repo needs --chart"},
		{[]string{"blog", "--chart-url", "CHART", "--version", "1.0.0"}, "--version does not go with --chart-url"},
		{[]string{"blog", "--oci", "oci://127.0.0.1/charts/blog"}, "--oci needs --version (a tag) or --digest"},
		{[]string{"blog", "--chart-url", "CHART", "--digest", "md5:abc"}, "--digest must be sha256:"},
		{[]string{"blog", "--chart-url", "CHART", "--secret-input", "a[=@" + pw}, `--secret-input "a["=@...`},
	} {
		addRefusedBeforeAnyRequest(t, tc.args, tc.want, "hunter2")
	}
}
