package gitops

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"capstan.dev/capstan/internal/gitops/gitserver"
	"capstan.dev/capstan/internal/source"
)

func readHead(t *testing.T, url, branch, folder string) (string, *Snapshot) {
	t.Helper()
	ctx := context.Background()
	r := Repo{URL: url}
	b, head, err := r.Head(ctx, branch)
	if err != nil {
		t.Fatal(err)
	}
	repo, commit, release, err := r.Clone(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if commit.Hash != head {
		t.Fatalf("cloned %s, head is %s", commit.Hash, head)
	}
	s, err := ReadSnapshot(repo.Storer, commit, folder)
	if err != nil {
		t.Fatal(err)
	}
	return b, s
}

func TestReadSnapshotOverHTTPAndFile(t *testing.T) {
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	w.Write("addons/longhorn.yaml", longhorn).
		Write("addons/umami.yaml", umami).
		Write("umami/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: u}\n").
		Write("addons/README.md", "not a definition").
		Write("addons/nested/ignored.yaml", "name: ignored\n").
		Write("addons/broken.yaml", "name: broken\nhelm: {repo: https://x, chart: c}\ncolour: red\n").
		Write("addons/dup.yaml", "name: dup\nhelm: {repo: https://x, chart: c}\n").
		Write("addons/dup.yml", "name: dup\nhelm: {repo: https://x, chart: c}\n").
		Write("addons/escape.yaml", "name: escape\ngit:\n  path: out\n").
		Symlink("out", "../..").
		Write("addons/list.yaml", "- name: list\n").
		Write("addons/grafana.yaml/values.yaml", "replicas: 2\n")
	commit := w.CommitAndPush("definitions")

	for _, u := range []string{url, "file://" + filepath.Join(srv.Root, "gitops.git")} {
		branch, s := readHead(t, u, "", "addons")
		if branch != "main" || s.Commit != commit {
			t.Fatalf("%s: branch %q commit %s, want main %s", u, branch, s.Commit, commit)
		}
		var valid []string
		for _, p := range s.Definitions {
			valid = append(valid, p.File)
		}
		if strings.Join(valid, ",") != "addons/longhorn.yaml,addons/umami.yaml" {
			t.Fatalf("valid definitions: %v", valid)
		}
		want := map[string]string{
			"addons/broken.yaml":  "addons/broken.yaml:3: colour: unknown field",
			"addons/dup.yaml":     "defined by addons/dup.yaml and addons/dup.yml",
			"addons/dup.yml":      "defined by addons/dup.yaml and addons/dup.yml",
			"addons/escape.yaml":  "addons/escape.yaml:3: git.path: \"out\" is a symbolic link that leads out of the repository",
			"addons/list.yaml":    "addons/list.yaml:1: the file holds a list",
			"addons/grafana.yaml": "this is a folder or a submodule",
		}
		if len(s.Invalid) != len(want) {
			t.Fatalf("invalid files: %+v", s.Invalid)
		}
		for _, f := range s.Invalid {
			if !strings.Contains(f.Message, want[f.Path]) {
				t.Errorf("%s: %q does not contain %q", f.Path, f.Message, want[f.Path])
			}
		}
		for _, name := range []string{"longhorn", "umami", "broken", "dup", "escape", "list", "grafana"} {
			if !s.Claimed[name] {
				t.Errorf("%s is not claimed, so its Addon could be deleted", name)
			}
		}
	}

	if _, _, err := (Repo{URL: url}).Head(context.Background(), "nope"); err == nil || !strings.Contains(err.Error(), `no branch "nope"`) {
		t.Fatalf("missing branch: %v", err)
	}
	if _, _, err := (Repo{URL: srv.URL + "/missing.git"}).Head(context.Background(), ""); err == nil {
		t.Fatal("a missing repository must be an error")
	}

	// A folder with no definitions left is an empty snapshot, not an
	// error.
	w.Remove("addons").Remove("umami").Remove("out").Write("addons/README.md", "The add-ons of this cluster.\n").CommitAndPush("empty")
	if _, s := readHead(t, url, "main", "addons"); len(s.Definitions)+len(s.Invalid) != 0 {
		t.Fatalf("emptied repository: %+v", s)
	}
	// A folder that is not there (a typo in spec.folder, or a commit that
	// removed or renamed it) is an error that says what to check.
	w.Remove("addons").Write("README.md", "moved\n").CommitAndPush("the folder is gone")
	ctx := context.Background()
	b, _, err := Repo{URL: url}.Head(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	repo, gone, release, err := Repo{URL: url}.Clone(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	for _, folder := range []string{"addons", "adons", "addons/nested"} {
		if _, err := ReadSnapshot(repo.Storer, gone, folder); err == nil || !strings.Contains(err.Error(), `there is no folder "`+folder+`"`) ||
			!strings.Contains(err.Error(), "check spec.folder and spec.branch") {
			t.Fatalf("folder %s, which is not there: %v", folder, err)
		}
	}
}

// TestCloneRefusesAPackTooLarge: a push of a file of zeros, a few hundred
// KiB of pack that unpacks to more than one fetch may hold, is refused
// before it is unpacked into the controller's memory.
func TestCloneRefusesAPackTooLarge(t *testing.T) {
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	// NOTE: the limits of a small clone, so that the test writes MiBs, not
	// the hundreds of a real clone's.
	limits := source.Limits{MaxUncompressedBytes: 16 << 20, MaxFiles: 1000}
	w.Write("addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\n").
		Write("build/zeros.bin", strings.Repeat("\x00", int(limits.MaxUncompressedBytes)+(1<<20))).
		CommitAndPush("a build output by mistake")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	budget := source.NewGitBudget(64 << 20)
	_, _, _, err := Repo{URL: url, Limits: limits, Budget: budget}.Clone(context.Background(), "main")
	runtime.ReadMemStats(&after)
	if !errors.Is(err, source.ErrGitTooLarge) || !strings.Contains(err.Error(), "keep large files") {
		t.Fatalf("clone: %v; want it refused for its size", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Fatalf("refusing the pack allocated %d MiB: it was unpacked", grew>>20)
	}
	if held := budget.Held(); held != 0 {
		t.Fatalf("the refused clone still holds %d bytes of the git budget", held)
	}
}

// TestMadeFrom: an Addon is made from a folder when its git-file is its
// own name's file at the folder's top level.
func TestMadeFrom(t *testing.T) {
	for _, tc := range []struct {
		folder, name, file string
		want               bool
	}{
		{"addons", "grafana", "addons/grafana.yaml", true},
		{"addons", "grafana", "addons/grafana.yml", true},
		{"", "grafana", "addons/grafana.yaml", true},
		{"/clusters/prod/", "grafana", "clusters/prod/grafana.yaml", true},
		{".", "grafana", "grafana.yaml", true},
		{"addons", "grafana-test", "addons/grafana.yaml", false},
		{"addons", "grafana", "team-a/grafana.yaml", false},
		{"addons", "grafana", "addons/sub/grafana.yaml", false},
		{"addons", "grafana", "", false},
	} {
		if got := MadeFrom(tc.folder, tc.name, tc.file); got != tc.want {
			t.Errorf("MadeFrom(%q, %q, %q) = %v; want %v", tc.folder, tc.name, tc.file, got, tc.want)
		}
	}
}

// TestReadDirReportsAFolderNamedAsADefinition: on disk as at a commit, a
// folder named x.yaml is an invalid definition that claims x, and another
// folder is ignored.
func TestReadDirReportsAFolderNamedAsADefinition(t *testing.T) {
	root := t.TempDir()
	for _, dir := range []string{"addons/x.yaml", "addons/charts"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.FromSlash(dir)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "addons", "y.yaml"), []byte("name: y\nhelm: {repo: https://x, chart: c}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := ReadDir(root, "addons")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Invalid) != 1 || s.Invalid[0].Path != "addons/x.yaml" || !strings.Contains(s.Invalid[0].Message, "folder") {
		t.Fatalf("invalid %+v; want addons/x.yaml, a folder", s.Invalid)
	}
	if !s.Claimed["x"] || len(s.Definitions) != 1 || s.Definitions[0].File != "addons/y.yaml" {
		t.Fatalf("claimed %v, definitions %+v; want x claimed and y defined", s.Claimed, s.Definitions)
	}
}

// TestReadDirClaimsTheNameARenamedFileDeclares: a file renamed in git
// (10-grafana.yaml, still name: grafana) is invalid, claims its file's
// name and keeps the name it declares, so that the syncer keeps the
// repository's Addon grafana; its message says so. A name that a file of its own defines, or that could name no
// Addon, is not claimed for the invalid file.
func TestReadDirClaimsTheNameARenamedFileDeclares(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"10-grafana.yaml": "name: grafana\nhelm: {repo: https://x, chart: c}\n",
		"old-y.yaml":      "name: y\nhelm: {repo: https://x, chart: c}\n",
		"y.yaml":          "name: y\nhelm: {repo: https://x, chart: c}\n",
		"bad-name.yaml":   "name: Not_A_Name\nhelm: {repo: https://x, chart: c}\n",
		"alias.yaml":      "name: &n aliased\nhelm: {repo: https://x, chart: c}\n",
	}
	if err := os.MkdirAll(filepath.Join(root, "addons"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(root, "addons", name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := ReadDir(root, "addons")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"10-grafana", "old-y", "y", "bad-name", "alias"} {
		if !s.Claimed[name] {
			t.Errorf("%s is not claimed, so its Addon could be deleted: %v", name, s.Claimed)
		}
	}
	if len(s.Claimed) != 5 {
		t.Errorf("claimed %v; want the file names above alone", s.Claimed)
	}
	// NOTE: kept, not claimed: another repository reads Claimed as the
	// names this folder defines.
	for _, name := range []string{"grafana", "aliased"} {
		if !s.Kept[name] {
			t.Errorf("%s is not kept, so its Addon could be deleted: %v", name, s.Kept)
		}
	}
	if s.Kept["Not_A_Name"] || len(s.Kept) != 2 {
		t.Errorf("kept %v; want the declared names above alone", s.Kept)
	}
	if len(s.Definitions) != 1 || s.Definitions[0].File != "addons/y.yaml" {
		t.Fatalf("definitions %+v; want y alone", s.Definitions)
	}
	messages := map[string]string{}
	for _, f := range s.Invalid {
		messages[f.Path] = f.Message
	}
	want := `addons/10-grafana.yaml: an Addon "grafana" of this repository, if any, is kept as it is until the file is fixed`
	if m := messages["addons/10-grafana.yaml"]; !strings.HasPrefix(m, want) || !strings.Contains(m, `"grafana" differs from the file's name "10-grafana"`) {
		t.Errorf("10-grafana.yaml: %q; want it to start with %q and say what is wrong", m, want)
	}
	if m := messages["addons/old-y.yaml"]; strings.Contains(m, "is kept") {
		t.Errorf("old-y.yaml: %q; y.yaml defines y, which the message must not say is kept", m)
	}
}

// TestReadDirRefusesAFolderOfTooManyFiles: a folder of more than
// MaxFolderFiles definition files is refused before any is parsed, even
// when they are empty and cost MaxFolderSize nothing, since each would be
// kept; files that are no definition do not count.
func TestReadDirRefusesAFolderOfTooManyFiles(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "addons")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range MaxFolderFiles {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("a%d.yaml", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := ReadDir(root, "addons")
	if err != nil || len(s.Invalid) != MaxFolderFiles {
		t.Fatalf("a folder of exactly the limit: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "b.yml"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err = ReadDir(root, "addons")
	want := fmt.Sprintf(`folder "addons" holds %d definition files, more than the %d Capstan reads of one folder`, MaxFolderFiles+1, MaxFolderFiles)
	if s != nil || err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v; want the folder refused for its files: %s", err, want)
	}
}

// TestReadDirRefusesAFolderTooLarge: `capstan validate` refuses a folder
// whose definition files hold more than MaxFolderSize in all, as the
// syncer does; files over MaxFileSize, which are not read, and other
// files count for nothing.
func TestReadDirRefusesAFolderTooLarge(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "addons")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, size int) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte("name: x\n"+strings.Repeat("#", size-8)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("huge.yaml", MaxFileSize+1)
	write("README.md", MaxFolderSize)
	for i := range MaxFolderSize / MaxFileSize {
		write(fmt.Sprintf("a%d.yaml", i), MaxFileSize)
	}
	if _, err := ReadDir(root, "addons"); err != nil {
		t.Fatalf("a folder of exactly the limit: %v", err)
	}
	write("b.yml", 9)
	_, err := ReadDir(root, "addons")
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf(`the %d definition files of folder "addons" hold %d.0 MiB in all, more than the %d MiB Capstan reads of one folder`, MaxFolderSize/MaxFileSize+1, MaxFolderSize>>20, MaxFolderSize>>20)) {
		t.Fatalf("got %v; want the folder refused for its size", err)
	}
}
