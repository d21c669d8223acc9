// Package render turns a source into the objects that `helm template` or
// `kustomize build` would produce: a Helm chart rendered with Helm's own SDK,
// or a git folder built with kustomize's krusty or taken as plain YAML. It
// works in memory, never talks to a cluster, and never reports a template's
// message, because that message can carry a value.
package render

import (
	"context"
	"errors"

	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"capstan.dev/capstan/internal/source"
)

// Options say how a chart is rendered.
type Options struct {
	// ReleaseName is .Release.Name. Required.
	ReleaseName string
	// Namespace is .Release.Namespace. Required. A git folder's
	// namespaced objects that name none are put in it after the render
	// (FolderInputs.Namespace); its render hash covers it too.
	Namespace string
	// Capabilities are .Capabilities: the Kubernetes version and the API
	// list. Nil means Helm's defaults, as `helm template` uses them.
	Capabilities *Capabilities
	// Upgrade renders for an upgrade: .Release.IsUpgrade is true and
	// .Release.IsInstall false. The default renders for an install.
	Upgrade bool
	// Source identifies the chart for the render hash. When it has no
	// digest, no name and no version, the chart's own name and version are used.
	// Render takes it from the artifact.
	Source SourceIdentity
	// UpgradeFor, when set, decides Upgrade from the render hash: Render
	// computes the hash first, so that a chart renders as an install or an
	// upgrade by whether that exact render was applied before.
	UpgradeFor func(hash string) bool
	// Admit, when set, is asked before a chart's templates run, with the
	// render hash and whether the chart renders for an upgrade: an error
	// it returns ends Render with that error, and no template runs. A
	// controller refuses with it a render it knows stops at a Sandbox
	// bound, without spending a worker on it again.
	Admit func(hash string, upgrade bool) error
	// Sandbox, when set, runs the chart's templates in a worker process
	// bounded in time and memory. Nil runs them in this process, unbounded:
	// fit for a command a person runs and can interrupt, not for a
	// controller that renders charts and values others wrote.
	Sandbox *Sandbox
	// Mask, when set, lets a template error carry the chart's own message
	// from a required or fail call, passed through Mask first: the chart
	// may quote any value in it, so Mask hides those the caller must not
	// show. Nil drops the message and keeps the template and line.
	Mask func(string) string
	// PostRender, when set, patches the render and replaces its images
	// after the chart or folder wrote it; the render hash covers it.
	PostRender *PostRender
	// Variables, when set, are substituted for ${name} in a git folder's
	// objects and hooks (substitute.go); the render hash covers them. A
	// chart takes values instead, and ignores them.
	Variables map[string]string
	// Decrypt, when set, decrypts each file a git folder's build reads
	// (FolderInputs.Decrypt). A chart ignores it.
	Decrypt func(name string, data []byte) ([]byte, error)
	// MaxObjects, when above zero, bounds the objects and hooks of the
	// render. A chart's documents are counted before any is decoded, and
	// a *LimitError of the bound "objects" says it rendered more; a
	// folder's are counted as they are read (FolderInputs.MaxObjects).
	MaxObjects int
}

// Render renders an artifact: a chart with values, as Helm would, or a git
// folder as kustomize would (a folder takes no values). It computes the
// render hash once, before rendering, and returns it in the result.
func Render(ctx context.Context, art *source.Artifact, values map[string]any, opts Options) (*Result, error) {
	switch {
	case art == nil:
		return nil, errors.New("render: nothing was fetched")
	case art.Chart != nil:
		opts.Source = art.Identity
		hash, err := Hash(opts.Source, values, opts.ReleaseName, opts.Namespace)
		if err != nil {
			return nil, err
		}
		if hash, err = opts.PostRender.hash(hash); err != nil {
			return nil, err
		}
		if opts.UpgradeFor != nil {
			opts.Upgrade = opts.UpgradeFor(hash)
		}
		if opts.Admit != nil {
			if err := opts.Admit(hash, opts.Upgrade); err != nil {
				return nil, err
			}
		}
		res, err := helm(ctx, art.Chart.Chart, values, opts)
		if err != nil {
			return nil, err
		}
		res.Hash, res.Upgrade = hash, opts.Upgrade
		if err := opts.PostRender.applyAll(res, opts.Mask); err != nil {
			return nil, err
		}
		if mayGenerate(art.Chart.Chart, values) {
			if res.Generated, err = findGenerated(ctx, art.Chart.Chart, values, opts, res); err != nil {
				return nil, err
			}
		}
		return res, nil
	case art.Tree != nil:
		// NOTE: one budget for the folder's objects and the patches: the
		// values they substitute all end up in the one render.
		budget := newSubstituteBudget()
		res, err := FolderWith(art.Tree.FS, art.Path, art.Identity, FolderInputs{Variables: opts.Variables, Decrypt: opts.Decrypt, Namespace: opts.Namespace, MaxObjects: opts.MaxObjects, budget: budget})
		if err != nil {
			return nil, err
		}
		if res.Hash, err = opts.PostRender.hash(res.Hash); err != nil {
			return nil, err
		}
		if res.FormerHash != "" {
			if res.FormerHash, err = opts.PostRender.hash(res.FormerHash); err != nil {
				return nil, err
			}
		}
		post, err := substitutePostRender(opts.PostRender, opts.Variables, budget)
		if err != nil {
			return nil, err
		}
		if err := post.applyAll(res, opts.Mask); err != nil {
			return nil, err
		}
		return res, nil
	}
	return nil, errors.New("render: the artifact holds neither a chart nor a folder")
}

// SourceIdentity is what the render hash knows of a source; see
// source.Identity.
type SourceIdentity = source.Identity

// Result is one render.
type Result struct {
	// Objects are the rendered objects that are not hooks. For a chart, the
	// objects of crds/ come first, then the templates' objects in Helm's
	// install order (by kind, then by template path and document). For a
	// folder, they are in kustomize's order, or in file and document order.
	Objects []*unstructured.Unstructured
	// Hooks are the chart's Helm hooks, in the order `helm template` prints
	// them, its test hooks among them (TestEvent), or a folder's hooks (see
	// folderHooks), in its order.
	Hooks []Hook
	// Hash identifies the render's inputs: "sha256:" and 64 hex digits.
	Hash string
	// FormerHash is, for a folder rendered into a namespace, the hash the
	// same inputs had before a folder's namespace was part of it: what an
	// add-on applied by a Capstan of then recorded. Empty for a chart.
	// NOTE: a migration, read only once per add-on (the controller's
	// adoptFormerHash) though computed on every folder render: remove it
	// once no supported Capstan records folder hashes without the
	// namespace.
	FormerHash string
	// Upgrade is true when a chart was rendered for an upgrade.
	Upgrade bool
	// Generated lists the objects' and the hooks' fields that the chart
	// generates at random, and the objects and hooks it names at random,
	// found by rendering it twice.
	Generated []Generated
	// Notices are worth knowing and change nothing, such as a patch that
	// selects no object.
	Notices []Notice
	// Folder is true for a folder's render, whose hooks run as Argo CD
	// runs them (see folderHooks).
	Folder bool
	// Left are the objects a folder leaves out: those marked Skip, and
	// Helm's test hooks. They are neither applied nor run.
	Left []*unstructured.Unstructured
	// TestsLeftOut says why a chart's tests are not among Hooks though
	// the chart has some: spec.patches or spec.images do not fit them.
	TestsLeftOut string
}

// Notice is one thing worth knowing about a render, by the spec field it
// concerns.
type Notice struct {
	Path    string
	Message string
}

// Hook is a rendered object that Helm runs as a hook instead of applying it
// with the rest.
type Hook struct {
	// Object is the hook's object, with its annotations as rendered.
	Object *unstructured.Unstructured
	// Events are the known hook events, such as pre-install, lowercased and
	// trimmed as Helm does.
	Events []string
	// UnknownEvents are the events that Helm does not know. Helm drops such a
	// hook silently; Capstan keeps it so the plan can report it, and never runs it.
	UnknownEvents []string
	// Weight orders hooks, lowest first. A weight that is not an integer is 0, as in Helm.
	Weight int
	// DeletePolicies are the hook's delete policies, lowercased and trimmed.
	// Empty means Helm's default, before-hook-creation.
	DeletePolicies []string
	// Template is the template file that rendered the hook, such as
	// mychart/templates/job.yaml, or the folder of a folder's hook.
	Template string
	// Annotation is the annotation that makes the object a hook:
	// helm.sh/hook, or, on a folder's object, Argo CD's
	// ArgoHookAnnotation.
	Annotation string
	// AfterHealthy holds the hook, at a post-install or post-upgrade
	// event, until every object the sync applied is Current, as Argo CD
	// holds its PostSync hooks (AwaitsHealthy).
	AfterHealthy bool
	// Folder is true for a folder's hook, read as Argo CD reads it
	// (parseFolderHook).
	Folder bool
	// List is true for an item of a List document that is a hook: its
	// events, weight and delete policies are the List's, as Helm reads
	// them, and its own hook annotations mean nothing.
	List bool
}

// AwaitsHealthy reports whether the hook waits, at event, until every
// object the sync applied is Current: a folder's PostSync hook, after the
// apply. Within the event such hooks run after the others.
func (h Hook) AwaitsHealthy(event string) bool {
	return h.AfterHealthy && (event == string(release.HookPostInstall) || event == string(release.HookPostUpgrade))
}

// Runnable reports whether the hook can run: it names at least one event,
// and none that Helm does not know.
func (h Hook) Runnable() bool {
	return len(h.Events) > 0 && len(h.UnknownEvents) == 0
}
