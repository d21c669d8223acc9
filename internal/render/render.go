// Package render turns a source into the objects that `helm template` or
// `kustomize build` would produce: a Helm chart rendered with Helm's own SDK,
// or a git folder built with kustomize's krusty or taken as plain YAML. It
// works in memory, never talks to a cluster, and never reports a template's
// message, because that message can carry a value.
package render

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Options say how a chart is rendered.
type Options struct {
	// ReleaseName is .Release.Name. Required.
	ReleaseName string
	// Namespace is .Release.Namespace. Required.
	Namespace string
	// Capabilities are .Capabilities: the Kubernetes version and the API
	// list. Nil means Helm's defaults, as `helm template` uses them.
	Capabilities *Capabilities
	// Upgrade renders for an upgrade: .Release.IsUpgrade is true and
	// .Release.IsInstall false. The default renders for an install.
	Upgrade bool
	// Source identifies the chart for the render hash. When it has no
	// digest, no name and no version, the chart's own name and version are used.
	Source SourceIdentity
}

// SourceIdentity is what the render hash knows of a source: a chart by its
// digest (or, without one, by URL, name and version), or a git folder by its
// commit and path.
type SourceIdentity struct {
	// Digest is the chart archive's "sha256:" digest.
	Digest string `json:"digest,omitempty"`
	// URL is the chart repository, registry reference or archive URL. It is
	// left out of the hash when a digest is set: a mirror serves the same archive.
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

// Result is one render.
type Result struct {
	// Objects are the rendered objects that are not hooks. For a chart, the
	// objects of crds/ come first, then the templates' objects in Helm's
	// install order (by kind, then by template path and document). For a
	// folder, they are in kustomize's order, or in file and document order.
	Objects []*unstructured.Unstructured
	// Hooks are the chart's Helm hooks, in the order `helm template` prints
	// them. Test hooks are left out.
	Hooks []Hook
	// Hash identifies the render's inputs: "sha256:" and 64 hex digits.
	Hash string
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
	// mychart/templates/job.yaml.
	Template string
}

// Runnable reports whether the hook can run: it names at least one event,
// and none that Helm does not know.
func (h Hook) Runnable() bool {
	return len(h.Events) > 0 && len(h.UnknownEvents) == 0
}
