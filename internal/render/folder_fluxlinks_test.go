package render

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/gitops/gitserver"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/source"
)

// TestFluxLayoutDoesNotFollowSymlinkedFolders renders, from a real git
// repository served over HTTP on loopback, a folder in the Flux layout (no
// kustomization, a subfolder with one) whose symlinked folders loop (a link
// to the folder itself and one to its parent) or lead to a sibling: the
// scan walks none of them, as Flux's kustomize-controller walks none when
// it generates the kustomization, so it ends, reads each file once and
// builds what Flux builds. A link that leaves the repository is refused,
// never followed.
func TestFluxLayoutDoesNotFollowSymlinkedFolders(t *testing.T) {
	srv := gitserver.Start(t)
	url := srv.Create(t, "fleet")
	cm := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"
	}
	// NOTE: the working copy pushes to the bare repository by its path:
	// this test process lets the git command use no other transport
	// (onlyLoopback). The fetcher reads it over HTTP.
	w := gitserver.Clone(t, filepath.Join(srv.Root, "fleet.git")).
		Write("fleet/loose.yaml", cm("loose")).
		Write("fleet/apps/kustomization.yaml", "resources: [app.yaml]\n").
		Write("fleet/apps/app.yaml", cm("app")).
		Write("fleet/infra/db.yaml", cm("db")).
		Symlink("fleet/self", ".").
		Symlink("fleet/infra/up", "..").
		Symlink("fleet/again", "infra").
		Symlink("fleet/apps-again", "apps")
	commit := w.CommitAndPush("fleet with symlinked folders")

	f, err := source.NewFetcher(source.Options{Guard: netguard.Config{Allow: []string{"127.0.0.1/32"}, LoopbackOnly: true}})
	if err != nil {
		t.Fatal(err)
	}
	tree, err := f.Git(context.Background(), capstanv1.GitSource{URL: url, Revision: commit}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if srv.Fetches() == 0 {
		t.Fatal("the tree was not fetched over HTTP")
	}
	entries, err := scanFolder(tree.FS, "fleet", skipFolderLinks)
	if err != nil {
		t.Fatal(err)
	}
	var scanned []string
	for _, e := range entries {
		scanned = append(scanned, e.path)
	}
	if want := []string{"fleet/apps", "fleet/infra/db.yaml", "fleet/loose.yaml"}; !slices.Equal(scanned, want) {
		t.Errorf("the scan listed %v, want %v", scanned, want)
	}
	res, err := Folder(tree.FS, "fleet", SourceIdentity{Commit: commit})
	if err != nil {
		t.Fatal(err)
	}
	got := names(res.Objects)
	slices.Sort(got)
	if diff := cmp.Diff([]string{"ConfigMap//app", "ConfigMap//db", "ConfigMap//loose"}, got); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}

	w.Symlink("fleet/outside", "../..")
	commit = w.CommitAndPush("a link out of the repository")
	if tree, err = f.Git(context.Background(), capstanv1.GitSource{URL: url, Revision: commit}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Folder(tree.FS, "fleet", SourceIdentity{Commit: commit}); err == nil || !strings.Contains(err.Error(), "symlink fleet/outside cannot be followed") {
		t.Errorf("a folder with a link out of the repository: %v; want the link refused, naming it", err)
	}
}
