package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
)

func runValidate(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := newValidateCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestValidate(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"addons/longhorn.yaml": "name: longhorn\nnamespace: longhorn-system\nhelm:\n  repo: https://charts.longhorn.io/\n  chart: longhorn\n  version: v1.10.2\n",
		"addons/umami.yaml":    "name: umami\ngit:\n  path: umami\n",
		"umami/deploy.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
	})
	out, summary, err := runValidate(t, "--root", root, filepath.Join(root, "addons"))
	if err != nil || out != "" || !strings.Contains(summary, "2 definitions are valid") {
		t.Fatalf("valid folder: err=%v out=%q summary=%q", err, out, summary)
	}

	writeFiles(t, root, map[string]string{
		"addons/bad.yaml":   "name: bad\nhelm:\n  repo: https://x\n  chart: c\n  versoin: 1\n",
		"addons/other.yaml": "name: wrong\nhelm: {repo: https://x, chart: c}\n",
		"addons/away.yaml":  "name: away\ngit:\n  path: ../outside\n",
	})
	out, summary, err = runValidate(t, "--root", root, filepath.Join(root, "addons"))
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("want exit status 1, got %v", err)
	}
	for _, want := range []string{
		"addons/bad.yaml:5: helm.versoin: unknown field",
		`addons/other.yaml:1: name: "wrong" differs from the file's name "other"`,
		`addons/away.yaml:3: git.path: "../outside" leaves the repository`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(summary, "3 of 5 definitions are invalid") {
		t.Errorf("summary: %q", summary)
	}

	// The default root is DIR's parent outside a git checkout, and the
	// git.path folder is checked there.
	if err := os.RemoveAll(filepath.Join(root, "umami")); err != nil {
		t.Fatal(err)
	}
	out, _, _ = runValidate(t, filepath.Join(root, "addons"))
	if !strings.Contains(out, `addons/umami.yaml:3: git.path: the folder "umami" does not exist`) {
		t.Fatalf("missing folder not reported:\n%s", out)
	}

	if _, _, err := runValidate(t, filepath.Join(root, "nope")); err == nil || !strings.Contains(err.Error(), "is not a folder of definitions") {
		t.Fatalf("missing folder: %v", err)
	}
}

// TestValidateRefusesAFolderTheSyncerReadsAsEmpty: the syncer reads the
// folder alone, so definitions in its subfolders make no Addon, and an
// empty folder is refused for a repository that manages Addons; a CI
// that runs validate must not pass such a folder.
func TestValidateRefusesAFolderTheSyncerReadsAsEmpty(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"addons/prod/longhorn.yaml": "name: longhorn\nhelm: {repo: https://charts.longhorn.io/, chart: longhorn}\n",
		"addons/stage/deep/web.yml": "name: web\nhelm: {repo: https://x, chart: c}\n",
		"addons/docs/README.md":     "not a definition\n",
		"addons/.git/x.yaml":        "name: x\n",
		"addons/README.md":          "the folder\n",
		"empty/.keep":               "",
	})
	addonsDir := filepath.Join(root, "addons")
	_, _, err := runValidate(t, "--root", root, addonsDir)
	if err == nil || !strings.Contains(err.Error(), "holds no definition") ||
		!strings.Contains(err.Error(), addonsDir+"/prod/, "+addonsDir+"/stage/ hold definitions") || strings.Contains(err.Error(), "docs") {
		t.Fatalf("definitions in subfolders only: %v; want a failure that names prod/ and stage/", err)
	}
	_, summary, err := runValidate(t, "--root", root, "--allow-empty", addonsDir)
	if err != nil || !strings.Contains(summary, "0 definitions") || !strings.Contains(summary, "prod/") {
		t.Fatalf("--allow-empty: %v, %q; want it accepted with the subfolders named", err, summary)
	}

	_, _, err = runValidate(t, "--root", root, filepath.Join(root, "empty"))
	if err == nil || !strings.Contains(err.Error(), "holds no definition") || !strings.Contains(err.Error(), "--allow-empty") || strings.Contains(err.Error(), "subfolders") {
		t.Fatalf("an empty folder: %v; want it refused, pointing at --allow-empty", err)
	}
	if _, _, err := runValidate(t, "--root", root, "--allow-empty", filepath.Join(root, "empty")); err != nil {
		t.Fatalf("an empty folder with --allow-empty: %v", err)
	}
}

// TestValidateFindsTheGitRoot checks that the default root is the top of the
// git checkout that holds DIR, however deep DIR is, and not DIR's parent.
func TestValidateFindsTheGitRoot(t *testing.T) {
	root := t.TempDir()
	if _, err := git.PlainInit(root, false); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, root, map[string]string{
		"clusters/prod/addons/umami.yaml": "name: umami\ngit:\n  path: apps/umami\n",
		"apps/umami/kustomization.yaml":   "resources: []\n",
	})
	out, summary, err := runValidate(t, filepath.Join(root, "clusters", "prod", "addons"))
	if err != nil || out != "" || !strings.Contains(summary, "1 definition is valid") {
		t.Fatalf("validate inside a checkout: err %v\nout:\n%s\nsummary: %s", err, out, summary)
	}
	if got, want := repositoryRoot(filepath.Join(root, "clusters", "prod")), mustEvalSymlinks(t, root); got != want {
		t.Errorf("repositoryRoot = %s, want %s", got, want)
	}
}

func mustEvalSymlinks(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
