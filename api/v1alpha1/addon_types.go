package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Annotations and labels that Capstan reads or writes.
const (
	// PausedAnnotation set to "true" freezes an Addon: nothing is fetched,
	// rendered or applied. Automation uses it; the git syncer never touches it.
	PausedAnnotation = "capstan.dev/paused"
	// UninstallAnnotation set to "true" makes the deletion of an Addon remove
	// its software, whatever spec.deletionPolicy says.
	UninstallAnnotation = "capstan.dev/uninstall"
	// KeepValuesAnnotation set to "true" before an Addon is deleted hands its
	// values Secrets and ConfigMaps and generated values back instead of deleting them.
	KeepValuesAnnotation = "capstan.dev/keep-values"
	// RefreshAnnotation asks for one refresh: a new value (any string, such
	// as a time) reconciles the Addon at once and reads its source again,
	// past every cache: the chart repository's index, an OCI tag, an https
	// archive. status.lastHandledRefresh echoes the value once it is handled.
	// A value is at most MaxRefreshLength characters.
	RefreshAnnotation = "capstan.dev/refresh"
	// MaxRefreshLength bounds the value of RefreshAnnotation.
	MaxRefreshLength = 128
	// TestAnnotation asks for one run of the chart's test hooks, as `helm
	// test` runs them: a new value (any string, such as a time; at most
	// MaxRefreshLength characters) runs them once the add-on is healthy,
	// whatever spec.test says. status.lastTest.request echoes the value
	// once they ran.
	TestAnnotation = "capstan.dev/test"

	// AddonLabel names the Addon that applied an object ("<namespace>.<name>"
	// would exceed a label's length, so the namespace is a label of its own).
	AddonLabel = "capstan.dev/addon"
	// AddonNamespaceLabel names the namespace of the Addon that applied an object.
	AddonNamespaceLabel = "capstan.dev/addon-namespace"
	// ManagedByLabel is set to "capstan" on every object Capstan applies.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// LeaderLabel set to "true" marks the Pod of the controller replica
	// that leads: the replica sets it on its own Pod once it is elected,
	// and the Service of the API, the web page and the git webhooks
	// selects it, as the leader alone serves them.
	LeaderLabel = "capstan.dev/leader"

	// Finalizer lets the controller run the deletion policy before an Addon goes.
	Finalizer = "capstan.dev/finalizer"
	// FieldManager is the one field manager of every server-side apply of
	// an add-on's objects.
	FieldManager = "capstan"
	// OwnerLabelsManager is the field manager of the owner labels alone,
	// which Capstan writes on an object it adopts without a change: it
	// owns those labels and nothing else. (The fields the chart renders
	// are then written as FieldManager's, their values unchanged.)
	OwnerLabelsManager = "capstan-owner"
)

// DeletionPolicy says what happens to an add-on's software when its Addon is deleted.
// +kubebuilder:validation:Enum=Orphan;Delete
type DeletionPolicy string

const (
	// DeletionOrphan leaves everything running. The cluster profile's default.
	DeletionOrphan DeletionPolicy = "Orphan"
	// DeletionDelete runs the pre-delete hooks, deletes the inventory except the
	// never-delete kinds, and runs the post-delete hooks. The restricted profile's default.
	DeletionDelete DeletionPolicy = "Delete"
)

// AddonSpec is the desired state of an add-on: where it comes from, how it is
// rendered, and which gates its changes pass.
//
// +kubebuilder:validation:XValidation:rule="[has(self.chart), has(self.git)].filter(x, x).size() == 1",message="spec: set exactly one source, either spec.chart or spec.git"
// +kubebuilder:validation:XValidation:rule="!has(self.allowAdoptChanges) || !self.allowAdoptChanges || (has(self.adopt) && self.adopt)",message="spec.allowAdoptChanges needs spec.adopt: true"
type AddonSpec struct {
	// Chart installs a Helm chart from a chart repository, an OCI registry or
	// an https archive.
	// +optional
	Chart *ChartSource `json:"chart,omitempty"`

	// Git installs a folder of a git repository: a kustomization, or plain
	// YAML files taken as they are.
	// +optional
	Git *GitSource `json:"git,omitempty"`

	// TargetNamespace is where the namespaced objects go. The cluster profile
	// defaults it to the Addon's namespace; the restricted profile always uses
	// the Addon's namespace and refuses any other.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	TargetNamespace string `json:"targetNamespace,omitempty"`

	// CreateNamespace creates the target namespace when it does not exist
	// (cluster profile only). A namespace is never deleted.
	// +optional
	CreateNamespace bool `json:"createNamespace,omitempty"`

	// ReleaseName is the Helm release name the chart is rendered with. It
	// defaults to the Addon's name; set it to keep a migrated release's name.
	// +kubebuilder:validation:MaxLength=53
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	ReleaseName string `json:"releaseName,omitempty"`

	// Values are the chart's values, merged over its defaults. Secret inputs
	// (writeOnly in values.schema.json) are refused here: put them in a Secret
	// and name it in valuesFrom.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +optional
	Values *apiextensionsv1.JSON `json:"values,omitempty"`

	// ValuesFrom merges values from Secrets and ConfigMaps, in order, over
	// spec.values.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	ValuesFrom []ValuesReference `json:"valuesFrom,omitempty"`

	// Adopt lets the add-on take over objects that already run, but only when
	// that changes nothing (or allowAdoptChanges is set).
	// +optional
	Adopt bool `json:"adopt,omitempty"`

	// AllowAdoptChanges lets an adoption change the objects it takes over.
	// +optional
	AllowAdoptChanges bool `json:"allowAdoptChanges,omitempty"`

	// ManualSync makes every change wait as OutOfSync until it is approved:
	// set approvedPlan to the plan's hash and raise syncRequest.
	// +optional
	ManualSync bool `json:"manualSync,omitempty"`

	// SyncRequest is a counter: raising it asks for one sync of the plan named
	// by approvedPlan. The git syncer preserves it.
	// +kubebuilder:validation:Minimum=0
	// +optional
	SyncRequest int64 `json:"syncRequest,omitempty"`

	// ApprovedPlan is the hash of the plan a sync request approves. When the
	// current plan's hash differs, nothing is applied. An approval counts
	// only with the sync request it came with (status.lastApprovedPlan).
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	// +optional
	ApprovedPlan string `json:"approvedPlan,omitempty"`

	// Prune deletes objects the add-on applied before and no longer renders,
	// except CustomResourceDefinitions, Namespaces, PersistentVolumeClaims,
	// PersistentVolumes and StorageClasses, which are never deleted.
	// +optional
	Prune bool `json:"prune,omitempty"`

	// Recreate deletes and creates anew an object whose change the API
	// server refuses to make in place: a Deployment's selector, a
	// StatefulSet's serviceName or volumeClaimTemplates, a Service's
	// clusterIP, a RoleBinding's roleRef, an immutable Secret's data. Only
	// objects this add-on applied, never CustomResourceDefinitions,
	// Namespaces, PersistentVolumeClaims, PersistentVolumes or
	// StorageClasses. The plan marks each such object. Without it, such a
	// change fails the plan and nothing is applied, unless the object's
	// manifest asks for it as Flux or Argo CD marks it
	// (kustomize.toolkit.fluxcd.io/force: enabled, or the sync option
	// Force=true).
	// +optional
	Recreate bool `json:"recreate,omitempty"`

	// Suspend makes the add-on plan-only: it is fetched, rendered, validated
	// and previewed, and the plan is written to status, but nothing is applied.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// HookTimeout bounds how long one Helm hook may run. Default 10m.
	// The rule checks the form before it reads the duration, so that a
	// value such as 1d or 99999999999h gets the rule's message, not CEL's
	// conversion error; at most 16 characters and 6 digits a part keep the
	// sum of the parts within a duration's range.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,6}(\\\\.[0-9]{1,9})?(ms|s|m|h))+$') && duration(self) > duration('0s') && duration(self) <= duration('24h')",message="spec.hookTimeout must be a duration such as 90s, 10m or 1h30m: more than 0s and at most 24h"
	// +optional
	HookTimeout *metav1.Duration `json:"hookTimeout,omitempty"`

	// DeletionPolicy says what deleting the Addon does to its software:
	// Orphan leaves it running, Delete removes it. The cluster profile
	// defaults to Orphan and the restricted profile to Delete.
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// Title is the add-on's display name.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Title string `json:"title,omitempty"`

	// Category groups add-ons on the Add-ons page, such as storage or monitoring.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Category string `json:"category,omitempty"`

	// AllowUnsafeCRDChanges lets a chart upgrade change a CRD in a way that
	// can break the objects stored under it: drop a stored version, change
	// the storage version with no conversion, or make existing objects
	// invalid. Without it such an upgrade is a violation in the plan.
	// +optional
	AllowUnsafeCRDChanges bool `json:"allowUnsafeCRDChanges,omitempty"`

	// HealthTimeout is how long after an apply every applied object may
	// take to be Current (kstatus): past it, the add-on is Failed with the
	// objects that are not. Unset waits as long as it takes. Once the
	// add-on has been healthy, it is how long an object may stay in
	// progress (a rollout, an autoscale) before the add-on is Degraded;
	// 10m when unset.
	// The rule reads as HookTimeout's.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,6}(\\\\.[0-9]{1,9})?(ms|s|m|h))+$') && duration(self) > duration('0s') && duration(self) <= duration('24h')",message="spec.healthTimeout must be a duration such as 90s, 10m or 1h30m: more than 0s and at most 24h"
	// +optional
	HealthTimeout *metav1.Duration `json:"healthTimeout,omitempty"`

	// DependsOn names add-ons that must be Ready, for their current
	// generation, before this one installs or changes anything. A cycle, or
	// an add-on that does not exist, is a condition that says so.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	DependsOn []DependencyReference `json:"dependsOn,omitempty"`

	// KubeConfig installs the add-on into another cluster, from a
	// kubeconfig in a Secret of the Addon's namespace. Capstan acts there
	// as the account the kubeconfig's user names with as:, and dials the
	// server through the egress guard (--remote-cluster-allow). Only the
	// cluster profile may set it.
	// +optional
	KubeConfig *KubeConfigReference `json:"kubeConfig,omitempty"`

	// Registration reads the add-on's manifest from this address instead
	// of from its primary Service. Only the cluster profile may set it: it
	// is for a primary outside the cluster, and for tests.
	// +optional
	Registration *RegistrationSource `json:"registration,omitempty"`

	// Ignore leaves fields of objects that exist to whoever else manages
	// them: an autoscaler's replicas, an injected caBundle. Capstan applies
	// such a field as it runs (or leaves it out when it is not set), so it
	// is neither drift nor changed by an upgrade; an object that does not
	// exist yet is created whole.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Ignore []IgnoreRule `json:"ignore,omitempty"`

	// Patches change the rendered objects and hooks, in order, before
	// anything else reads them, as kustomize's patches do: each is a
	// strategic merge patch or a JSON 6902 patch, applied to the objects
	// its target selects (or, without a target, to the one object the
	// patch names). Capstan's labels, the guardrails and the preview come
	// after them. All patches together are at most 64 KiB.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Patches []Patch `json:"patches,omitempty"`

	// Images replace container images by name in the rendered objects and
	// hooks, after the patches, as kustomize's images do: a mirror, a tag
	// or a digest.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Images []Image `json:"images,omitempty"`

	// SyncWindows say when changes may apply, as Argo CD's sync windows
	// do: while a deny window is active, or while allow windows exist and
	// none is, a plan with changes waits (OutOfSync) and the add-on is
	// planned, not applied; drift is not undone either. A person's sync
	// applies then only in windows that say manualSync. Uninstalls are not
	// held.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	SyncWindows []SyncWindow `json:"syncWindows,omitempty"`

	// Test runs the chart's test hooks (helm.sh/hook: test), as `helm test`
	// does, once every object of an install or an upgrade is Current, as
	// Flux's HelmRelease runs them with test.enable. With enable, a test
	// that fails makes the add-on Failed (TestFailed) until another render
	// or another request passes, unless ignoreFailures is set.
	// +optional
	Test *TestPolicy `json:"test,omitempty"`

	// HealthChecks judge objects of a kind by CEL expressions over their
	// fields (apiVersion, kind, metadata, spec, status, data), as Flux's
	// healthCheckExprs do: for custom resources whose readiness kstatus
	// cannot read, such as one that reports only status.phase. A kind with
	// a check is judged by it alone.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	HealthChecks []HealthCheck `json:"healthChecks,omitempty"`

	// Substitute sets variables that replace ${name} in a git folder's
	// objects after it is built and patched, as Flux's
	// postBuild.substitute does. They win over substituteFrom. A
	// variable that is used and not defined stops the render, unless it
	// has a default (${name:=default}). A value is at most 4096 characters:
	// it is written at every place that names it. Git folders only.
	// +kubebuilder:validation:MaxProperties=256
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[_a-zA-Z][_a-zA-Z0-9]*$'))",message="spec.substitute: a variable's name is letters, digits and underscores, and does not start with a digit"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 4096)",message="spec.substitute: a variable's value is at most 4096 characters; keep longer text in a file of the folder"
	// +optional
	Substitute map[string]string `json:"substitute,omitempty"`

	// SubstituteFrom reads variables from ConfigMaps and Secrets of the
	// Addon's namespace, in order, a later one winning, as Flux's
	// postBuild.substituteFrom does. Every key whose name is a variable
	// name is a variable. A value from a Secret is hidden in the plan,
	// its diffs and every message. Git folders only.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	SubstituteFrom []SubstituteReference `json:"substituteFrom,omitempty"`

	// Decryption decrypts the YAML and JSON files of a git folder that
	// SOPS encrypted for age keys, as the folder's build reads them, as
	// Flux's Kustomization decryption does. A file whose MAC does not match is
	// refused. Decrypted values are hidden wherever Capstan shows them.
	// Git folders only, in the cluster profile.
	// +optional
	Decryption *Decryption `json:"decryption,omitempty"`
}

// Decryption says how a git folder's encrypted files are decrypted.
type Decryption struct {
	// Provider is sops, the only one.
	// +kubebuilder:validation:Enum=sops
	Provider string `json:"provider"`

	// SecretRef names a Secret of the Addon's namespace whose entries
	// ending in .agekey hold the age keys (AGE-SECRET-KEY-1…), as Flux's
	// decryption Secret does.
	SecretRef LocalObjectReference `json:"secretRef"`
}

// SubstituteReference names a ConfigMap or Secret whose keys are
// variables for spec.substitute.
type SubstituteReference struct {
	// Kind is Secret or ConfigMap.
	// +kubebuilder:validation:Enum=Secret;ConfigMap
	Kind string `json:"kind"`

	// Name of the object, in the Addon's namespace: a Secret's or
	// ConfigMap's name, lower case.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Optional makes a missing object no error.
	// +optional
	Optional bool `json:"optional,omitempty"`
}

// HealthCheck says when the objects of one kind are ready, still in
// progress, or failed. An object whose status.observedGeneration is not
// its metadata.generation is in progress, with no expression evaluated.
// Otherwise inProgress is evaluated first, then failed, then current; an
// object none of them is true of is in progress.
type HealthCheck struct {
	// APIVersion is group/version, such as postgresql.cnpg.io/v1.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	APIVersion string `json:"apiVersion"`
	// Kind is the kind the check judges.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Current is true when the object is ready, such as
	// "status.phase == 'Ready'".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Current string `json:"current"`
	// InProgress, when true, says the object is still working, whatever
	// the others say.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	InProgress string `json:"inProgress,omitempty"`
	// Failed, when true, says the object has failed; the add-on waits
	// for it, naming it, up to spec.healthTimeout.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Failed string `json:"failed,omitempty"`
}

// SyncWindowKind is allow or deny.
// +kubebuilder:validation:Enum=allow;deny
type SyncWindowKind string

const (
	// SyncWindowAllow lets changes apply while it is active; with one or
	// more, changes apply only then.
	SyncWindowAllow SyncWindowKind = "allow"
	// SyncWindowDeny holds changes while it is active, whatever else.
	SyncWindowDeny SyncWindowKind = "deny"
)

// SyncWindow is a time when changes may, or may not, apply.
type SyncWindow struct {
	// Kind is allow or deny.
	Kind SyncWindowKind `json:"kind"`
	// Schedule is when the window opens: a cron expression of five fields
	// (minute hour day-of-month month day-of-week), such as "0 22 * * 1-5",
	// or a descriptor such as @daily.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Schedule string `json:"schedule"`
	// Duration is how long it stays open from each opening: more than 0s,
	// at most 168h.
	Duration metav1.Duration `json:"duration"`
	// TimeZone is the IANA time zone of the schedule, such as
	// Europe/Amsterdam; UTC when left out.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	TimeZone string `json:"timeZone,omitempty"`
	// ManualSync lets a person's sync (an approval, or a raised
	// spec.syncRequest) apply while this window holds changes.
	// +optional
	ManualSync bool `json:"manualSync,omitempty"`
}

// Patch is one kustomize patch of the rendered objects.
type Patch struct {
	// Patch is a strategic merge patch (a partial object, in YAML or
	// JSON) or a JSON 6902 patch (a list of operations). A copy
	// operation is refused: each can double an object. Several strategic
	// merge patches separated by "---" each apply to the object they
	// name, and take no target.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=65536
	Patch string `json:"patch"`

	// Target selects the objects the patch applies to. Left out, a
	// strategic merge patch applies to the object it names by kind and
	// name, and a JSON 6902 patch needs a target.
	// +optional
	Target *PatchTarget `json:"target,omitempty"`
}

// PatchTarget selects objects as kustomize's patch targets do: each field
// set must match, and name and namespace may be regular expressions.
type PatchTarget struct {
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Group string `json:"group,omitempty"`
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Version string `json:"version,omitempty"`
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Kind string `json:"kind,omitempty"`
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Name string `json:"name,omitempty"`
	// Namespace matches the namespace the render wrote; an object the
	// chart leaves without one has none yet.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// LabelSelector is a label selector, such as app=web,tier!=cache.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	LabelSelector string `json:"labelSelector,omitempty"`
	// AnnotationSelector is a selector of annotations, written as a label selector.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	AnnotationSelector string `json:"annotationSelector,omitempty"`
}

// Image replaces the container images with one name.
// +kubebuilder:validation:XValidation:rule="has(self.newName) || has(self.newTag) || has(self.digest)",message="spec.images: set newName, newTag or digest"
type Image struct {
	// Name is the image's name as the render writes it, without a tag or
	// digest, such as nginx or ghcr.io/org/app.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Name string `json:"name"`
	// NewName replaces the name, such as a mirror's.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	NewName string `json:"newName,omitempty"`
	// NewTag replaces the tag.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`
	// +optional
	NewTag string `json:"newTag,omitempty"`
	// Digest pins the image, "sha256:" and 64 hex digits.
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	// +optional
	Digest string `json:"digest,omitempty"`
}

// IgnoreRule names fields of the objects a target selects.
type IgnoreRule struct {
	// Paths are JSON pointers (RFC 6901) into the object, such as
	// /spec/replicas or /spec/template/spec/containers/0/resources. Not the
	// object's identity (apiVersion, kind, metadata other than annotations
	// and labels) nor Capstan's own labels.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^(/([^/~]|~[01])+)+$`
	// +kubebuilder:validation:items:MaxLength=256
	// +listType=atomic
	Paths []string `json:"paths"`

	// Target selects objects; a field left empty matches any.
	// +optional
	Target IgnoreTarget `json:"target,omitempty"`
}

// IgnoreTarget selects objects by API group, kind, namespace and name.
type IgnoreTarget struct {
	// Group is the API group: "" for the core group, "apps" for a
	// Deployment. Left out, any group.
	// +optional
	Group *string `json:"group,omitempty"`
	// +optional
	Kind string `json:"kind,omitempty"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// +optional
	Name string `json:"name,omitempty"`
}

// DependencyReference names another Addon.
type DependencyReference struct {
	// Name is the Addon's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Namespace is the Addon's namespace; the dependent's own by default.
	// Only the cluster profile may name another namespace.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// RegistrationSource is where an add-on's manifest is read from.
type RegistrationSource struct {
	// URL is an http or https address of the manifest (JSON).
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('http://') || self.matches('^[A-Za-z][A-Za-z0-9+.-]*:/*[^/?#]*@')",message="spec.registration.url must be an http:// or https:// URL"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[A-Za-z][A-Za-z0-9+.-]*:/*[^/?#]*@')",message="spec.registration.url must not carry credentials (user:password@; the address is not shown here): the address is shown in status and on the page; serve the manifest without credentials",reason=FieldValueForbidden
	URL string `json:"url"`
}

// The annotations of Chart.yaml that make a chart an add-on that registers.
const (
	// ChartAddonAnnotation set to "true" marks a chart written for Capstan.
	ChartAddonAnnotation = "capstan.dev/addon"
	// ChartPrimaryAnnotation names the add-on's primary Service, as NAME or
	// NAME:PORT, in the add-on's namespace; the manifest is read from it.
	ChartPrimaryAnnotation = "capstan.dev/primary"
	// ConditionRegistered is True when the add-on's manifest was read and
	// recorded in status.registration.
	ConditionRegistered = "Registered"
)

// Registration is an add-on's manifest, as read from its primary: what
// the page shows of it.
type Registration struct {
	// Name is the name the add-on registered, its own.
	Name string `json:"name"`
	// ConsoleURL is the add-on's own console.
	// +optional
	ConsoleURL string `json:"consoleURL,omitempty"`
	// Tiles are links the page shows for the add-on.
	// +optional
	Tiles []Tile `json:"tiles,omitempty"`
	// Setup are the steps left to set the add-on up, in order.
	// +optional
	Setup []string `json:"setup,omitempty"`
	// Source is the address the manifest was read from.
	Source string `json:"source"`
	// AppliedHash is the render the add-on ran when it was read; a new
	// apply reads it again.
	AppliedHash string `json:"appliedHash,omitempty"`
	// ReadAt is when it was read.
	ReadAt metav1.Time `json:"readAt"`
}

// Tile is one link of an add-on's manifest.
type Tile struct {
	Title string `json:"title"`
	// Icon is a short text, such as an emoji, shown before the title.
	// +optional
	Icon string `json:"icon,omitempty"`
	Link string `json:"link"`
}

// ChartSource is a Helm chart from exactly one of: a chart repository (repo
// and name), an OCI registry (oci) or an https archive (url).
//
// +kubebuilder:validation:XValidation:rule="[has(self.repo), has(self.oci), has(self.url)].filter(x, x).size() == 1",message="spec.chart: set exactly one of repo (with name), oci or url"
// +kubebuilder:validation:XValidation:rule="has(self.repo) == has(self.name)",message="spec.chart.name is required with spec.chart.repo, and only with it"
// +kubebuilder:validation:XValidation:rule="!has(self.url) || !has(self.version)",message="spec.chart.version cannot be set with spec.chart.url: the archive is the version"
// +kubebuilder:validation:XValidation:rule="!has(self.oci) || has(self.version) || has(self.digest)",message="spec.chart.oci needs a version (a tag) or a digest"
type ChartSource struct {
	// Repo is an https chart repository, the folder that serves index.yaml.
	// It carries no credentials: they go in the Secret named by secretRef.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.matches('^[A-Za-z][A-Za-z0-9+.-]*:/*[^/?#]*@')",message="spec.chart.repo must be an https:// URL"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[A-Za-z][A-Za-z0-9+.-]*:/*[^/?#]*@')",message="spec.chart.repo must not carry credentials (user:password@ or a token@ before the host; the address is not shown here): every reader of the Addon would see them; put them in a Secret and name it in spec.chart.secretRef",reason=FieldValueForbidden
	// +optional
	Repo string `json:"repo,omitempty"`

	// Name is the chart's name in the repository.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][-A-Za-z0-9_.]*$`
	// +optional
	Name string `json:"name,omitempty"`

	// OCI is a chart in an OCI registry, such as oci://ghcr.io/org/charts/name.
	// It carries no credentials: they go in the Secret named by secretRef.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^oci://[^/]+/.+') || self.matches('^[A-Za-z][A-Za-z0-9+.-]*:/*[^/?#]*@')",message="spec.chart.oci must be an OCI reference such as oci://registry.example.com/charts/name"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[A-Za-z][A-Za-z0-9+.-]*:/*[^/?#]*@')",message="spec.chart.oci must not carry credentials (user:password@ or a token@ before the host; the address is not shown here): every reader of the Addon would see them; put them in a Secret and name it in spec.chart.secretRef",reason=FieldValueForbidden
	// +optional
	OCI string `json:"oci,omitempty"`

	// URL is an https chart archive (.tgz). It carries no credentials:
	// they go in the Secret named by secretRef.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.matches('^[A-Za-z][A-Za-z0-9+.-]*:/*[^/?#]*@')",message="spec.chart.url must be an https:// URL of a chart archive"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[A-Za-z][A-Za-z0-9+.-]*:/*[^/?#]*@')",message="spec.chart.url must not carry credentials (user:password@ or a token@ before the host; the address is not shown here): every reader of the Addon would see them; put them in a Secret and name it in spec.chart.secretRef",reason=FieldValueForbidden
	// +optional
	URL string `json:"url,omitempty"`

	// Version is the chart version: exact, or a semver range for a chart
	// repository, or a tag for an OCI registry. Empty means the newest stable
	// version of a chart repository.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Version string `json:"version,omitempty"`

	// Digest pins the chart archive, "sha256:" and 64 hex digits. A mismatch
	// is an error, and nothing is applied.
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	// +optional
	Digest string `json:"digest,omitempty"`

	// SecretRef names a Secret in the Addon's namespace with credentials for
	// the repository or registry: username and password, or a token.
	// A restricted add-on reads it only when it is labelled
	// capstan.dev/addon=<the Addon's name>.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`

	// Verify checks the chart's signature before anything is rendered: a
	// signature that is missing or wrong Blocks the add-on.
	// +optional
	Verify *ChartVerification `json:"verify,omitempty"`
}

// KubeConfigReference names the Secret key that holds a kubeconfig.
type KubeConfigReference struct {
	// SecretRef names a Secret in the Addon's namespace.
	SecretRef LocalObjectReference `json:"secretRef"`
	// Key is the Secret's key; "value" by default, as Flux and Cluster API
	// write it.
	// +optional
	Key string `json:"key,omitempty"`
}

// ChartVerification says how a chart's signature is checked: one of
// provenance (chart repositories and https archives) or cosign (OCI).
// +kubebuilder:validation:XValidation:rule="has(self.provenance) != has(self.cosign)",message="spec.chart.verify takes one of provenance (a chart repository or https archive) or cosign (an OCI registry)"
type ChartVerification struct {
	// Provenance checks the Helm provenance file (the archive's URL with
	// .prov) against a keyring of PGP public keys: for charts from a chart
	// repository or an https archive.
	// +optional
	Provenance *ProvenanceVerification `json:"provenance,omitempty"`
	// Cosign checks the cosign signature of an OCI chart's manifest (the
	// tag sha256-<hex>.sig in the chart's repository) against public keys.
	// +optional
	Cosign *CosignVerification `json:"cosign,omitempty"`
}

// CosignVerification names the public keys a cosign signature must be made with.
type CosignVerification struct {
	// SecretRef names a Secret in the Addon's namespace whose key holds
	// the PEM public keys (cosign.pub, from cosign generate-key-pair) that
	// may sign.
	// A restricted add-on reads it only when it is labelled
	// capstan.dev/addon=<the Addon's name>.
	SecretRef LocalObjectReference `json:"secretRef"`
	// Key is the Secret's key; "cosign.pub" by default.
	// +optional
	Key string `json:"key,omitempty"`
}

// ProvenanceVerification names the keyring a provenance file must be signed with.
type ProvenanceVerification struct {
	// SecretRef names a Secret in the Addon's namespace whose key holds the
	// ASCII-armored public keys (gpg --export --armor) that may sign.
	// A restricted add-on reads it only when it is labelled
	// capstan.dev/addon=<the Addon's name>.
	SecretRef LocalObjectReference `json:"secretRef"`
	// Key is the Secret's key; "keyring" by default.
	// +optional
	Key string `json:"key,omitempty"`
}

// GitSource is a folder of a git repository.
type GitSource struct {
	// URL is the repository: https://, ssh:// or git@host:path. A user
	// name may be in it (git@, https://org@dev.azure.com/...), a password
	// may not: it goes in the Secret named by secretRef.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('http://') || self.startsWith('ssh://') || self.startsWith('file://') || self.matches('^[A-Za-z0-9._-]+@[^:]+:.+$') || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://[^/?#@]*:[^/?#]*@') || self.matches('^[^/?#@:]+:[^/?#@]*@')",message="spec.git.url must be https://, ssh://, file:// or user@host:path"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[A-Za-z][A-Za-z0-9+.-]*://[^/?#@]*:[^/?#]*@') && !self.matches('^[^/?#@:]+:[^/?#@]*@')",message="spec.git.url must not carry a password (user:password@; the address is not shown here): every reader of the Addon would see it; put it in a Secret and name it in spec.git.secretRef",reason=FieldValueForbidden
	URL string `json:"url"`

	// Revision is a commit, a tag or a branch. Definitions from the gitops
	// repository are pinned to the commit they came from. Empty means the
	// remote's default branch.
	// +kubebuilder:validation:MaxLength=255
	// +optional
	Revision string `json:"revision,omitempty"`

	// Path is the folder in the repository. It must stay inside it.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(s, s == '..')",message="spec.git.path must be relative and must not contain '..'"
	// +optional
	Path string `json:"path,omitempty"`

	// SecretRef names a Secret in the Addon's namespace with credentials:
	// username and password or a token, or an SSH key with known_hosts.
	// A restricted add-on reads it only when it is labelled
	// capstan.dev/addon=<the Addon's name>.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
}

// LocalObjectReference names an object in the Addon's namespace.
type LocalObjectReference struct {
	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ValuesReference takes values from a key of a Secret or ConfigMap, as Flux's
// HelmRelease does.
type ValuesReference struct {
	// Kind is Secret or ConfigMap.
	// +kubebuilder:validation:Enum=Secret;ConfigMap
	Kind string `json:"kind"`

	// Name of the object, in the Addon's namespace: a Secret's or
	// ConfigMap's name, lower case.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// ValuesKey is the key to read. Default values.yaml.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +optional
	ValuesKey string `json:"valuesKey,omitempty"`

	// TargetPath sets the key's raw string at this dotted path instead of
	// merging the key as YAML. The string is never parsed: "0123" stays a string.
	// +kubebuilder:validation:MaxLength=250
	// +optional
	TargetPath string `json:"targetPath,omitempty"`

	// Optional makes a missing object no error. A key missing from an
	// object that exists is an error still: a misspelt valuesKey.
	// +optional
	Optional bool `json:"optional,omitempty"`
}

// Phase is a one-word summary of an add-on's state.
// +kubebuilder:validation:Enum=Progressing;Synced;Degraded;OutOfSync;Blocked;Suspended;Paused;Failed;Deleting
type Phase string

// The phases of an add-on.
const (
	PhaseProgressing Phase = "Progressing"
	PhaseSynced      Phase = "Synced"
	// PhaseDegraded is an add-on that was Synced and healthy, with nothing
	// applied since, whose objects are no longer all Current: a
	// Deployment that lost its pods, a custom resource that reports a
	// failure.
	PhaseDegraded  Phase = "Degraded"
	PhaseOutOfSync Phase = "OutOfSync"
	PhaseBlocked   Phase = "Blocked"
	PhaseSuspended Phase = "Suspended"
	PhasePaused    Phase = "Paused"
	PhaseFailed    Phase = "Failed"
	PhaseDeleting  Phase = "Deleting"
)

// Profile is how much an add-on is trusted. The controller decides it from the
// Addon's namespace; the Addon's author never chooses it.
type Profile string

const (
	// ProfileCluster is for Addons in a trusted namespace: anything may be
	// created, through the impersonated add-ons service account.
	ProfileCluster Profile = "cluster"
	// ProfileRestricted is for every other Addon: the guardrails apply.
	ProfileRestricted Profile = "restricted"
)

// The condition types of an Addon, after the kstatus conventions.
const (
	// ConditionReady is True when the add-on runs what its spec asks for.
	ConditionReady = "Ready"
	// ConditionReconciling is True while the controller works towards the spec.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when progress needs a person to change something.
	ConditionStalled = "Stalled"
	// ConditionHealthy says whether the objects the add-on runs are all
	// Current, judged apart from whether its plan may be applied: an add-on
	// held by a gate or a sync window still reports it. It is Unknown
	// before anything was applied.
	ConditionHealthy = "Healthy"
)

// OwnedConditions lists every condition type the controller sets on an Addon.
var OwnedConditions = []string{ConditionReady, ConditionReconciling, ConditionStalled, ConditionHealthy}

// AddonStatus is what the controller last saw, planned and applied.
type AddonStatus struct {
	// ObservedGeneration is the generation the status was written for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are Ready, Reconciling and Stalled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Phase summarises the state in one word.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// Profile is cluster or restricted: the profile of the last sync that
	// changed the add-on's objects (applied, pruned, or grew the inventory
	// to apply), or, while the inventory is empty, the profile the
	// controller places the add-on in. A reconcile that changes nothing
	// leaves it as it is, so a controller that trusts a namespace for a
	// while does not make its restricted add-ons cluster. The default
	// deletion policy follows it when it does less than the profile of
	// now: an add-on recorded cluster, restricted now, is left running.
	// Its sync is held, Blocked with the reason ProfileChanged, until its
	// namespace is trusted again.
	// +optional
	Profile Profile `json:"profile,omitempty"`

	// Source names what was rendered, for display: a chart, or a git folder.
	// +optional
	Source string `json:"source,omitempty"`

	// Version is the resolved chart version, or the short git commit.
	// +optional
	Version string `json:"version,omitempty"`

	// Plan is what the last reconcile would change, and why it may wait.
	// +optional
	Plan *Plan `json:"plan,omitempty"`

	// Inventory lists every object the add-on applied, one string each:
	// "apiVersion Kind namespace/name", or "apiVersion Kind name" for a
	// cluster-scoped object. It is written before an apply as the union of
	// the old inventory and the new render, so a crash never orphans an
	// object.
	// +listType=atomic
	// +optional
	Inventory []ObjectID `json:"inventory,omitempty"`

	// InventoryCluster is the cluster the inventory is in, and that the
	// applied render and the hooks pending or done are of: {} for the
	// controller's own. When spec.kubeConfig names another cluster, Capstan
	// installs anew there and leaves the former one's objects running,
	// unmanaged, with a LeftOnFormerCluster event. An older Capstan's Addon
	// has none until its next reconcile records the cluster it targets.
	// +optional
	InventoryCluster *InventoryCluster `json:"inventoryCluster,omitempty"`

	// AppliedHash identifies the last render that was applied: chart,
	// version, values and release name. A change runs the upgrade hooks.
	// +optional
	AppliedHash string `json:"appliedHash,omitempty"`

	// AppliedGeneration is the latest generation whose render is applied
	// (appliedHash). A new render with no new generation (values edited, a
	// new chart version or commit) clears it until applied, unless it
	// changes no object and runs no hook; so does a repointed kubeConfig.
	// If it is the generation, the add-on runs what its spec asks for,
	// even while a gate holds a drift repair; dependents go once Healthy.
	// +optional
	AppliedGeneration int64 `json:"appliedGeneration,omitempty"`

	// AppliedAsUpgrade is true when the last apply rendered the chart for an
	// upgrade (.Release.IsUpgrade); a resync with nothing new renders it the
	// same way, so it changes nothing.
	// +optional
	AppliedAsUpgrade bool `json:"appliedAsUpgrade,omitempty"`

	// LastSyncRequest is the spec.syncRequest that was last handled.
	// +optional
	LastSyncRequest int64 `json:"lastSyncRequest,omitempty"`

	// LastApprovedPlan is the spec.approvedPlan that came with the sync
	// request last handled. An approval is used up with its request: a
	// later request that finds it still in spec.approvedPlan approves
	// nothing by it, unless it names the current plan.
	// +optional
	LastApprovedPlan string `json:"lastApprovedPlan,omitempty"`

	// LastHandledRefresh is the value of the capstan.dev/refresh annotation
	// that a reconcile last handled: it read the source again then.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	LastHandledRefresh string `json:"lastHandledRefresh,omitempty"`

	// SyncInProgress is a sync a person asked for (a raised
	// spec.syncRequest, with the plan spec.approvedPlan names, or with
	// manualSync) that began to change the add-on's objects and has not
	// finished: recorded before anything of it is applied, cleared once its
	// apply is recorded. A sync stopped half-way (an apply error, a
	// controller stopped, a failure after the pre hooks ran) goes on from
	// it without another approval while the generation, the render and
	// spec.syncRequest are the same: its plan is no longer the one approved
	// only because part of it ran.
	// +optional
	SyncInProgress *SyncInProgress `json:"syncInProgress,omitempty"`

	// Hook is the Helm hook that runs now, if any.
	// +optional
	Hook *HookProgress `json:"hook,omitempty"`

	// Wave is the sync wave that waits now, if any: the objects of the
	// waves before it are not all Current yet (capstan.dev/sync-wave).
	// +optional
	Wave *WaveProgress `json:"wave,omitempty"`

	// PendingHook is a post-install or post-upgrade event whose hooks failed
	// after the objects were applied. The next sync of the same render runs
	// that event's hooks again, and nothing before them.
	// +optional
	PendingHook *PendingHook `json:"pendingHook,omitempty"`

	// LastAppliedTime is when the add-on was last applied.
	// +optional
	LastAppliedTime *metav1.Time `json:"lastAppliedTime,omitempty"`

	// FirstHealthyTime is when every object of the last apply was first
	// found Current: the wait after that apply is over, and an object that
	// stops being Current later makes the add-on Degraded, not Failed. An
	// apply clears it.
	// +optional
	FirstHealthyTime *metav1.Time `json:"firstHealthyTime,omitempty"`

	// WarningSince is when the add-on went into a phase that needs a look
	// (Failed, Blocked or Degraded) and has not been Synced since, through
	// the phases on the way (Progressing, OutOfSync, Paused): an incident
	// receiver closes the incident it opened once the add-on is Synced,
	// whichever controller opened it. Synced clears it, once the incident
	// receivers that take the close have it.
	// +optional
	WarningSince *metav1.Time `json:"warningSince,omitempty"`

	// PreHooksDone is the pre event (pre-install or pre-upgrade) whose
	// hooks succeeded for a render whose apply is not recorded yet: a sync
	// of that render stopped half-way (the controller killed) does not run
	// them again. An uninstall records pre-delete here once its pre-delete
	// stage is over, and post-delete once its post-delete hooks succeeded;
	// a sync records post-install or post-upgrade here, with the run, once
	// their hooks succeeded, until their hook-succeeded objects are
	// deleted. A run of a pre-install or pre-upgrade event records here,
	// with its run, as each hook starts, the hook-succeeded objects of the
	// hooks so far, which are deleted when another run or the uninstall
	// starts instead of going on from it.
	// +optional
	PreHooksDone *PendingHook `json:"preHooksDone,omitempty"`

	// SyncFailHooks is the render whose apply failed and whose SyncFail
	// hooks (a git folder's, as Argo CD marks them) ran for it: a retry of
	// that render that fails again runs them no more. An apply that
	// succeeds clears it.
	// +optional
	SyncFailHooks *PendingHook `json:"syncFailHooks,omitempty"`

	// LastTest is the last run of the chart's test hooks: after an apply
	// with spec.test.enable, or asked for by the capstan.dev/test
	// annotation.
	// +optional
	LastTest *TestRun `json:"lastTest,omitempty"`

	// Registration is the manifest the add-on's primary serves, once it is
	// Ready; the Registered condition says why there is none.
	// +optional
	Registration *Registration `json:"registration,omitempty"`

	// History lists the renders that were applied, newest first: the
	// install, each upgrade and each change of values, at most
	// MaxHistory of them. Undoing drift applies the same render and adds
	// no revision.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	// +optional
	History []Revision `json:"history,omitempty"`
}

// MaxHistory is how many revisions status.history keeps.
const MaxHistory = 10

// Revision is one render that was applied.
type Revision struct {
	// Number counts the add-on's revisions from 1, as Helm's do.
	Number int64 `json:"number"`
	// AppliedAt is when its apply finished (before any post hooks ran).
	AppliedAt metav1.Time `json:"appliedAt"`
	// Generation is the Addon's generation it was applied for.
	Generation int64 `json:"generation,omitempty"`
	// Source and Version say what was rendered: the chart and its
	// version, or the git folder and its short commit.
	// +optional
	Source string `json:"source,omitempty"`
	// +optional
	Version string `json:"version,omitempty"`
	// AppliedHash identifies the render: chart, version, values and
	// release name (status.appliedHash while it is the newest).
	AppliedHash string `json:"appliedHash"`
	// PlanHash is the plan that was applied; with manualSync, the one a
	// person approved.
	// +optional
	PlanHash string `json:"planHash,omitempty"`
	// Changes counts what the plan created, updated and deleted, and its hooks.
	// +optional
	Changes PlanSummary `json:"changes,omitempty"`
}

// ObjectRef names one Kubernetes object.
type ObjectRef struct {
	// APIVersion is group/version, or version for the core group.
	APIVersion string `json:"apiVersion"`
	// Kind of the object.
	Kind string `json:"kind"`
	// Namespace, empty for cluster-scoped objects.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name of the object.
	Name string `json:"name"`
}

// Action is what a sync would do to one object.
// +kubebuilder:validation:Enum=Create;Update;Unchanged;Delete
type Action string

// The actions of a plan.
const (
	ActionCreate    Action = "Create"
	ActionUpdate    Action = "Update"
	ActionUnchanged Action = "Unchanged"
	ActionDelete    Action = "Delete"
)

// Plan is what a sync of the current spec would do. It is data, so the web
// page, the CLI and kubectl show the same plan.
type Plan struct {
	// Hash identifies the plan: an approval names it.
	Hash string `json:"hash"`

	// Generation is the Addon generation the plan was written for.
	Generation int64 `json:"generation"`

	// Source is what was rendered.
	Source PlanSource `json:"source"`

	// Workloads are the Deployments, StatefulSets, DaemonSets, Jobs and
	// Pods, with their images and ports.
	// +listType=atomic
	// +optional
	Workloads []Workload `json:"workloads,omitempty"`

	// Objects are the rendered objects a sync would create, update or
	// delete, each with its action and, for an update, its diff; adopted
	// objects and objects the API server refused in a dry run are listed
	// even when unchanged. The objects a sync would leave as they are are
	// only counted, in Summary.Unchanged: the inventory names every applied
	// object, and `capstan plan` lists them all.
	// +listType=atomic
	// +optional
	Objects []PlannedObject `json:"objects,omitempty"`

	// Hooks are the Helm hooks a sync would run.
	// +listType=atomic
	// +optional
	Hooks []PlannedHook `json:"hooks,omitempty"`

	// Violations are the guardrails the render breaks. Any violation blocks.
	// +listType=atomic
	// +optional
	Violations []Violation `json:"violations,omitempty"`

	// ValuesErrors are values that break the chart's schema or Capstan's
	// rules. Any values error blocks.
	// +listType=atomic
	// +optional
	ValuesErrors []ValuesError `json:"valuesErrors,omitempty"`

	// Notices are worth knowing and block nothing: a hook of an event Helm
	// does not know, which never runs, or an optional values source that is
	// missing.
	// +listType=atomic
	// +optional
	Notices []Notice `json:"notices,omitempty"`

	// Summary counts the objects by action.
	Summary PlanSummary `json:"summary"`

	// DiffsTruncated is true when diffs were left out of status to keep the
	// Addon small; `capstan plan` computes the full plan on demand.
	// +optional
	DiffsTruncated bool `json:"diffsTruncated,omitempty"`
}

// PlanSource is the exact source a plan was rendered from.
type PlanSource struct {
	// Chart is the chart's name.
	// +optional
	Chart string `json:"chart,omitempty"`
	// Version is the chart's resolved version.
	// +optional
	Version string `json:"version,omitempty"`
	// Digest is the chart archive's sha256 digest.
	// +optional
	Digest string `json:"digest,omitempty"`
	// URL is the repository, registry reference, archive or git repository.
	// +optional
	URL string `json:"url,omitempty"`
	// Commit is the git commit.
	// +optional
	Commit string `json:"commit,omitempty"`
	// Path is the git folder.
	// +optional
	Path string `json:"path,omitempty"`
}

// Workload is a rendered object that runs containers.
type Workload struct {
	// Kind of the workload.
	Kind string `json:"kind"`
	// Name of the workload.
	Name string `json:"name"`
	// Images of its containers, init containers included.
	// +listType=atomic
	// +optional
	Images []string `json:"images,omitempty"`
	// Ports its containers declare.
	// +listType=atomic
	// +optional
	Ports []WorkloadPort `json:"ports,omitempty"`
}

// WorkloadPort is a port a container declares.
type WorkloadPort struct {
	// Name of the port.
	// +optional
	Name string `json:"name,omitempty"`
	// Port number in the container.
	Port int32 `json:"port"`
	// Protocol, TCP by default.
	// +optional
	Protocol string `json:"protocol,omitempty"`
}

// PlannedObject is one object of a plan.
type PlannedObject struct {
	ObjectRef `json:",inline"`
	// Action is what a sync would do.
	Action Action `json:"action"`
	// Diff is the unified diff of an update. Secret data shows only which
	// keys change, never a value.
	// +optional
	Diff string `json:"diff,omitempty"`
	// DiffTruncated is true when status keeps only the start of the diff,
	// only a count of its changed lines (a diff too large to compute for
	// status), or none of it (diff is then empty), to keep the Addon small;
	// `capstan plan` computes it whole.
	// +optional
	DiffTruncated bool `json:"diffTruncated,omitempty"`
	// Adopted is true when the object runs already and the add-on has not
	// applied it before.
	// +optional
	Adopted bool `json:"adopted,omitempty"`
	// ManagedBy names another Addon, "namespace/name", that applied the
	// object and still holds it in its inventory. Two add-ons cannot manage
	// one object, so such an object blocks the plan even with spec.adopt.
	// +optional
	ManagedBy string `json:"managedBy,omitempty"`
	// Error is the API server's message when the object fails its dry run.
	// +optional
	Error string `json:"error,omitempty"`
	// Recreate is true when the API server refuses to change the object in
	// place, and the sync deletes it and creates it anew (spec.recreate).
	// +optional
	Recreate bool `json:"recreate,omitempty"`
	// Wave is the object's sync wave (capstan.dev/sync-wave), when not 0.
	// +optional
	Wave int32 `json:"wave,omitempty"`
}

// PlannedHook is a Helm hook a sync would run.
type PlannedHook struct {
	ObjectRef `json:",inline"`
	// Events are the hook's events, such as pre-install.
	// +listType=atomic
	Events []string `json:"events"`
	// Weight orders hooks, lowest first.
	// +optional
	Weight int `json:"weight,omitempty"`
	// DeletePolicies are the hook's delete policies.
	// +listType=atomic
	// +optional
	DeletePolicies []string `json:"deletePolicies,omitempty"`
}

// Violation is one guardrail a rendered object breaks.
type Violation struct {
	// Object is the object that breaks the rule.
	Object ObjectRef `json:"object"`
	// Path is the field, such as spec.template.spec.hostNetwork.
	// +optional
	Path string `json:"path,omitempty"`
	// Rule names the guardrail.
	Rule string `json:"rule"`
	// Message says what to change. It never holds a secret value.
	Message string `json:"message"`
}

// ValuesError is one value that breaks the chart's schema or Capstan's rules.
type ValuesError struct {
	// Path is the JSON path of the value, such as /persistence/size.
	Path string `json:"path"`
	// Rule is the schema keyword or Capstan rule that failed.
	Rule string `json:"rule"`
	// Message says what to change. It never holds the value.
	Message string `json:"message"`
}

// PlanSummary counts the objects of a plan by action.
type PlanSummary struct {
	Create    int `json:"create"`
	Update    int `json:"update"`
	Unchanged int `json:"unchanged"`
	Delete    int `json:"delete"`
	Hooks     int `json:"hooks"`
}

// Notice is a plan remark that blocks nothing.
type Notice struct {
	// Path is what the notice is about: a values path, or hooks/KIND/NAME.
	Path string `json:"path"`
	// Message says what happened and what to do. It never holds a value.
	Message string `json:"message"`
}

// TestPolicy says when the chart's test hooks run.
type TestPolicy struct {
	// Enable runs the tests after each apply of a new render (an install,
	// an upgrade, a change of values), once every object is Current. A
	// drift repair applies the same render and runs none.
	// +optional
	Enable bool `json:"enable,omitempty"`

	// IgnoreFailures keeps the add-on Synced when a test fails: the
	// failure shows in status.lastTest and in a warning event.
	// +optional
	IgnoreFailures bool `json:"ignoreFailures,omitempty"`

	// Filters choose the tests that run, by their objects' names, as
	// `helm test --filter` and Flux's HelmRelease do: a test a filter
	// excludes never runs, and when any filter includes, only the tests
	// included run. A filter that includes a name no test of the render
	// has fails the run, so that a typo does not pass by running nothing.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Filters []TestFilter `json:"filters,omitempty"`
}

// TestFilter includes one test, or leaves it out.
type TestFilter struct {
	// Name is the test hook's object's name (its metadata.name).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Exclude leaves the test out, rather than choosing it.
	// +optional
	Exclude bool `json:"exclude,omitempty"`
}

// The results of a test run.
const (
	TestSucceeded = "Succeeded"
	TestFailed    = "Failed"
	// TestNone is a run of a render with no test hooks.
	TestNone = "None"
)

// TestRun is one run of the chart's test hooks.
type TestRun struct {
	// AppliedHash is the render whose objects were tested.
	AppliedHash string `json:"appliedHash"`

	// Request is the capstan.dev/test annotation's value when the run
	// began, the request it answers, if any.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Request string `json:"request,omitempty"`

	// Result is Succeeded, Failed, or None when the render has no test
	// hooks.
	// +kubebuilder:validation:Enum=Succeeded;Failed;None
	Result string `json:"result"`

	// Message names the hooks that ran, or the one that failed and why.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	Message string `json:"message,omitempty"`

	// Filters identifies the spec.test.filters the run chose its tests
	// by, when there were any: a change of them runs the tests of a
	// render whose run failed again.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Filters string `json:"filters,omitempty"`

	// StartedAt and FinishedAt bound the run.
	StartedAt  metav1.Time `json:"startedAt"`
	FinishedAt metav1.Time `json:"finishedAt"`
}

// InventoryCluster names a cluster an add-on's inventory is in. Every
// field is empty for the controller's own cluster.
type InventoryCluster struct {
	// Identity names a remote cluster and the account Capstan acts there
	// as: a digest of the API server's URL, the name and certificate
	// authority its certificate is checked against, and the account, as
	// a plan's hash covers them. It holds no credential, so a rotated
	// token is the same cluster.
	// +optional
	Identity string `json:"identity,omitempty"`

	// Endpoint names the remote cluster alone: a digest of its API
	// server's URL, normalised, and the TLS server name its certificate
	// is checked against. It decides whether the inventory is in another
	// cluster than the one spec.kubeConfig names: another account, groups
	// or certificate authority in the kubeconfig is the same cluster.
	// A status written before Capstan recorded it has none, and its
	// server is compared instead.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// Server is that cluster's API server URL, for messages.
	// +optional
	Server string `json:"server,omitempty"`
}

// SyncInProgress is a person's sync that began to apply.
type SyncInProgress struct {
	// Plan is the plan hash that was approved and began to apply.
	// +optional
	Plan string `json:"plan,omitempty"`
	// SyncRequest is the spec.syncRequest the sync handles.
	SyncRequest int64 `json:"syncRequest"`
	// Generation is the Addon's generation the sync began at.
	Generation int64 `json:"generation"`
	// RenderHash is the render the sync applies (appliedHash once it is
	// recorded).
	RenderHash string `json:"renderHash"`
	// Changes are what the approved plan changes, each a short digest of
	// an object to create (its manifest), to update or adopt (what the
	// update changes), or to delete and create anew (its manifest, the
	// UID deleted, and the create it turns into); of an object to delete
	// (its UID); or of a hook to run. The sync goes on without another
	// approval only while what is left to do is among them.
	// +listType=atomic
	// +optional
	Changes []string `json:"changes,omitempty"`
	// Failed is set once the sync has failed for good (a hook that
	// failed, a wave that did not become Current, an object refused). A
	// retry of the same spec and render still goes on from it; a sync
	// that does not (the values were fixed) finds its request handled and
	// its approval used up, as if it had applied.
	// +optional
	Failed bool `json:"failed,omitempty"`
}

// PendingHook is a hook event and the render it stands for: a post event
// to run again (pendingHook), pre hooks that ran (preHooksDone), or
// SyncFail hooks that ran (syncFailHooks).
type PendingHook struct {
	// Event is the hook event, such as post-install.
	Event string `json:"event"`
	// Hash is the appliedHash of the render the event stands for. A
	// different render is another sync, with its own hooks.
	Hash string `json:"hash"`
	// Run, in preHooksDone, names the run whose hooks all succeeded, as
	// its objects carry it (capstan.dev/hook-run), while the objects its
	// hook-succeeded policies delete may still be there: the event was
	// recorded done before they were deleted, and a look that finds Run
	// set deletes what is left of them. In pendingHook, for post-delete,
	// it names the uninstall's run of that event, recorded as it began:
	// each retry renders anew, and goes on from this run whatever the
	// source renders by then.
	// +optional
	Run string `json:"run,omitempty"`
	// Objects, in preHooksDone, are the objects of hook-succeeded hooks
	// still to delete, each with the run it carries: those of Run, and
	// those an earlier run left when their delete failed. A look deletes
	// exactly these, whatever its own render holds, and drops each once
	// it is gone; one an object of another run replaced is not deleted.
	// In pendingHook, they are the objects of the hooks of the event's run
	// so far (recorded as each hook starts), and of those that succeeded
	// before a hook of the event failed: kept, since they show the retry,
	// which goes on from the same run, that those hooks need not run
	// again, and deleted once the event has succeeded, or moved to
	// preHooksDone when no run goes on from it.
	// +optional
	// +listType=atomic
	Objects []HookObject `json:"objects,omitempty"`
	// Failed, in pendingHook, is the hook at which the last run of the
	// event ended without succeeding (it failed, or could not be made or
	// read), with that run. Hooks run one at a time and a failure ends the
	// run, so every hook before it succeeded in that run: a retry that goes
	// on from it runs none of them again, even once their objects are gone
	// (a Job's ttlSecondsAfterFinished) or were never kept.
	// +optional
	Failed *HookObject `json:"failed,omitempty"`
}

// HookObject is the object of one hook, and the run that made it.
type HookObject struct {
	ObjectRef `json:",inline"`
	// Run is the run the object carries (capstan.dev/hook-run).
	Run string `json:"run"`
}

// HookProgress is the Helm hook that runs now.
type HookProgress struct {
	ObjectRef `json:",inline"`
	// Event is the hook event, such as pre-upgrade.
	Event string `json:"event"`
	// Since is when it started.
	Since metav1.Time `json:"since"`
	// Run names the run of the event's hooks it belongs to, as the hook's
	// object carries it (capstan.dev/hook-run). While a Job or Pod hook
	// runs, the controller holds no worker: each look reads the hook's
	// object, and the sync goes on once it has finished.
	// +optional
	Run string `json:"run,omitempty"`
	// Generation is the Addon's generation when the hook started. A look
	// that goes on from a run of the same generation is the sync that
	// began it; after a change to the Addon it is another sync.
	// +optional
	Generation int64 `json:"generation,omitempty"`
	// UID is the UID of the Job or Pod the run made for the hook, recorded
	// when a look leaves it running. A later look of the same run that
	// finds it gone, or another object in its place, fails the hook with
	// the reason Deleted: it may have done its work, and is not run again.
	// +optional
	UID types.UID `json:"uid,omitempty"`
}

// WaveProgress is the sync wave a sync waits to apply, or a prune or an
// uninstall waits to delete.
type WaveProgress struct {
	// Wave is the wave that waits.
	Wave int32 `json:"wave"`
	// Deleting is true when the wave waits to be deleted: a prune or an
	// uninstall goes in reverse waves, and this wave waits until what the
	// waves after it deleted is gone.
	// +optional
	Deleting bool `json:"deleting,omitempty"`
	// Waiting names the objects of the waves before it that are not
	// Current yet, and why, at the first look; or, when Deleting, the
	// objects of the waves after it that are not gone yet.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Waiting string `json:"waiting,omitempty"`
	// Since is when the wait started.
	Since metav1.Time `json:"since"`
}

// Addon is one piece of cluster software: a Helm chart or a git folder,
// rendered, previewed, gated and applied.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=capstan
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.status.source`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Healthy",type=string,JSONPath=`.status.conditions[?(@.type=="Healthy")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 53",message="metadata.name: an Addon's name is at most 53 characters, Helm's limit for a release name"
// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.dependsOn) || !self.spec.dependsOn.exists(d, d.name == self.metadata.name && (!has(d.namespace) || d.namespace.size() == 0))",message="spec.dependsOn names this Addon itself, which would wait for ever: remove it"
type Addon struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AddonSpec   `json:"spec,omitempty"`
	Status AddonStatus `json:"status,omitempty"`
}

// AddonList is a list of Addons.
//
// +kubebuilder:object:root=true
type AddonList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Addon `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Addon{}, &AddonList{})
}
