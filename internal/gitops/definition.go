// Package gitops is git as the source of truth: it parses the definition
// files and turns them into Addons, reads a repository's snapshot, verifies
// push webhooks, and commits the changes that the CLI and the web page make.
// The controller that syncs AddonRepositories with it is
// internal/controller/addonrepository_controller.go.
package gitops

import (
	"bytes"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxFileSize is the largest definition file the parser reads. A definition is
// a few hundred bytes; anything near this size is a mistake or an attack.
const MaxFileSize = 1 << 20

// MaxFolderSize is the most bytes the definition files of one folder may
// hold in all. The syncer keeps a repository's parsed definitions in
// memory while it is synced (the last synced commit's, and the newest),
// about ten times their YAML: a folder of many files near MaxFileSize,
// which git compresses into a small push, would otherwise hold gigabytes
// of the controller every tenant shares. A definition is a few hundred
// bytes, or a few kilobytes with its values inline, so 8 MiB is a thousand
// add-ons or more, far above any real folder (Argo CD's repo server
// refuses a folder's manifests past 10 MB by default).
const MaxFolderSize = 8 << 20

// MaxFolderFiles is the most definition files one folder may hold, each
// name that looks like one counted (an empty file, a file over
// MaxFileSize, a symbolic link or a folder too, since each is claimed and
// reported). MaxFolderSize alone counts bytes: an empty file costs it
// nothing, yet each file is kept as a parsed definition or a problem,
// about 250 bytes for an empty one and 650 for a one-line chart (measured
// on 10,000 of them), and git sends a tree of a hundred thousand entries
// that share one blob cheaply. 10,000 is ten times the thousand add-ons
// of a large real folder, and holds about 6 MiB of such files. With
// MaxFolderSize, a snapshot of one folder is held to about 90 MiB; the
// syncer keeps up to two per AddonRepository (the last synced commit's and
// the newest), so the bound is per AddonRepository, and a ResourceQuota
// on count/addonrepositories.capstan.dev bounds how many a namespace may
// make.
const MaxFolderFiles = 10000

// folderTooLarge is the error of a folder whose definition files hold
// total bytes, more than MaxFolderSize.
func folderTooLarge(folder string, files int, total int64) error {
	return fmt.Errorf("the %d definition files of folder %q hold %.1f MiB in all, more than the %d MiB Capstan reads of one folder: "+
		"a definition is a few hundred bytes; move large values out of the files (valuesFrom a ConfigMap or Secret, or the chart's own values), "+
		"or split the add-ons among folders, each read by an AddonRepository of its own",
		files, folder, float64(total)/(1<<20), MaxFolderSize>>20)
}

// folderTooMany is the error of a folder that holds more than
// MaxFolderFiles definition files.
func folderTooMany(folder string, files int) error {
	return fmt.Errorf("folder %q holds %d definition files, more than the %d Capstan reads of one folder: "+
		"split the add-ons among folders, each read by an AddonRepository of its own, and remove files that define no add-on",
		folder, files, MaxFolderFiles)
}

// Definition is one add-on as it is written in addons/<name>.yaml.
type Definition struct {
	// Name is the add-on's name. It must equal the file's name without .yaml.
	Name string `yaml:"name"`
	// Title is the display name.
	Title string `yaml:"title,omitempty"`
	// Category groups add-ons on the Add-ons page.
	Category string `yaml:"category,omitempty"`
	// Namespace is where the add-on's namespaced objects go.
	Namespace string `yaml:"namespace,omitempty"`
	// CreateNamespace creates the namespace when it does not exist.
	CreateNamespace bool `yaml:"createNamespace,omitempty"`
	// Helm is a Helm chart source.
	Helm *HelmSource `yaml:"helm,omitempty"`
	// Git is a folder of a git repository, the gitops repository by default.
	Git *GitSource `yaml:"git,omitempty"`
	// ReleaseName is the Helm release name, the add-on's name by default.
	ReleaseName string `yaml:"releaseName,omitempty"`
	// Values are the chart's values.
	Values map[string]any `yaml:"values,omitempty"`
	// ValuesFrom merges values from Secrets and ConfigMaps, in order.
	ValuesFrom []ValuesReference `yaml:"valuesFrom,omitempty"`
	// Adopt takes over objects that already run, when that changes nothing.
	Adopt bool `yaml:"adopt,omitempty"`
	// AllowAdoptChanges lets an adoption change what it takes over.
	AllowAdoptChanges bool `yaml:"allowAdoptChanges,omitempty"`
	// ManualSync makes every change wait for an approval.
	ManualSync bool `yaml:"manualSync,omitempty"`
	// DependsOn names add-ons that must be Ready first.
	DependsOn []DependencyReference `yaml:"dependsOn,omitempty"`
	// Ignore leaves fields of running objects to whoever else manages them.
	Ignore []IgnoreRule `yaml:"ignore,omitempty"`
	// Patches change the rendered objects and hooks, as kustomize's
	// patches do (spec.patches).
	Patches []Patch `yaml:"patches,omitempty"`
	// Images replace container images by name (spec.images).
	Images []Image `yaml:"images,omitempty"`
	// SyncWindows say when changes may apply (spec.syncWindows).
	SyncWindows []SyncWindow `yaml:"syncWindows,omitempty"`
	// HealthChecks judge objects of a kind by CEL expressions
	// (spec.healthChecks).
	HealthChecks []HealthCheck `yaml:"healthChecks,omitempty"`
	// Substitute sets the variables of a git folder's ${name}
	// (spec.substitute).
	Substitute map[string]string `yaml:"substitute,omitempty"`
	// SubstituteFrom reads variables from ConfigMaps and Secrets
	// (spec.substituteFrom).
	SubstituteFrom []SubstituteReference `yaml:"substituteFrom,omitempty"`
	// Decryption decrypts the folder's SOPS files (spec.decryption).
	Decryption *Decryption `yaml:"decryption,omitempty"`
	// Prune deletes what the add-on applied before and no longer renders.
	Prune bool `yaml:"prune,omitempty"`
	// Recreate deletes and creates anew an object whose change the API
	// server refuses to make in place (spec.recreate).
	Recreate bool `yaml:"recreate,omitempty"`
	// Suspend makes the add-on plan-only.
	Suspend bool `yaml:"suspend,omitempty"`
	// HookTimeout bounds one Helm hook, such as 10m.
	HookTimeout string `yaml:"hookTimeout,omitempty"`
	// DeletionPolicy is Orphan or Delete.
	DeletionPolicy string `yaml:"deletionPolicy,omitempty"`

	// gitPathLine is the line of git.path, for problems found in the tree.
	gitPathLine int
}

// HelmSource is a chart from exactly one of: a chart repository (repo and
// chart), an OCI registry (oci) or an https archive (url).
type HelmSource struct {
	Repo      string     `yaml:"repo,omitempty"`
	Chart     string     `yaml:"chart,omitempty"`
	OCI       string     `yaml:"oci,omitempty"`
	URL       string     `yaml:"url,omitempty"`
	Version   string     `yaml:"version,omitempty"`
	Digest    string     `yaml:"digest,omitempty"`
	SecretRef *SecretRef `yaml:"secretRef,omitempty"`
	// Verify checks the chart's signature before anything is rendered
	// (spec.chart.verify).
	Verify *ChartVerification `yaml:"verify,omitempty"`
}

// ChartVerification says how a chart's signature is checked: one of
// provenance (a chart repository or an https archive) or cosign (an OCI
// registry).
type ChartVerification struct {
	Provenance *SignatureKeys `yaml:"provenance,omitempty"`
	Cosign     *SignatureKeys `yaml:"cosign,omitempty"`
}

// SignatureKeys names the key of a Secret in the Addon's namespace that
// holds the public keys a signature must be made with; an empty Key is
// the kind's default ("keyring" or "cosign.pub").
type SignatureKeys struct {
	SecretRef SecretRef `yaml:"secretRef"`
	Key       string    `yaml:"key,omitempty"`
}

// GitSource is a folder of a git repository. Without a URL it is a folder of
// the gitops repository itself, pinned to the commit the definition came from.
type GitSource struct {
	URL       string     `yaml:"url,omitempty"`
	Revision  string     `yaml:"revision,omitempty"`
	Path      string     `yaml:"path,omitempty"`
	SecretRef *SecretRef `yaml:"secretRef,omitempty"`
}

// DependencyReference names another add-on, in this repository's
// namespace unless namespace is given.
type DependencyReference struct {
	Name      string `yaml:"name"`
	Namespace string `yaml:"namespace,omitempty"`
}

// IgnoreRule names fields, as JSON pointers, of the objects its target
// selects (spec.ignore).
type IgnoreRule struct {
	Paths  []string     `yaml:"paths"`
	Target IgnoreTarget `yaml:"target,omitempty"`
}

// IgnoreTarget selects objects; a field left out matches any.
type IgnoreTarget struct {
	Group     *string `yaml:"group,omitempty"`
	Kind      string  `yaml:"kind,omitempty"`
	Namespace string  `yaml:"namespace,omitempty"`
	Name      string  `yaml:"name,omitempty"`
}

// Patch is a strategic merge or JSON 6902 patch of the objects its target
// selects (spec.patches).
type Patch struct {
	Patch  string       `yaml:"patch"`
	Target *PatchTarget `yaml:"target,omitempty"`
}

// PatchTarget selects objects as kustomize's patch targets do.
type PatchTarget struct {
	Group              string `yaml:"group,omitempty"`
	Version            string `yaml:"version,omitempty"`
	Kind               string `yaml:"kind,omitempty"`
	Name               string `yaml:"name,omitempty"`
	Namespace          string `yaml:"namespace,omitempty"`
	LabelSelector      string `yaml:"labelSelector,omitempty"`
	AnnotationSelector string `yaml:"annotationSelector,omitempty"`
}

// Image replaces the container images with one name (spec.images).
type Image struct {
	Name    string `yaml:"name"`
	NewName string `yaml:"newName,omitempty"`
	NewTag  string `yaml:"newTag,omitempty"`
	Digest  string `yaml:"digest,omitempty"`
}

// SyncWindow is a time when changes may, or may not, apply
// (spec.syncWindows).
type SyncWindow struct {
	Kind       string `yaml:"kind"`
	Schedule   string `yaml:"schedule"`
	Duration   string `yaml:"duration"`
	TimeZone   string `yaml:"timeZone,omitempty"`
	ManualSync bool   `yaml:"manualSync,omitempty"`
}

// HealthCheck says by CEL expressions when objects of one kind are ready
// (spec.healthChecks).
type HealthCheck struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Current    string `yaml:"current"`
	InProgress string `yaml:"inProgress,omitempty"`
	Failed     string `yaml:"failed,omitempty"`
}

// SubstituteReference names a ConfigMap or Secret of variables
// (spec.substituteFrom).
type SubstituteReference struct {
	Kind     string `yaml:"kind"`
	Name     string `yaml:"name"`
	Optional bool   `yaml:"optional,omitempty"`
}

// Decryption names the Secret of age keys that decrypts a folder's SOPS
// files (spec.decryption).
type Decryption struct {
	Provider  string    `yaml:"provider"`
	SecretRef SecretRef `yaml:"secretRef"`
}

// SecretRef names a Secret in the Addon's namespace.
type SecretRef struct {
	Name string `yaml:"name"`
}

// ValuesReference takes values from a key of a Secret or ConfigMap.
type ValuesReference struct {
	Kind       string `yaml:"kind"`
	Name       string `yaml:"name"`
	ValuesKey  string `yaml:"valuesKey,omitempty"`
	TargetPath string `yaml:"targetPath,omitempty"`
	Optional   bool   `yaml:"optional,omitempty"`
}

// Problem is one thing wrong with a definition file.
type Problem struct {
	// Line is the 1-based line of the problem, 0 when it concerns the whole file.
	Line int `json:"line,omitempty"`
	// Field is the dotted path of the field, such as helm.repo, if any.
	Field string `json:"field,omitempty"`
	// Message says what is wrong and what to do.
	Message string `json:"message"`
}

// String formats the problem without its file.
func (p Problem) String() string {
	if p.Field != "" {
		return p.Field + ": " + p.Message
	}
	return p.Message
}

// InvalidError is returned for a definition file that cannot be used. It
// lists every problem found, each with its line.
type InvalidError struct {
	// File is the file's path in the repository, such as addons/longhorn.yaml.
	File string
	// Problems are what is wrong, in file order.
	Problems []Problem
}

// Error formats one "file:line: field: message" line per problem.
func (e *InvalidError) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		if p.Line > 0 {
			fmt.Fprintf(&b, "%s:%d: %s", e.File, p.Line, p)
		} else {
			fmt.Fprintf(&b, "%s: %s", e.File, p)
		}
	}
	return b.String()
}

// Encode writes a definition as the YAML of a definition file, with the
// two-space indent people use.
func Encode(def *Definition) ([]byte, error) {
	return encodeYAML(def)
}

// encodeYAML writes v as YAML indented by two spaces, as definitions are.
func encodeYAML(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
