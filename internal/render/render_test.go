package render

import (
	"context"
	"testing"

	"capstan.dev/capstan/internal/source"
)

// TestRenderDispatchesOnTheArtifact renders a chart and a folder through
// the one entry point, and checks that the hash it computes once, before
// rendering, is what decides an upgrade.
func TestRenderDispatchesOnTheArtifact(t *testing.T) {
	ch := loadChart(t, "hooks")
	id := source.Identity{Digest: "sha256:ab12", Name: "hooks", Version: "1.0.0"}
	art := &source.Artifact{Chart: &source.Chart{Chart: ch, Name: "hooks", Version: "1.0.0"}, Identity: id}
	vals := map[string]any{"replicas": 2}
	want, err := Hash(id, vals, "demo", "apps")
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	for _, upgrade := range []bool{false, true} {
		res, err := Render(context.Background(), art, vals, Options{
			ReleaseName: "demo", Namespace: "apps",
			UpgradeFor: func(hash string) bool { asked = append(asked, hash); return upgrade },
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Hash != want || res.Upgrade != upgrade || len(res.Objects) == 0 {
			t.Fatalf("Render = hash %s, upgrade %v, %d objects; want hash %s, upgrade %v and objects", res.Hash, res.Upgrade, len(res.Objects), want, upgrade)
		}
	}
	if len(asked) != 2 || asked[0] != want || asked[1] != want {
		t.Errorf("UpgradeFor was asked with %v; want the render hash %s, once per render", asked, want)
	}
	// Helm, called alone, hashes the same inputs the same way.
	direct, err := Helm(context.Background(), ch, vals, Options{ReleaseName: "demo", Namespace: "apps", Source: id})
	if err != nil || direct.Hash != want {
		t.Errorf("Helm's hash = %v, %v; want %s", direct.Hash, err, want)
	}

	folder := &source.Artifact{Tree: &source.Tree{FS: repo(), Commit: "c0ffee"}, Path: "apps/base",
		Identity: source.Identity{URL: "https://git.example/ops", Commit: "c0ffee", Path: "apps/base"}}
	res, err := Render(context.Background(), folder, nil, Options{ReleaseName: "ignored", Namespace: "apps"})
	if err != nil {
		t.Fatal(err)
	}
	// The folder's namespace is in its hash; its release name is not.
	wantFolder, _ := Hash(folder.Identity, nil, "", "apps")
	if res.Hash != wantFolder || len(res.Objects) != 2 {
		t.Errorf("the folder rendered %d objects with hash %s; want 2 with %s", len(res.Objects), res.Hash, wantFolder)
	}

	if _, err := Render(context.Background(), &source.Artifact{}, nil, Options{}); err == nil {
		t.Error("an empty artifact rendered")
	}
}
