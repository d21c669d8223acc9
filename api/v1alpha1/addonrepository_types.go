package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AddonRepositorySpec is one gitops repository whose definition files the
// syncer turns into Addons in the AddonRepository's namespace.
type AddonRepositorySpec struct {
	// URL is the gitops repository: https://, http://, ssh://, file:// or
	// user@host:path. A user name may be in it (git@,
	// https://org@dev.azure.com/...), a password may not: it goes in the
	// Secret named by secretRef.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('http://') || self.startsWith('ssh://') || self.startsWith('file://') || self.matches('^[A-Za-z0-9._-]+@[^:]+:.+$') || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://[^/?#@]*:[^/?#]*@') || self.matches('^[^/?#@:]+:[^/?#@]*@')",message="spec.url must be https://, http://, ssh://, file:// or user@host:path"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[A-Za-z][A-Za-z0-9+.-]*://[^/?#@]*:[^/?#]*@') && !self.matches('^[^/?#@:]+:[^/?#@]*@')",message="spec.url must not carry a password (user:password@; the address is not shown here): everyone who may view AddonRepositories would read it, and every Addon the repository makes would copy it; put it in a Secret and name it in spec.secretRef",reason=FieldValueForbidden
	URL string `json:"url"`

	// Branch is the branch to follow. Empty means the remote's default branch.
	// +kubebuilder:validation:MaxLength=255
	// +optional
	Branch string `json:"branch,omitempty"`

	// Folder holds the definition files, one add-on per file. Default addons.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(s, s == '..')",message="spec.folder must be relative and must not contain '..'"
	// +optional
	Folder string `json:"folder,omitempty"`

	// Interval is how often the repository is read when no push webhook
	// arrives. Default 3m, at least 1s: each read is an ls-remote and a
	// status write.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="spec.interval must be at least 1s: each read of the repository is an ls-remote and a status write; a push webhook syncs at once"
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`

	// SecretRef names a Secret in this namespace with the credentials for the
	// repository: username and password or a token, an SSH key with
	// known_hosts, or a GitHub App. Addons with a folder of this repository
	// use the same Secret.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`

	// Suspend stops the syncer: while it is true, the repository is not
	// read, and no Addon is applied or deleted, so a change made in the
	// cluster during an incident stays. Its Addons may then be changed in
	// the cluster; setting it back to false syncs at once, and applies
	// git's version again.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// AllowEmpty lets a commit whose folder holds no definition delete
	// every Addon the repository manages. Without it such a commit is
	// refused, and nothing is changed: a README left alone in the folder,
	// a force-push to an old commit, files moved into subfolders or a
	// spec.branch or spec.folder that names the wrong place would
	// otherwise remove every add-on at once. Set it to remove them all
	// through git, as Argo CD's allowEmpty does.
	// +optional
	AllowEmpty bool `json:"allowEmpty,omitempty"`

	// Prune deletes the Addon of a file that left git. Default true. When
	// false, such an Addon stays in the cluster as it is, with its
	// managed-by-git label, and the syncer no longer changes it (Flux's
	// prune: false); status.retainedAddons counts them. Setting it back to
	// true deletes those whose file is still gone.
	// +kubebuilder:default=true
	// +optional
	Prune *bool `json:"prune,omitempty"`

	// WebhookSecretRef names a Secret in this namespace whose key "token" is
	// the push webhook's secret: GitHub's and Gitea's HMAC key, GitLab's token.
	// Without it, the webhook refuses every push.
	// +optional
	WebhookSecretRef *LocalObjectReference `json:"webhookSecretRef,omitempty"`
}

// InvalidFile is a definition file the syncer skipped. Its Addon, if any,
// stays as it was.
type InvalidFile struct {
	// Path is the file's path in the repository.
	Path string `json:"path"`
	// Line is the 1-based line of the first problem, when known.
	// +optional
	Line int32 `json:"line,omitempty"`
	// Message lists what is wrong, one "file:line: message" per line.
	Message string `json:"message"`
}

// AddonRepositoryStatus is what the syncer last read and did.
type AddonRepositoryStatus struct {
	// ObservedGeneration is the generation the status was written for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are Ready, Reconciling and Stalled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Branch is the branch that was read, the remote's default when
	// spec.branch is empty.
	// +optional
	Branch string `json:"branch,omitempty"`

	// LastSyncedCommit is the commit the Addons were last made to match.
	// +optional
	LastSyncedCommit string `json:"lastSyncedCommit,omitempty"`

	// LastSyncTime is when that sync finished.
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`

	// Addons counts the definitions that were applied at the last sync.
	// +optional
	Addons int32 `json:"addons"`

	// RetainedAddons counts the Addons the repository manages whose file
	// is gone from git and that spec.prune: false kept at the last sync.
	// They keep their managed-by-git label; remove it to take one over, or
	// delete it by hand.
	// +optional
	RetainedAddons int32 `json:"retainedAddons,omitempty"`

	// InvalidFileCount counts the invalid files, for kubectl's columns.
	// +optional
	InvalidFileCount int32 `json:"invalidFileCount"`

	// InvalidFiles are the files the last sync could not apply as written,
	// each with its error: skipped, or written to an Addon the API server
	// does not keep as the file says.
	// +listType=atomic
	// +optional
	InvalidFiles []InvalidFile `json:"invalidFiles,omitempty"`
}

// AddonRepository is one gitops repository that Addons are synced from: each
// file of its folder is one Addon, created, updated and deleted with it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=capstan
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.url`
// +kubebuilder:printcolumn:name="Branch",type=string,JSONPath=`.status.branch`
// +kubebuilder:printcolumn:name="Commit",type=string,JSONPath=`.status.lastSyncedCommit`
// +kubebuilder:printcolumn:name="Addons",type=integer,JSONPath=`.status.addons`
// +kubebuilder:printcolumn:name="Invalid",type=integer,JSONPath=`.status.invalidFileCount`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name: an AddonRepository's name is at most 63 characters, as it is the value of the capstan.dev/managed-by-git label"
type AddonRepository struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AddonRepositorySpec   `json:"spec,omitempty"`
	Status AddonRepositoryStatus `json:"status,omitempty"`
}

// AddonRepositoryList is a list of AddonRepositories.
//
// +kubebuilder:object:root=true
type AddonRepositoryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AddonRepository `json:"items"`
}

func init() {
	SchemeBuilder.Register(&AddonRepository{}, &AddonRepositoryList{})
}
