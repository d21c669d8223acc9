// Package charts holds the test of fetch.sh, which fetches the chart
// corpus from the Go module proxy.
package charts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFetchSaysWhyADownloadFailed runs fetch.sh over a list whose module
// cannot be downloaded (GOPROXY=off: nothing is dialled): it fails naming
// the chart, the module and go mod download's reason, and writes no stamp.
func TestFetchSaysWhyADownloadFailed(t *testing.T) {
	root := t.TempDir()
	script, err := os.ReadFile("fetch.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "hack", "charts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "hack", "charts", "fetch.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	list := "# one chart\nmissing  example.invalid/none  v1.0.0  charts/none\n"
	if err := os.WriteFile(filepath.Join(root, "hack", "charts", "corpus.txt"), []byte(list), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin")
	cache := filepath.Join(root, "modcache")
	cmd := exec.CommandContext(t.Context(), "bash", filepath.Join(root, "hack", "charts", "fetch.sh"))
	cmd.Env = append(os.Environ(), "CAPSTAN_BIN_DIR="+bin, "GOPROXY=off", "GOPRIVATE=", "GONOPROXY=", "GOFLAGS=-modcacherw",
		"GOMODCACHE="+cache, "GOSUMDB=off")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("fetch.sh succeeded with a module it cannot download:\n%s", out)
	}
	for _, want := range []string{"missing", "example.invalid/none@v1.0.0", "module lookup disabled by GOPROXY=off"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("fetch.sh failed without saying %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(bin, "charts", ".stamp")); err == nil {
		t.Errorf("a failed fetch left a stamp")
	}
}
