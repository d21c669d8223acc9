package controller

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/health"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/render"
	"capstan.dev/capstan/internal/sops"
	"capstan.dev/capstan/internal/source"
	"capstan.dev/capstan/internal/values"
)

// Lifecycle is which Helm hooks a sync runs.
type Lifecycle string

// The lifecycles of Helm's hook table, as Capstan runs it.
const (
	// LifecycleNone runs no hooks: adopting what already runs, or a resync
	// with nothing new.
	LifecycleNone Lifecycle = ""
	// LifecycleInstall is the first sync of a new add-on.
	LifecycleInstall Lifecycle = "install"
	// LifecycleUpgrade is a sync after the chart, version, values or release
	// name changed since the last apply.
	LifecycleUpgrade Lifecycle = "upgrade"
	// LifecycleDelete is an uninstall.
	LifecycleDelete Lifecycle = "delete"
	// LifecycleRetryPost runs again the post hooks that failed after the
	// same render was applied (status.pendingHook), and no pre hooks.
	LifecycleRetryPost Lifecycle = "retry-post"
)

// scope carries everything one reconcile has read and decided, from step
// to step.
type scope struct {
	addon *capstanv1.Addon
	// priorWave is the wave the stored status showed waiting when this
	// reconcile began: a wave that still waits keeps its start.
	priorWave *capstanv1.WaveProgress
	// retryStalled, when set, is how soon a reconcile that stalls looks
	// again, sooner than the resync: for a wait that nothing wakes.
	retryStalled time.Duration
	// stored is the status a checkpoint last wrote, when one did: the end
	// of the reconcile patches against it, not against the status read at
	// the start, so that what a checkpoint set and the sync then cleared
	// (a pending post hook, hook progress) is cleared in the API too.
	stored *capstanv1.AddonStatus
	// leftShard is set once the Addon is found to have left this controller's
	// shard: nothing more of this reconcile is written
	// (AddonReconciler.leftShard).
	leftShard bool
	// read is the status as the reconcile read it from the API server.
	read      *capstanv1.AddonStatus
	profile   capstanv1.Profile
	namespace string // where namespaced objects go
	applier   *apply.Applier
	// keepObserved writes status with the observedGeneration it had: the
	// look read only a running hook, not the Addon's change.
	keepObserved bool
	// cluster is where the objects go: this cluster, or spec.kubeConfig's.
	cluster *targetCluster
	// former is the status of the cluster the inventory is in, when
	// spec.kubeConfig names another one now (placeInventory): the status
	// fields of that cluster as read, until an apply takes over.
	former *capstanv1.AddonStatus

	artifact *source.Artifact
	values   *values.Result
	// variables are a git folder's, for ${name} (nil: none asked for);
	// decrypter decrypts its SOPS files as the render reads them, and
	// holds the values they held (step_decrypt.go). noInputs says either
	// was asked for and could not be read, which the plan shows, so
	// nothing is rendered.
	variables *values.Variables
	decrypter *sops.Decrypter
	noInputs  bool
	// maskedSecrets is how many secret values s.masker was made for.
	maskedSecrets int
	// masker hides the secret values of maskedValues, the values it was
	// made for (secret_mask.go).
	masker       *masker
	maskedValues *values.Result
	// masks are the reconciler's masks of recent reconciles; nil builds
	// each anew.
	masks    *maskCache
	platform values.Platform
	render   *render.Result
	// generatedNotices say which fields the chart generates at random and
	// how the sync treats them (keepGenerated).
	generatedNotices []capstanv1.Notice
	// signedBy is who signed the chart, when spec.chart.verify checked it.
	signedBy string
	// crdNotices say how many existing objects a CRD's new schema was
	// checked against (crdsafety.go).
	crdNotices []capstanv1.Notice
	// ignoreNotices name the fields spec.ignore left as they run (keepIgnored).
	ignoreNotices []capstanv1.Notice
	// watchGaps are the resources of the add-on that the cluster's watch
	// cache may not list or watch (watchedVersions, watchNotice).
	watchGaps []schema.GroupResource
	upgrade   bool // rendered for an upgrade

	// objects are the prepared objects to apply, Namespaces and CRDs included.
	objects      []*unstructured.Unstructured
	violations   []capstanv1.Violation
	valuesErrors []capstanv1.ValuesError
	previews     []plan.ObjectResult
	live         map[string]*unstructured.Unstructured // by ObjectRef.Key, as the preview read them
	quiet        map[string]bool                       // by ObjectRef.Key: unchanged by the watch cache, not read
	digests      map[string]string                     // by ObjectRef.Key: each object's manifestDigest
	changes      []string                              // what the plan changes (plan.Changes)
	prune        []capstanv1.ObjectRef
	kept         []apply.Spared        // what leaves the inventory running: an annotation keeps it (apply.KeptBy), or a folder holds it now as a hook or leaves it out (leftOut)
	released     []capstanv1.ObjectRef // what of a kind never deleted the render no longer has: it leaves the inventory running (apply.Released)
	confirm      []capstanv1.ObjectRef // what the prune deletes only once the plan is approved (Prune=confirm)
	pruneUIDs    map[string]types.UID  // by ObjectRef.Key: the UID of each object of prune as keptFromPrune read it
	sharedWith   map[string]string     // by ObjectRef.Key: the Addon ("namespace/name") that holds an object of a kind never deleted that this plan leaves as it is (markOtherAddons)
	notOurs      []apply.Spared        // what the prune leaves running and drops from the inventory: another Addon holds it, or it is not this add-on's (apply.NotOurs)
	claimsKept   []apply.Spared        // the StatefulSets the prune deletes whose claims would go with them (apply.DeletesClaims): the prune keeps the claims
	claimsGo     []apply.Spared        // the other objects the prune deletes that a claim names as its owner: the garbage collector deletes the claim with them (ownedClaims)
	hooks        []render.Hook
	left         []*unstructured.Unstructured // the prepared objects a folder's render leaves out (render.Result.Left)
	generated    []render.Generated           // the render's Generated, in the namespaces their objects were put in (prepare.Result.Generated)
	lifecycle    Lifecycle
	plan         *capstanv1.Plan
	verdict      plan.Verdict

	fullDiffs bool // keep whole diffs, for `capstan plan`
	readOnly  bool // write nothing, not even values objects, for `capstan plan`
	// err is the error the reconcile ended with, if any (result).
	err error
	// refresh is the capstan.dev/refresh request this reconcile takes up:
	// it reads the source again past the fetcher's caches (refreshRequest).
	refresh string
	// createNamespace is the namespace added for spec.createNamespace: it
	// is created when missing and never counts as adopted.
	createNamespace string
	stage           string // the step that runs, for failure reasons
	found           findings
	outcome         outcome
	requeueAfter    time.Duration
	// driftUndo are the objects whose drift this sync undoes, counted by
	// the drift pacer once the apply succeeded.
	driftUndo []capstanv1.ObjectRef
	deleted   bool // the Addon is gone; there is no status to write
	// checks are spec.healthChecks, compiled once by the gate for the
	// health step and for a held add-on's judgement.
	checks *health.Checks
	// bindingModes are the volumeBindingMode of the StorageClasses a
	// Pending claim named, or why it could not be read, read once in a
	// reconcile (claimWaitsForConsumer): the field cannot change.
	bindingModes map[string]classRead
	// continuing is continuesSync's answer, worked out at its first use
	// once the preview has the plan's changes; nil until then.
	continuing *bool
	// hooklessApply: this reconcile recorded an apply that ran no hooks,
	// and so has nothing a restart could run twice (holdApplyRecord).
	hooklessApply bool
	// changedObjects: this reconcile began to change the add-on's objects
	// under its profile (the inventory grown before the apply, an object
	// applied, a prune sent), so status.profile may record that profile
	// (recordedProfile).
	changedObjects bool
	// resumed: the status began from an apply record this process held
	// back (resumeApplyRecord), not from the Addon as stored; heldSince is
	// when that record was first held.
	resumed   bool
	heldSince time.Time
}

func (r *AddonReconciler) newScope(addon *capstanv1.Addon) *scope {
	s := &scope{addon: addon, read: addon.Status.DeepCopy(), profile: r.Config.Profile(addon), cluster: r.local, masks: &r.masks}
	s.applier = r.local.appliers[s.profile]
	s.namespace = addon.TargetNamespaceIn(s.profile)
	return s
}

// hasHooks reports whether the render has hooks of event ("" has none).
func (s *scope) hasHooks(event string) bool {
	return event != "" && len(hooks.Select(s.hooks, event)) > 0
}

// releaseName is the Helm release name: spec.releaseName or the Addon's
// name; a restricted add-on's is always its name.
func (s *scope) releaseName() string {
	return s.addon.ReleaseNameIn(s.profile)
}

// deletionPolicy is what deleting the Addon does: the uninstall annotation
// means Delete, then spec.deletionPolicy, then the default of the profile
// it was installed under or is placed in now, whichever does less
// (Addon.DeletionPolicyFor).
func (s *scope) deletionPolicy() capstanv1.DeletionPolicy {
	return s.addon.DeletionPolicyFor(s.profile)
}

// hookTimeout is spec.hookTimeout or the controller's default.
func (r *AddonReconciler) hookTimeout(s *scope) time.Duration {
	if t := s.addon.Spec.HookTimeout; t != nil && t.Duration > 0 {
		return t.Duration
	}
	return r.Config.HookTimeout
}

// requeueSoon asks for the next reconcile within d, keeping a sooner one.
func (s *scope) requeueSoon(d time.Duration) {
	if s.requeueAfter == 0 || d < s.requeueAfter {
		s.requeueAfter = d
	}
}
