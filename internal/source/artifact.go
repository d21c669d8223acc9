package source

import (
	"context"
	"errors"
	"strings"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/netguard"
)

// Artifact is what a fetch gives, whatever the kind of source: a Helm chart
// or a folder of a git tree, with its identity. The rest of the pipeline
// works on an Artifact, so adding a kind of source touches this package,
// render.Render and the API types, and nothing else.
type Artifact struct {
	// Chart is set for a Helm chart.
	Chart *Chart
	// Tree is set for a git folder; Path is the folder in it.
	Tree *Tree
	Path string

	// Identity is what the render hash knows of the source.
	Identity Identity
	// Display names the source for people: a chart repository and chart,
	// an OCI reference, an archive URL, or a git repository and folder.
	Display string
	// Version is the chart's version or the commit, shortened.
	Version string
	// Stale says that the source could not be read again and what was read
	// before is used, and why (Chart.StaleIndex); empty otherwise.
	Stale string
}

// Identity is what the render hash knows of a source: a chart by its digest
// (or, without one, by URL, name and version), or a git folder by its
// repository, commit and path.
type Identity struct {
	// Digest is the chart archive's "sha256:" digest.
	Digest string `json:"digest,omitempty"`
	// URL is the chart repository, registry reference, archive URL or git
	// repository. It is left out of the hash when a digest is set: a mirror
	// serves the same archive.
	URL string `json:"url,omitempty"`
	// Name is the chart's name.
	Name string `json:"name,omitempty"`
	// Version is the chart's version.
	Version string `json:"version,omitempty"`
	// Commit is the git commit of a folder.
	Commit string `json:"commit,omitempty"`
	// Path is the folder in the git repository.
	Path string `json:"path,omitempty"`
}

// PlanSource is the source as a plan shows it.
func (a *Artifact) PlanSource() capstanv1.PlanSource {
	id := a.Identity
	return capstanv1.PlanSource{Chart: id.Name, Version: id.Version, Digest: id.Digest, URL: id.URL, Commit: id.Commit, Path: id.Path}
}

// IsChart reports whether the artifact is a Helm chart, which takes values.
func (a *Artifact) IsChart() bool { return a.Chart != nil }

// ErrNoSource is the error of a spec that names no source.
var ErrNoSource = errors.New("spec has no source: set spec.chart or spec.git")

// SecretRef names the Secret with the credentials of spec's source, if any.
func SecretRef(spec capstanv1.AddonSpec) *capstanv1.LocalObjectReference {
	switch {
	case spec.Chart != nil:
		return spec.Chart.SecretRef
	case spec.Git != nil:
		return spec.Git.SecretRef
	}
	return nil
}

// Fetch fetches the source spec names, with creds if it needs them.
func (f *Fetcher) Fetch(ctx context.Context, spec capstanv1.AddonSpec, creds *Credentials) (*Artifact, error) {
	return f.fetch(ctx, spec, creds, false)
}

// Refetch fetches the source spec names as Fetch does, but reads again what
// a cache may hold from before a change at the source: a chart
// repository's index (a version range's newest version), a chart named by
// an OCI tag or an https URL (pushed again under the same name), and the
// chart a repository's index names. A git branch or tag is resolved afresh
// on every fetch anyway, and a commit's tree never changes.
func (f *Fetcher) Refetch(ctx context.Context, spec capstanv1.AddonSpec, creds *Credentials) (*Artifact, error) {
	return f.fetch(ctx, spec, creds, true)
}

func (f *Fetcher) fetch(ctx context.Context, spec capstanv1.AddonSpec, creds *Credentials, refresh bool) (*Artifact, error) {
	ctx, cancel := withInteractiveTimeout(ctx)
	defer cancel()
	switch {
	case spec.Chart != nil:
		ch, err := f.chart(ctx, *spec.Chart, creds, refresh)
		if err != nil {
			return nil, err
		}
		return ChartArtifact(spec.Chart, ch), nil
	case spec.Git != nil:
		tree, err := f.Git(ctx, *spec.Git, creds)
		if err != nil {
			return nil, err
		}
		return &Artifact{
			Tree: tree, Path: spec.Git.Path,
			Identity: Identity{URL: spec.Git.URL, Commit: tree.Commit, Path: spec.Git.Path},
			Display:  strings.TrimSuffix(netguard.Redact(spec.Git.URL)+"//"+spec.Git.Path, "//"),
			Version:  shortCommit(tree.Commit),
		}, nil
	}
	return nil, ErrNoSource
}

// ChartArtifact makes an artifact of a chart fetched for spec, or loaded
// from a file when spec is nil.
func ChartArtifact(spec *capstanv1.ChartSource, ch *Chart) *Artifact {
	display := ch.URL
	if d := ChartDisplay(spec); d != "" {
		display = d
	}
	return &Artifact{
		Chart:    ch,
		Identity: Identity{Digest: ch.Digest, URL: ch.URL, Name: ch.Name, Version: ch.Version},
		Display:  display,
		Version:  ch.Version,
		Stale:    ch.StaleIndex,
	}
}

// ChartDisplay is how an artifact fetched for spec names its source (its
// Display), known before the fetch: a chart repository and chart, or an
// OCI reference. It is "" for an https archive, whose display is the URL
// the fetch ends at, and for a nil spec.
func ChartDisplay(spec *capstanv1.ChartSource) string {
	switch {
	case spec != nil && spec.Repo != "":
		return strings.TrimSuffix(spec.Repo, "/") + "/" + spec.Name
	case spec != nil && spec.OCI != "":
		return spec.OCI
	}
	return ""
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}
