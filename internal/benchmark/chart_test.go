package benchmark_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testcontroller"
)

// chartRepo is an https chart repository on loopback serving one chart,
// "bench" 1.0.0, whose template is the git variant's 20 objects.
type chartRepo struct {
	srv    *httptest.Server
	caFile string
}

// newChartRepo packages the chart and serves it with its index.yaml, and
// writes the server's certificate to dir for the controller's --ca-file.
func newChartRepo(dir string) (*chartRepo, error) {
	archive, err := benchChart()
	if err != nil {
		return nil, err
	}
	return serveChart(dir, "bench", "1.0.0", archive)
}

// serveChart serves one packaged chart at version, with its index.yaml,
// from an https server on loopback, and writes the server's certificate to
// dir.
func serveChart(dir, name, version string, archive []byte) (*chartRepo, error) {
	sum := sha256.Sum256(archive)
	file := name + "-" + version + ".tgz"
	index := fmt.Sprintf(`apiVersion: v1
entries:
  %s:
  - apiVersion: v2
    name: %s
    version: %s
    digest: %s
    created: %s
    urls: [%s]
generated: %s
`, name, name, version, hex.EncodeToString(sum[:]), time.Now().UTC().Format(time.RFC3339), file, time.Now().UTC().Format(time.RFC3339))
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/index.yaml":
			_, _ = w.Write([]byte(index))
		case "/" + file:
			_, _ = w.Write(archive)
		default:
			http.NotFound(w, r)
		}
	}))
	caFile := filepath.Join(dir, "chart-repo-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		srv.Close()
		return nil, err
	}
	return &chartRepo{srv: srv, caFile: caFile}, nil
}

// benchChart packages the chart.
func benchChart() ([]byte, error) {
	return testcontroller.ChartArchive("bench", map[string]string{
		"Chart.yaml":             "apiVersion: v2\nname: bench\nversion: 1.0.0\n",
		"values.yaml":            "{}\n",
		"templates/objects.yaml": chartTemplate(),
	})
}

// newChartAddon is the i-th Addon of the chart variant: the same target
// namespace and settings as newAddon, with the chart from the repository.
func newChartAddon(i int, repoURL string) *capstanv1.Addon {
	name := addonName(i)
	return &capstanv1.Addon{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: install.Namespace, Labels: map[string]string{runLabel: "converge"}},
		Spec: capstanv1.AddonSpec{
			Chart:           &capstanv1.ChartSource{Repo: repoURL, Name: "bench", Version: "1.0.0"},
			TargetNamespace: name,
			CreateNamespace: true,
			Prune:           true,
		},
	}
}
