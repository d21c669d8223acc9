package corpus_test

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

// chartRepo is a Helm chart repository on loopback, over https: the
// corpus's charts packaged and indexed by bin/helm itself, so both tools
// install the very same archives.
type chartRepo struct {
	url      string
	host     string
	caFile   string
	versions map[string]string // chart name -> version
}

func serveCharts(t *testing.T, helm helmCLI, chartsDir, dir string) *chartRepo {
	t.Helper()
	served := filepath.Join(dir, "repo")
	if err := os.MkdirAll(served, 0o755); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(http.FileServer(http.Dir(served)))
	t.Cleanup(srv.Close)
	repo := &chartRepo{url: srv.URL + "/", host: srv.Listener.Addr().String(), caFile: filepath.Join(dir, "repo-ca.pem"),
		versions: map[string]string{}}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(repo.caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range corpus {
		src := filepath.Join(chartsDir, c.name)
		meta, err := os.ReadFile(filepath.Join(src, "Chart.yaml"))
		if err != nil {
			t.Fatalf("chart %s is missing: %v (run make charts)", c.name, err)
		}
		var chart struct{ Version string }
		if err := yaml.Unmarshal(meta, &chart); err != nil {
			t.Fatalf("%s/Chart.yaml: %v", c.name, err)
		}
		repo.versions[c.name] = chart.Version
		if out, err := helm.run(t.Context(), "package", src, "--destination", served); err != nil {
			t.Fatalf("helm package %s: %v\n%s", c.name, err, out)
		}
	}
	if out, err := helm.run(t.Context(), "repo", "index", served, "--url", repo.url); err != nil {
		t.Fatalf("helm repo index: %v\n%s", err, out)
	}
	return repo
}
