package cli

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/config/samples"
)

// installSamples writes the sample manifests into a new local git
// repository under dir and creates the sample Addons, which point at it.
func installSamples(ctx context.Context, c client.Client, dir string) ([]string, error) {
	repoDir := filepath.Join(dir, "gitops")
	err := fs.WalkDir(samples.FS, "gitops", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := samples.FS.ReadFile(p)
		if err != nil {
			return err
		}
		target := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		return nil, fmt.Errorf("writing the samples: %w", err)
	}
	repo, err := git.PlainInit(repoDir, false)
	if err != nil {
		return nil, err
	}
	wt, err := repo.Worktree()
	if err != nil {
		return nil, err
	}
	if err := wt.AddGlob("."); err != nil {
		return nil, err
	}
	sig := &object.Signature{Name: "capstan dev", Email: "dev@capstan.invalid", When: time.Now()}
	if _, err := wt.Commit("Sample add-ons", &git.CommitOptions{Author: sig}); err != nil {
		return nil, err
	}
	raw, err := samples.FS.ReadFile("addons.yaml")
	if err != nil {
		return nil, err
	}
	raw = bytes.ReplaceAll(raw, []byte("GITOPS_URL"), []byte("file://"+repoDir))
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var names []string
	for {
		a := &capstanv1.Addon{}
		if err := dec.Decode(a); err != nil {
			if strings.Contains(err.Error(), "EOF") {
				break
			}
			return nil, fmt.Errorf("reading the sample Addons: %w", err)
		}
		if a.Name == "" {
			continue
		}
		if err := c.Create(ctx, a); err != nil {
			return nil, fmt.Errorf("creating the sample Addon %s: %w", a.Name, err)
		}
		names = append(names, a.Name)
	}
	return names, nil
}
