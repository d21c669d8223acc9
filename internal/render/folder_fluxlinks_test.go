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

// TestFluxLayoutWalksEachLinkedFolderOnce renders, from a real git
// repository served over HTTP on loopback, folders in the Flux layout (no
// kustomization, a subfolder with one) with symlinked folders. A link to a
// folder elsewhere in the repository is walked, as Capstan walked it before
// it built this layout as Flux does, so that what an add-on applied from
// there is neither lost nor pruned. A link that loops (to the folder itself
// or to its parent) or leads to a sibling already walked is left out,
// neither an error nor a folder listed twice, which kustomize would refuse
// as objects added twice. A folder whose only kustomization is behind a
// link is in that layout too. A link that leaves the repository is
// refused, never followed.
func TestFluxLayoutWalksEachLinkedFolderOnce(t *testing.T) {
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
		Symlink("fleet/apps-again", "apps").
		Write("clusters/prod/apps/kustomization.yaml", "resources: [app.yaml]\n").
		Write("clusters/prod/apps/app.yaml", cm("prod-app")).
		Symlink("clusters/prod/infra", "../../infrastructure").
		Write("infrastructure/ctrl/cm.yaml", cm("infra")).
		Symlink("infrastructure/ctrl/back", "../../clusters").
		Symlink("infrastructure/again", "ctrl").
		Write("solo/loose.yaml", cm("solo")).
		Symlink("solo/apps", "../fleet/apps")
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
	for _, c := range []struct {
		dir           string
		scan, objects []string
	}{{
		dir:     "fleet",
		scan:    []string{"fleet/apps", "fleet/infra/db.yaml", "fleet/loose.yaml"},
		objects: []string{"ConfigMap//app", "ConfigMap//db", "ConfigMap//loose"},
	}, {
		dir:     "clusters/prod",
		scan:    []string{"clusters/prod/apps", "clusters/prod/infra/ctrl/cm.yaml"},
		objects: []string{"ConfigMap//infra", "ConfigMap//prod-app"},
	}, {
		// A kustomization only behind a link puts the folder in the
		// layout too, the linked folder listed.
		dir:     "solo",
		scan:    []string{"solo/apps", "solo/loose.yaml"},
		objects: []string{"ConfigMap//app", "ConfigMap//solo"},
	}} {
		entries, err := scanFolder(tree.FS, c.dir, followFolderLinksOnce)
		if err != nil {
			t.Fatal(err)
		}
		var scanned []string
		for _, e := range entries {
			scanned = append(scanned, e.path)
		}
		if !slices.Equal(scanned, c.scan) {
			t.Errorf("the scan of %s listed %v, want %v", c.dir, scanned, c.scan)
		}
		res, err := Folder(tree.FS, c.dir, SourceIdentity{Commit: commit})
		if err != nil {
			t.Fatalf("%s: %v", c.dir, err)
		}
		got := names(res.Objects)
		slices.Sort(got)
		if diff := cmp.Diff(c.objects, got); diff != "" {
			t.Errorf("%s: objects (-want +got):\n%s", c.dir, diff)
		}
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
