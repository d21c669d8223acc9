package gitops

import (
	"slices"

	"encoding/json"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// The label and annotations the syncer owns on the Addons it manages.
const (
	// ManagedByGitLabel names the AddonRepository whose definition made the Addon.
	ManagedByGitLabel = "capstan.dev/managed-by-git"
	// ShardLabel puts an Addon in a shard: the controller started with
	// --watch-label-selector=capstan.dev/shard=NAME reconciles it. A
	// repository's Addons carry the repository's shard.
	ShardLabel = "capstan.dev/shard"
	// GitFileAnnotation is the definition's path in the repository.
	GitFileAnnotation = "capstan.dev/git-file"
	// GitCommitAnnotation is the commit the Addon was last written from.
	GitCommitAnnotation = "capstan.dev/git-commit"
	// FieldManager is the syncer's server-side apply field manager. It owns
	// the configuration fields and nothing else.
	FieldManager = "capstan-gitops"
)

// MadeFrom reports whether file, an Addon's GitFileAnnotation, is where
// the syncer reads the definition of add-on name in folder: name.yaml or
// name.yml at the folder's top level. An Addon copied by hand under a new
// name (kubectl get -o yaml, renamed, applied) keeps the label and the
// annotation of the one it was copied from, and is not made from folder.
func MadeFrom(folder, name, file string) bool {
	return slices.Contains(DefinitionFiles(syncedFolder(folder), name), file)
}

// OwnFile is the file name.yaml of add-on name at the top of folder, as
// the syncer names it in GitFileAnnotation: one that MadeFrom takes for
// folder.
func OwnFile(folder, name string) string {
	return DefinitionFiles(syncedFolder(folder), name)[0]
}

// syncedFolder is spec.folder as the syncer reads it, DefaultFolder when
// empty, and as its GitFileAnnotation paths spell it.
func syncedFolder(folder string) string {
	return cleanFolderPath(CleanFolder(folder))
}

// Origin says where a definition came from and where its Addon goes.
type Origin struct {
	// Namespace is the Addon's namespace, the AddonRepository's.
	Namespace string
	// Repository is the AddonRepository's name.
	Repository string
	// URL is the gitops repository's URL.
	URL string
	// Commit is the commit the definition was read at.
	Commit string
	// File is the definition's path in the repository.
	File string
	// SecretRef is the gitops repository's credentials, for a git.path source.
	SecretRef *capstanv1.LocalObjectReference
	// Shard is the AddonRepository's shard label, which its Addons carry.
	Shard string
}

// Addon converts a definition into the Addon the syncer applies. It holds
// only what the definition configures, so that a server-side apply owns
// exactly those fields: spec.syncRequest, spec.approvedPlan, the spec
// fields the format has no key for (allowUnsafeCRDChanges, healthTimeout,
// test, kubeConfig, registration), other annotations, finalizers and
// status stay as they are.
func (def *Definition) Addon(o Origin) (*capstanv1.Addon, error) {
	a := &capstanv1.Addon{
		TypeMeta: metav1.TypeMeta{APIVersion: capstanv1.GroupVersion.String(), Kind: "Addon"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        def.Name,
			Namespace:   o.Namespace,
			Labels:      map[string]string{ManagedByGitLabel: o.Repository},
			Annotations: map[string]string{GitFileAnnotation: o.File, GitCommitAnnotation: o.Commit},
		},
		Spec: capstanv1.AddonSpec{
			TargetNamespace:   def.Namespace,
			CreateNamespace:   def.CreateNamespace,
			ReleaseName:       def.ReleaseName,
			Adopt:             def.Adopt,
			AllowAdoptChanges: def.AllowAdoptChanges,
			ManualSync:        def.ManualSync,
			Prune:             def.Prune,
			Recreate:          def.Recreate,
			Suspend:           def.Suspend,
			DeletionPolicy:    capstanv1.DeletionPolicy(def.DeletionPolicy),
			Title:             def.Title,
			Category:          def.Category,
		},
	}
	if h := def.Helm; h != nil {
		a.Spec.Chart = &capstanv1.ChartSource{
			Repo: h.Repo, Name: h.Chart, OCI: h.OCI, URL: h.URL,
			Version: h.Version, Digest: h.Digest, SecretRef: localRef(h.SecretRef),
		}
		if v := h.Verify; v != nil {
			a.Spec.Chart.Verify = &capstanv1.ChartVerification{}
			if p := v.Provenance; p != nil {
				a.Spec.Chart.Verify.Provenance = &capstanv1.ProvenanceVerification{SecretRef: capstanv1.LocalObjectReference{Name: p.SecretRef.Name}, Key: p.Key}
			}
			if c := v.Cosign; c != nil {
				a.Spec.Chart.Verify.Cosign = &capstanv1.CosignVerification{SecretRef: capstanv1.LocalObjectReference{Name: c.SecretRef.Name}, Key: c.Key}
			}
		}
	}
	if g := def.Git; g != nil {
		a.Spec.Git = &capstanv1.GitSource{URL: g.URL, Revision: g.Revision, Path: g.Path, SecretRef: localRef(g.SecretRef)}
		if g.URL == "" {
			// NOTE: a folder of the gitops repository is pinned to the commit
			// of its definition, so that definitions and manifests change together.
			a.Spec.Git.URL, a.Spec.Git.Revision, a.Spec.Git.SecretRef = o.URL, o.Commit, o.SecretRef
		}
	}
	if def.Values != nil {
		raw, err := json.Marshal(def.Values)
		if err != nil {
			return nil, fmt.Errorf("%s: values cannot be written as JSON: %w", o.File, err)
		}
		a.Spec.Values = &apiextensionsv1.JSON{Raw: raw}
	}
	for _, d := range def.DependsOn {
		a.Spec.DependsOn = append(a.Spec.DependsOn, capstanv1.DependencyReference(d))
	}
	for _, rule := range def.Ignore {
		t := rule.Target
		a.Spec.Ignore = append(a.Spec.Ignore, capstanv1.IgnoreRule{Paths: rule.Paths,
			Target: capstanv1.IgnoreTarget{Group: t.Group, Kind: t.Kind, Namespace: t.Namespace, Name: t.Name}})
	}
	for _, pt := range def.Patches {
		patch := capstanv1.Patch{Patch: pt.Patch}
		if pt.Target != nil {
			patch.Target = (*capstanv1.PatchTarget)(pt.Target)
		}
		a.Spec.Patches = append(a.Spec.Patches, patch)
	}
	for _, img := range def.Images {
		a.Spec.Images = append(a.Spec.Images, capstanv1.Image(img))
	}
	for i, w := range def.SyncWindows {
		d, err := time.ParseDuration(w.Duration)
		if err != nil {
			return nil, fmt.Errorf("%s: syncWindows[%d].duration %q: %w", o.File, i, w.Duration, err)
		}
		a.Spec.SyncWindows = append(a.Spec.SyncWindows, capstanv1.SyncWindow{Kind: capstanv1.SyncWindowKind(w.Kind), Schedule: w.Schedule,
			Duration: metav1.Duration{Duration: d}, TimeZone: w.TimeZone, ManualSync: w.ManualSync})
	}
	for _, hc := range def.HealthChecks {
		a.Spec.HealthChecks = append(a.Spec.HealthChecks, capstanv1.HealthCheck(hc))
	}
	for _, ref := range def.ValuesFrom {
		a.Spec.ValuesFrom = append(a.Spec.ValuesFrom, capstanv1.ValuesReference(ref))
	}
	a.Spec.Substitute = def.Substitute
	if d := def.Decryption; d != nil {
		a.Spec.Decryption = &capstanv1.Decryption{Provider: d.Provider, SecretRef: capstanv1.LocalObjectReference{Name: d.SecretRef.Name}}
	}
	for _, ref := range def.SubstituteFrom {
		a.Spec.SubstituteFrom = append(a.Spec.SubstituteFrom, capstanv1.SubstituteReference(ref))
	}
	if def.HookTimeout != "" {
		d, err := time.ParseDuration(def.HookTimeout)
		if err != nil {
			return nil, fmt.Errorf("%s: hookTimeout %q: %w", o.File, def.HookTimeout, err)
		}
		a.Spec.HookTimeout = &metav1.Duration{Duration: d}
	}
	if o.Shard != "" {
		a.Labels[ShardLabel] = o.Shard
	}
	return a, nil
}

func localRef(r *SecretRef) *capstanv1.LocalObjectReference {
	if r == nil {
		return nil
	}
	return &capstanv1.LocalObjectReference{Name: r.Name}
}

// ApplyObject turns an Addon into the unstructured object of a server-side
// apply: metadata name, namespace, labels and annotations, and the spec.
// Status and the empty creationTimestamp are left out, so the apply owns no
// field it does not mean to set.
func ApplyObject(a *capstanv1.Addon) (*unstructured.Unstructured, error) {
	spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&a.Spec)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(capstanv1.GroupVersion.String())
	u.SetKind("Addon")
	u.SetName(a.Name)
	u.SetNamespace(a.Namespace)
	u.SetLabels(a.Labels)
	u.SetAnnotations(a.Annotations)
	return u, nil
}
