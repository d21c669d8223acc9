package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	helmregistry "helm.sh/helm/v4/pkg/registry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/testcontroller"
)

// pushOCIChart pushes a chart written for Capstan, of version, to the
// chart server's registry with Helm's registry client, and returns its
// repository (oci://, with no tag) and its manifest's digest.
func pushOCIChart(t *testing.T, repo, version string) (ref, manifest string) {
	t.Helper()
	data, err := testcontroller.ChartArchive("demo", map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: demo\nversion: " + version + "\nannotations:\n  capstan.dev/addon: \"true\"\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  k: v\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := helmregistry.NewClient(helmregistry.ClientOptHTTPClient(chartServer.Client()),
		helmregistry.ClientOptCredentialsFile(t.TempDir()+"/config.json"))
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(chartServer.URL, "https://")
	// NOTE: Helm writes a version's + as _ in the tag it pushes.
	res, err := c.Push(data, host+"/"+repo+":"+version)
	if err != nil {
		t.Fatal(err)
	}
	return "oci://" + host + "/" + repo, res.Manifest.Digest
}

// TestFormAddsAnOCIChart adds charts from oci:// links, as `helm install`
// takes them, with the chart form: by tag, and by manifest digest. Each
// Addon is created with the repository in spec.chart.oci and the tag in
// spec.chart.version or the digest in spec.chart.digest, which the API
// server takes, where the link kept whole was fetched and then refused
// (422) with nothing the form could change. A link with neither is
// refused before anything is fetched, saying how to name the version.
func TestFormAddsAnOCIChart(t *testing.T) {
	ns := namespace(t)
	editor := user(t, ns, "editor", addonRule("get", "list", "create", "update", "patch"))
	s := signInAt(t, api.URL, editor)
	ref, manifest := pushOCIChart(t, "charts/"+ns+"/demo", "1.0.0+build.7")

	for _, tc := range []struct {
		name, link string
		want       capstanv1.ChartSource
	}{
		{"by-tag", ref + ":1.0.0_build.7", capstanv1.ChartSource{OCI: ref, Version: "1.0.0+build.7"}},
		{"by-digest", ref + "@" + manifest, capstanv1.ChartSource{OCI: ref, Digest: manifest}},
	} {
		q := url.Values{"chart": {tc.link}, "namespace": {ns}, "name": {tc.name}}
		code, page := s.send(t, http.MethodGet, "/new?"+q.Encode(), nil)
		if code != http.StatusOK || strings.Contains(page, `class="error"`) {
			t.Fatalf("opening the form of %s: %d\n%s", tc.link, code, page)
		}
		code, page = s.send(t, http.MethodPost, "/new", q)
		if code != http.StatusSeeOther {
			t.Fatalf("adding %s: %d; want 303\n%s", tc.link, code, page)
		}
		a := &capstanv1.Addon{}
		if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: tc.name}, a); err != nil {
			t.Fatal(err)
		}
		if got := *a.Spec.Chart; got != tc.want {
			t.Errorf("the Addon added from %s has spec.chart %+v; want %+v", tc.link, got, tc.want)
		}
	}

	before := chartRequests.Load()
	q := url.Values{"chart": {ref}, "namespace": {ns}, "name": {"untagged"}}
	code, page := s.send(t, http.MethodGet, "/new?"+q.Encode(), nil)
	if code != http.StatusUnprocessableEntity || !strings.Contains(page, "add it as a tag") {
		t.Errorf("a link with no tag: %d; want 422 saying to add a tag\n%s", code, page)
	}
	if n := chartRequests.Load() - before; n != 0 {
		t.Errorf("a link with no tag made %d requests to the registry", n)
	}
}
