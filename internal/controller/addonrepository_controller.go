package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/notify"
	fetch "capstan.dev/capstan/internal/source"
)

// DefaultInterval is how often a repository is read when no webhook
// arrives, and MinInterval the shortest interval a repository may ask.
const (
	DefaultInterval = 3 * time.Minute
	MinInterval     = time.Second
)

// Reasons of the AddonRepository conditions.
const (
	ReasonSynced       = "Synced"
	ReasonInvalidFiles = "InvalidFiles"
	ReasonUnreadable   = "RepositoryUnreadable"
	ReasonAuthFailed   = "AuthFailed"
	ReasonApplyFailed  = "ApplyFailed"
	ReasonSuspended    = "Suspended"
	// ReasonGitMemoryBusy: the clone of a new commit was refused at once
	// because other fetches held the controller's git memory budget; it
	// is read again shortly.
	ReasonGitMemoryBusy = "GitMemoryBusy"
	// ReasonEmptyRefused: the commit's folder holds no definition while the
	// repository manages Addons, and spec.allowEmpty is not set.
	ReasonEmptyRefused = "EmptyCommitRefused"
)

// The backoff of a repository whose reads fail: the interval, doubled at
// each failure in a row up to maxReadBackoff, and at least
// readBackoffHoldFactor times as long as the failed read held a worker,
// up to maxSlowReadBackoff.
const (
	maxReadBackoff        = 10 * time.Minute
	maxSlowReadBackoff    = time.Hour
	readBackoffHoldFactor = 10
)

// gitBusyRetry is how soon a repository whose clone the git memory budget
// refused is read again: the fetches that hold it end within seconds. A
// random part of as much again spreads the repositories refused at once.
const gitBusyRetry = 15 * time.Second

// statusConflictRetry is how soon a repository whose status write found
// it changed since it was read is synced again: a moment, for the cache
// to catch up.
const statusConflictRetry = time.Second

// +kubebuilder:rbac:groups=capstan.dev,resources=addonrepositories,verbs=get;list;watch
// +kubebuilder:rbac:groups=capstan.dev,resources=addonrepositories/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=capstan.dev,resources=addons,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// AddonRepositoryReconciler is the gitops syncer. It makes the Addons of each AddonRepository's namespace match
// the definition files at the head of its branch: on a change of the
// AddonRepository, on a push webhook (Trigger) and every spec.interval.
type AddonRepositoryReconciler struct {
	// Client reads and writes AddonRepositories and Addons.
	Client client.Client
	// APIReader reads Secrets without a cache; Client when nil.
	APIReader client.Reader
	// Auth turns a repository's credentials Secret into git auth; gitops.BasicAuth when nil.
	Auth gitops.AuthFunc
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Notifier posts the repository's transitions to webhooks; nil sends
	// none.
	Notifier *notify.Notifier
	// FetchTimeout bounds one read of a repository, its ls-remote and its
	// clone together, over any transport: an ssh server that sends a byte
	// a minute would otherwise hold a worker for good.
	// netguard.DefaultTimeout when zero.
	FetchTimeout time.Duration
	// GitBudget is the memory budget a clone takes its memory from; the
	// process's (--git-memory-budget) when nil.
	GitBudget *fetch.GitBudget
	// Selector is the shard's label selector (--watch-label-selector),
	// which the manager's cache of AddonRepositories is filtered by: Trigger
	// refuses a repository it does not select. Nil selects every one.
	Selector labels.Selector

	mu    sync.Mutex
	cache map[types.NamespacedName]cachedSnapshot
	// synced holds, per repository, the snapshot of the commit its status
	// names as its last synced one (recordSynced): what lastRead tells its
	// siblings of. cache may hold a newer commit, read by a sync that
	// still runs or that failed, which the status does not name yet.
	synced map[types.NamespacedName]cachedSnapshot
	// notified holds, per repository, the Ready status, reason and count
	// of invalid files last posted (notifyTransition), and its labels.
	notified map[types.NamespacedName]repoNotice
	triggers chan event.GenericEvent
	// creating serialises the look for and creation of one Addon's name
	// (applyOne): creatingLock picks its lock by a hash of the name.
	creating [creatingStripes]sync.Mutex
	// failures counts, per repository, the reads in a row that failed:
	// it spaces their retries (readBackoff). In memory only: a restart
	// reads every repository once at its interval again.
	failures map[types.NamespacedName]int
	// failingSince holds, per repository, when the first of the reads in
	// a row that failed began, and the generation it read: a passing
	// failure that lasts past transientStallAfter, over
	// transientStallReads reads, is Stalled. A new generation starts the
	// count again.
	failingSince map[types.NamespacedName]failingStart
	// unreported holds, per repository, the Addons its syncs deleted as
	// their files left git that no status write has named yet: a write
	// refused for a stale read (or failed) would otherwise lose the one
	// record of a deletion, which the next sync does not make again. In
	// memory only, and bounded (deletions).
	unreported map[types.NamespacedName]deletions
	// unkept holds, per Addon UID, a spec the syncer wrote and the API
	// server did not keep (unkeptSpec), so that it is not written again
	// at every interval. In memory only.
	unkept map[types.UID]unkeptSpec
}

// creatingStripes is how many locks creating has. A fixed set, so the
// syncer keeps no lock per name it ever created; two names that share a
// lock only wait for each other's look and apply.
const creatingStripes = 64

// creatingLock is the lock of the Addon key's name among creating.
func (r *AddonRepositoryReconciler) creatingLock(key types.NamespacedName) *sync.Mutex {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key.Namespace + "/" + key.Name))
	return &r.creating[h.Sum32()%creatingStripes]
}

// forgetRepository drops what the syncer holds of a repository its cache
// no longer has, and returns the close of the incident that the
// repository's failure opened, if it was deleted while failing.
// NOTE: the cache of a shard (--watch-label-selector) also loses a
// repository that was relabelled into another shard; that one still
// exists, and its incident is the new shard's to close when it is fixed:
// the new shard compares with the failing status it reads and posts
// nothing, so a close here would leave the failure without an incident.
// So the API server is asked whether it still exists before the close.
func (r *AddonRepositoryReconciler) forgetRepository(ctx context.Context, key types.NamespacedName) (*notify.Event, error) {
	r.mu.Lock()
	last, ok := r.notified[key]
	r.mu.Unlock()
	warned := ok && last.severity == notify.SeverityWarning
	if warned && r.APIReader != nil {
		switch err := r.APIReader.Get(ctx, key, &capstanv1.AddonRepository{}); {
		case err == nil:
			// It left the shard: no close.
			warned = false
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading AddonRepository %s, which this controller's cache no longer holds, to tell whether it was deleted: %w", key, err)
		}
	}
	r.mu.Lock()
	delete(r.cache, key)
	delete(r.synced, key)
	delete(r.failures, key)
	delete(r.failingSince, key)
	delete(r.notified, key)
	delete(r.unreported, key)
	r.mu.Unlock()
	if !warned {
		return nil, nil
	}
	// NOTE: an incident its failure opened is closed: nothing is left to
	// fix.
	return &notify.Event{Time: r.now().UTC(), Kind: "AddonRepository", Namespace: key.Namespace, Name: key.Name,
		Phase: notify.PhaseDeleted, Reason: notify.PhaseDeleted, Message: "The AddonRepository was deleted.", Severity: notify.SeverityInfo,
		PreviousSeverity: notify.SeverityWarning, Labels: last.labels, IncidentOnly: true}, nil
}

// repoNotice is what was posted last of a repository: its state, how
// that stood for the receivers, and its labels.
type repoNotice struct {
	state    string
	severity notify.Severity
	labels   map[string]string
}

// cachedSnapshot is the definitions of a repository, read at the commit,
// folder and URL that key names, or why they could not be read there (a
// folder the commit does not have): either stays true of that commit, so
// neither is cloned for again until the branch moves.
type cachedSnapshot struct {
	key  string
	snap *gitops.Snapshot
	err  error
}

// SetupWithManager registers the syncer: it watches AddonRepositories (their
// spec, not their status) and the triggers of the push webhook.
func (r *AddonRepositoryReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.init()
	return ctrl.NewControllerManagedBy(mgr).
		Named("gitops-syncer").
		// NOTE: a label change too: the repository's shard label is handed
		// to its Addons.
		For(&capstanv1.AddonRepository{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		WatchesRawSource(source.Channel(r.triggers, &handler.EnqueueRequestForObject{})).
		WithOptions(syncerOptions()).
		Complete(r)
}

// syncerOptions are the syncer's workers and its retries of a failed
// sync: two workers, and the Addon controller's backoff, capped at
// maxRetryDelay.
// NOTE: a failed sync drops its interval; with controller-runtime's
// default backoff, which grows to 16 minutes, a repository whose syncs
// failed for a few minutes (an API server outage) would then be read
// again only every quarter of an hour until a push webhook came.
func syncerOptions() controller.Options {
	return controller.Options{MaxConcurrentReconciles: 2, RateLimiter: newRetryLimiter()}
}

func (r *AddonRepositoryReconciler) init() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cache == nil {
		r.cache = map[types.NamespacedName]cachedSnapshot{}
	}
	if r.triggers == nil {
		r.triggers = make(chan event.GenericEvent, 256)
	}
}

// Trigger asks for a sync of one repository now. Triggers that arrive while
// the repository waits for its sync are coalesced into that one sync. A
// repository that does not exist, or that Selector does not select
// (*gitops.OtherShardError), is an error: the sync would find nothing in
// this syncer's cache and be dropped. One that cannot be read (the API
// server failed to answer) is queued anyway: the sync reads it again.
func (r *AddonRepositoryReconciler) Trigger(ctx context.Context, key types.NamespacedName) error {
	r.init()
	// NOTE: read past the cache, which holds only the shard's
	// repositories and may not have seen a new one yet; the selector
	// decides.
	repo := &capstanv1.AddonRepository{}
	switch err := r.reader().Get(ctx, key, repo); {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("there is no AddonRepository %s to sync", key)
	case err != nil:
		// NOTE: a failed read refuses nothing: an error here would leave
		// a push unsynced (a git host does not deliver it again) for a
		// moment's trouble of the API server. At worst the sync finds no
		// repository in the cache, as before the shard check was made.
		log.FromContext(ctx).Info("Cannot read an AddonRepository to tell its shard; queuing its sync", "addonRepository", key.String(), "error", err.Error())
	case r.Selector != nil && !r.Selector.Matches(labels.Set(repo.Labels)):
		return &gitops.OtherShardError{Key: key, Shard: repo.Labels[gitops.ShardLabel], Selector: r.Selector.String()}
	}
	obj := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	select {
	case r.triggers <- event.GenericEvent{Object: obj}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the syncer did not take the trigger for %s: %w", key, ctx.Err())
	}
}

func (r *AddonRepositoryReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile syncs one repository. It reads the head of the branch, applies
// every valid definition, deletes the Addons whose files are gone, and
// reports the rest in status. A repository that cannot be read changes nothing.
func (r *AddonRepositoryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.init()
	repo := &capstanv1.AddonRepository{}
	if err := r.Client.Get(ctx, req.NamespacedName, repo); err != nil {
		if apierrors.IsNotFound(err) {
			e, err := r.forgetRepository(ctx, req.NamespacedName)
			if e != nil && r.Notifier != nil {
				r.Notifier.Notify(*e)
			}
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, err
	}
	interval := syncInterval(repo)
	before := repo.DeepCopy()
	var res ctrl.Result
	var synced *gitops.Snapshot
	var syncErr error
	if repo.Spec.Suspend {
		// NOTE: no requeue: a suspended repository is not read, and the
		// spec change that resumes it is a new generation, which the
		// watch syncs at once.
		suspended(repo)
		r.forgetFailures(repo)
	} else {
		res, synced, syncErr = r.sync(ctx, repo)
	}
	// NOTE: the patch carries before's resourceVersion. A merge patch holds
	// only the fields that differ from before, which the cache read; when
	// the cache does not have this syncer's last status write yet (a sync
	// triggered again at once), a field the sync left as that write set it
	// would be left out and stay as the API server holds it: the invalid
	// files of the commit before, next to Ready for the new one. The
	// API server refuses such a patch, and the repository is synced again
	// once the cache has caught up.
	switch err := r.Client.Status().Patch(ctx, repo, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); {
	case err == nil:
		r.recordSynced(repo, synced)
		r.deletionsWritten(req.NamespacedName)
		r.notifyTransition(before, repo)
	case apierrors.IsConflict(err):
		r.deletionsNotWritten(req.NamespacedName)
		log.FromContext(ctx).Info("The AddonRepository changed since it was read; syncing it again", "addonRepository", req.String())
		if syncErr != nil {
			return ctrl.Result{}, syncErr // retried by the limiter; a delay beside an error is ignored
		}
		return ctrl.Result{RequeueAfter: statusConflictRetry}, nil
	case !apierrors.IsNotFound(err):
		r.deletionsNotWritten(req.NamespacedName)
		return ctrl.Result{}, errors.Join(syncErr, fmt.Errorf("cannot write the status of AddonRepository %s: %w", req.NamespacedName, err))
	}
	if syncErr != nil || repo.Spec.Suspend {
		return ctrl.Result{}, syncErr
	}
	if res.RequeueAfter == 0 {
		// NOTE: sync asks for longer only to back off a repository whose
		// reads fail.
		res.RequeueAfter = interval
	}
	return res, nil
}

// syncFolder is the folder of repo that the syncer reads.
func syncFolder(repo *capstanv1.AddonRepository) string {
	if repo.Spec.Folder == "" {
		return gitops.DefaultFolder
	}
	return repo.Spec.Folder
}

// snapshotKey is what a cached snapshot was read at: a commit, a folder
// and a URL.
func snapshotKey(commit, folder, url string) string {
	return commit + "\x00" + folder + "\x00" + url
}

// syncInterval is how often repo is read when nothing triggers it.
func syncInterval(repo *capstanv1.AddonRepository) time.Duration {
	if repo.Spec.Interval != nil && repo.Spec.Interval.Duration > 0 {
		// NOTE: an interval stored before the API refused short ones.
		return max(repo.Spec.Interval.Duration, MinInterval)
	}
	return DefaultInterval
}

// transientStallAfter is how long reads may fail in a row, each failure
// one that passes by itself (gitops.Transient), before the repository is
// Stalled all the same; transientStallReads is how many reads must have
// failed in a row by then, so that two blips an interval of an hour
// apart are not taken for a failure that lasts.
const (
	transientStallAfter = 10 * time.Minute
	transientStallReads = 3
)

// failingStart is when the first of a repository's reads in a row that
// failed began, and the generation of the AddonRepository it read.
type failingStart struct {
	at         time.Time
	generation int64
}

// Stall advice: what a person checks when reads have failed too long,
// by the step that failed.
const (
	readAdvice = "check spec.url (its host and port), the network path to the server (a proxy, a firewall, a NetworkPolicy) and the server"
	// credentialsAdvice is for the credentials step: reading the Secret
	// spec.secretRef names from the API server, or asking a GitHub App's
	// API for a token.
	credentialsAdvice = "check the credentials step: the API server's answers for the Secret spec.secretRef names, or, for a GitHub App, " +
		"its API endpoint and the network path to it (a proxy, a firewall, a NetworkPolicy)"
)

// readBackoff is how long to wait before reading a repository again after
// its failures-th failed read in a row, which held a worker for took: the
// interval, doubled at each failure up to maxReadBackoff (or the interval
// when that is longer), and at least readBackoffHoldFactor times took up
// to maxSlowReadBackoff. The syncer has two workers, and a read may take
// the whole fetch timeout: without it, a few repositories on a server
// that hangs, read at their own interval, would hold both, and every
// other repository would wait.
func readBackoff(interval time.Duration, failures int, took time.Duration) time.Duration {
	wait := doubling(interval, failures-1, max(maxReadBackoff, interval))
	return max(wait, min(readBackoffHoldFactor*took, maxSlowReadBackoff))
}

// readFailed records one more failed read of repo, which began at start,
// says so in its Ready condition, and returns when to read it again.
// advice says what to check once the failure is Stalled.
// transient says the failure passes by itself (gitops.Transient): the
// repository is then not Stalled, as the backoff retries it without
// anyone, and health tooling that reads Stalled as failed must not alarm
// on a timeout or a 502. Until transientStallAfter: a failure that lasts
// (a typo'd port, egress a firewall drops, a proxy that answers 503 for
// good) needs a person, and kstatus reads a repository that is neither
// Ready nor Stalled as still in progress, so `kubectl wait` and health
// checks would wait for it for ever. Reads of an earlier generation do
// not count: a corrected spec.url starts again.
func (r *AddonRepositoryReconciler) readFailed(repo *capstanv1.AddonRepository, reason, message, advice string, start time.Time, transient bool) ctrl.Result {
	key := client.ObjectKeyFromObject(repo)
	r.mu.Lock()
	if r.failures == nil {
		r.failures = map[types.NamespacedName]int{}
	}
	if r.failingSince == nil {
		r.failingSince = map[types.NamespacedName]failingStart{}
	}
	first, ok := r.failingSince[key]
	if !ok || first.generation != repo.Generation {
		first = failingStart{at: start, generation: repo.Generation}
		r.failingSince[key] = first
		r.failures[key] = 0
	}
	r.failures[key]++
	n := r.failures[key]
	since := first.at
	r.mu.Unlock()
	interval := syncInterval(repo)
	now := r.now()
	wait := readBackoff(interval, n, now.Sub(start))
	if wait > interval {
		message += fmt.Sprintf("; read again in %s, as %d reads in a row failed (a push webhook or a change of the AddonRepository reads it at once)", wait, n)
	}
	if lasted := now.Sub(since); transient && lasted >= transientStallAfter && n >= transientStallReads {
		transient = false
		message += fmt.Sprintf("; Stalled, as %d reads in a row have failed over %s, longer than the %s a passing failure is waited for: %s; "+
			"reads go on, and the first that works ends this",
			n, lasted.Round(time.Second), transientStallAfter, advice)
	}
	if transient {
		conditions.Set(&repo.Status.Conditions, repo.Generation, conditions.Summary{Reason: reason, Message: message})
	} else {
		r.setCondition(repo, metav1.ConditionFalse, reason, message)
	}
	return ctrl.Result{RequeueAfter: wait}
}

// gitBusy says in repo's status that its clone was refused for the git
// memory budget that other fetches held, err, and returns when to read it
// again: shortly, at most at its interval.
//
// NOTE: nothing is wrong with the repository or its server, and the
// memory returns as soon as those fetches end (at a controller's start,
// every git-sourced Addon fetches at once): not a failed read, which
// would count towards its backoff of up to 10 minutes and mark it
// Stalled, and no warning to the receivers (notifyTransition).
func (r *AddonRepositoryReconciler) gitBusy(repo *capstanv1.AddonRepository, err error) ctrl.Result {
	wait := min(gitBusyRetry+rand.N(gitBusyRetry), syncInterval(repo))
	conditions.Set(&repo.Status.Conditions, repo.Generation, conditions.Summary{Reconciling: true, Reason: ReasonGitMemoryBusy,
		Message: fmt.Sprintf("%v; nothing was changed, and the repository is read again in %s", err, wait.Round(time.Second))})
	return ctrl.Result{RequeueAfter: wait}
}

// readSucceeded ends the backoff of repo: its next failure is retried at
// its interval again, and starts the stall clock again.
func (r *AddonRepositoryReconciler) readSucceeded(repo *capstanv1.AddonRepository) {
	r.forgetFailures(repo)
}

// forgetFailures drops the reads in a row that failed of repo: on a read
// that worked, on suspend, and when its credentials need a person, so
// that a failure after them is not counted as lasting since before.
func (r *AddonRepositoryReconciler) forgetFailures(repo *capstanv1.AddonRepository) {
	r.mu.Lock()
	delete(r.failures, client.ObjectKeyFromObject(repo))
	delete(r.failingSince, client.ObjectKeyFromObject(repo))
	r.mu.Unlock()
}

// suspended records in status that the syncer leaves repo alone: nothing
// is read, applied or deleted until spec.suspend is false again.
func suspended(repo *capstanv1.AddonRepository) {
	repo.Status.ObservedGeneration = repo.Generation
	msg := "Suspended: the repository is not read, and no Addon is applied or deleted; set spec.suspend to false to sync again, which applies git's version"
	if c := repo.Status.LastSyncedCommit; c != "" {
		msg += fmt.Sprintf(" (last synced commit %s)", gitops.ShortCommit(c))
	}
	conditions.Set(&repo.Status.Conditions, repo.Generation, conditions.Summary{Reason: ReasonSuspended, Message: msg})
}

// sync does the work of Reconcile and records the outcome in repo's status.
// It returns the snapshot it synced when the sync completed, which is then
// the one of status.lastSyncedCommit. Only a transient error of the API
// server is returned: an unreadable repository is a status, retried at the
// next interval.
func (r *AddonRepositoryReconciler) sync(ctx context.Context, repo *capstanv1.AddonRepository) (ctrl.Result, *gitops.Snapshot, error) {
	logger := log.FromContext(ctx)
	key := client.ObjectKeyFromObject(repo)
	repo.Status.ObservedGeneration = repo.Generation

	switch ep, err := transport.NewEndpoint(repo.Spec.URL); {
	case err != nil:
		r.setCondition(repo, metav1.ConditionFalse, ReasonUnreadable,
			"spec.url is not a git URL (https://host/path, ssh://host/path or user@host:path); nothing was changed")
		return ctrl.Result{}, nil, nil
	case fetch.HoldsCredentials(ep):
		// NOTE: every Addon the repository makes would copy the URL.
		r.setCondition(repo, metav1.ConditionFalse, ReasonAuthFailed,
			"spec.url must be a git URL without credentials: put them in a Secret and name it in spec.secretRef; nothing was changed")
		return ctrl.Result{}, nil, nil
	}
	timeout := r.FetchTimeout
	if timeout <= 0 {
		timeout = netguard.DefaultTimeout
	}
	start := r.now()
	// NOTE: the credentials count within the fetch's time: a GitHub App's
	// are a token that Auth asks the App's API for, which would otherwise
	// hold a worker as long as that API drips its answer.
	fetchCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	auth, err := r.auth(fetchCtx, repo)
	switch {
	case err != nil && errors.Is(fetchCtx.Err(), context.DeadlineExceeded):
		// NOTE: a server that did not answer, as a read that timed out:
		// backed off as that read is, not retried at every interval as
		// credentials a person must fix are.
		err = timedOut(fetchCtx, err, timeout)
		return r.readFailed(repo, ReasonUnreadable, err.Error()+"; nothing was changed", credentialsAdvice, start, true), nil, nil
	case err != nil && authTransient(err):
		// NOTE: the API server or a GitHub App's token endpoint did not
		// answer as it should, which passes by itself: backed off as a
		// failed read, not Stalled at once.
		return r.readFailed(repo, ReasonAuthFailed, err.Error()+"; nothing was changed", credentialsAdvice, start, true), nil, nil
	case err != nil:
		r.forgetFailures(repo)
		r.setCondition(repo, metav1.ConditionFalse, ReasonAuthFailed, err.Error())
		return ctrl.Result{}, nil, nil
	}
	remote := gitops.Repo{URL: repo.Spec.URL, Auth: auth, Budget: r.GitBudget}
	folder := syncFolder(repo)
	branch, head, err := remote.Head(fetchCtx, repo.Spec.Branch)
	if err != nil {
		transient := fetchCtx.Err() != nil || gitops.Transient(err)
		err = timedOut(fetchCtx, err, timeout)
		logger.Info("Cannot read the gitops repository; nothing changes", "error", err.Error())
		return r.readFailed(repo, ReasonUnreadable, err.Error()+"; nothing was changed", readAdvice, start, transient), nil, nil
	}
	repo.Status.Branch = branch

	sibs := &siblings{reader: r.reader(), repo: repo, branch: branch, lastRead: r.lastRead}
	r.mu.Lock()
	cached := r.cache[key]
	r.mu.Unlock()
	snap, err := cached.snap, cached.err
	cacheKey := func(commit string) string { return snapshotKey(commit, folder, repo.Spec.URL) }
	if cached.key != cacheKey(head.String()) {
		g, commit, release, cloneErr := remote.Clone(fetchCtx, branch)
		if errors.Is(cloneErr, fetch.ErrGitMemoryBusy) {
			return r.gitBusy(repo, cloneErr), nil, nil
		}
		if cloneErr != nil {
			transient := fetchCtx.Err() != nil || gitops.Transient(cloneErr)
			err = timedOut(fetchCtx, cloneErr, timeout)
			return r.readFailed(repo, ReasonUnreadable, err.Error()+"; nothing was changed", readAdvice, start, transient), nil, nil
		}
		var listErr error
		func() {
			// NOTE: the snapshot holds what it read, not the clone: the
			// clone's memory goes back to the git budget before the Addons
			// are applied, on every path.
			defer release()
			var others []string
			if others, listErr = sibs.folders(ctx); listErr == nil {
				snap, err = gitops.ReadSnapshot(g.Storer, commit, folder, others...)
			}
		}()
		if listErr != nil {
			r.setCondition(repo, metav1.ConditionFalse, ReasonApplyFailed, listErr.Error())
			return ctrl.Result{}, nil, listErr
		}
		// NOTE: the clone fetches the branch again, and may find a commit
		// pushed after the ls-remote: what it read is kept under its own
		// commit, so that a force-push back to the head read before is
		// read again.
		r.mu.Lock()
		r.cache[key] = cachedSnapshot{key: cacheKey(commit.Hash.String()), snap: snap, err: err}
		r.mu.Unlock()
	}
	// NOTE: the server answered: what follows costs no wait on it.
	r.readSucceeded(repo)
	if err != nil {
		r.setCondition(repo, metav1.ConditionFalse, ReasonUnreadable, err.Error()+"; nothing was changed")
		return ctrl.Result{}, nil, nil
	}

	prune := repo.Spec.Prune == nil || *repo.Spec.Prune
	defer func() {
		if sibs.stale {
			// NOTE: read again at the next sync, with the folders of the
			// siblings as they are now.
			r.mu.Lock()
			if r.cache[key].snap == snap {
				delete(r.cache, key)
			}
			r.mu.Unlock()
		}
	}()
	if len(snap.Claimed) == 0 && gitops.RefusesEmpty(repo.Spec) {
		owned, err := r.ownedAddons(ctx, repo)
		if err == nil {
			owned, err = notHandedOver(ctx, owned, snap, sibs)
		}
		if err != nil {
			r.setCondition(repo, metav1.ConditionFalse, ReasonApplyFailed, err.Error())
			return ctrl.Result{}, nil, err
		}
		owned = madeFromOwnFile(owned, folder)
		if n := managed(owned); refuseEmpty(len(snap.Claimed), repo.Spec, n) {
			logger.Info("Refusing a commit whose folder holds no definition; nothing changes", "commit", snap.Commit, "addons", n)
			r.setCondition(repo, metav1.ConditionFalse, ReasonEmptyRefused, emptyRefusedMessage(repo, snap, folder, n))
			return ctrl.Result{}, nil, nil
		}
	}

	out, err := r.apply(ctx, repo, snap, sibs, prune)
	deleted := r.deletionsToWrite(key, out.pruned, out.nested)
	invalid, applied := out.invalid, out.applied
	repo.Status.InvalidFiles = boundInvalidFiles(invalid)
	repo.Status.InvalidFileCount = int32(len(invalid))
	repo.Status.Addons = int32(applied)
	repo.Status.RetainedAddons = int32(out.retained)
	if err != nil {
		r.setCondition(repo, metav1.ConditionFalse, ReasonApplyFailed, err.Error()+deleted.note())
		return ctrl.Result{}, nil, err
	}
	repo.Status.LastSyncedCommit = snap.Commit
	now := metav1.NewTime(r.now())
	repo.Status.LastSyncTime = &now
	more := deleted.note()
	if out.retained > 0 {
		more += fmt.Sprintf("; %d Addons whose files left git are kept as they are, as spec.prune is false (they keep the %s label: remove it to take one over)",
			out.retained, gitops.ManagedByGitLabel)
	}
	more += undecidedNote(out.undecided)
	more += straysNote(repo, folder, out.strays)
	more += subfoldersNote(snap)
	if len(invalid) > 0 {
		r.setCondition(repo, metav1.ConditionTrue, ReasonInvalidFiles,
			fmt.Sprintf("Synced commit %s; %d invalid files could not be applied as written (status.invalidFiles says why; an Addon the API server would not keep as its file says was written, the others left as they were): fix them in git%s%s",
				gitops.ShortCommit(snap.Commit), len(invalid), listedInvalidFiles(len(invalid)), more))
	} else {
		r.setCondition(repo, metav1.ConditionTrue, ReasonSynced, fmt.Sprintf("Synced commit %s: %d Addons%s", gitops.ShortCommit(snap.Commit), applied, more))
	}
	return ctrl.Result{}, snap, nil
}

// refuseEmpty decides whether a commit is refused: its folder claims no
// add-on (claimed names), the syncer would prune, allowEmpty is not set,
// and the repository manages Addons (managed), which would all be deleted.
// Argo CD refuses to prune to nothing the same way unless allowEmpty is
// set: a folder emptied by mistake, a force-push to an old commit, or a
// spec.branch or spec.folder that names the wrong place must not
// uninstall every add-on of a tenant at once.
func refuseEmpty(claimed int, spec capstanv1.AddonRepositorySpec, managed int) bool {
	return claimed == 0 && gitops.RefusesEmpty(spec) && managed > 0
}

// notHandedOver keeps, of the Addons a repository manages, those that no
// sibling's folder defines at snap's commit: the others are handed over,
// not deleted, so a commit that moves a folder's last definitions to
// another repository's folder is no empty commit.
func notHandedOver(ctx context.Context, owned []capstanv1.Addon, snap *gitops.Snapshot, sibs *siblings) ([]capstanv1.Addon, error) {
	var kept []capstanv1.Addon
	for _, a := range owned {
		c, err := sibs.claimant(ctx, snap, a.Name)
		if err != nil {
			return nil, err
		}
		if c.to == "" && !c.unknown {
			kept = append(kept, a)
		}
	}
	return kept, nil
}

// madeFromFolder splits the Addons that carry a repository's label into
// those written from their own file of its folder, which a sync may
// delete, and the others (strays), which it neither deletes nor counts.
//
// NOTE: the label alone does not say the syncer made an Addon. One copied
// by hand under a new name (kubectl get addon grafana -o yaml, renamed to
// grafana-test, applied) keeps the label and the capstan.dev/git-file of
// the one it was copied from; no file of its name is in git, and pruning
// it would delete a person's Addon, and with the restricted default
// deletion policy, Delete, uninstall its software.
func madeFromFolder(owned []capstanv1.Addon, folder string) (made, strays []capstanv1.Addon) {
	for _, a := range owned {
		if gitops.MadeFrom(folder, a.Name, a.Annotations[gitops.GitFileAnnotation]) {
			made = append(made, a)
		} else {
			strays = append(strays, a)
		}
	}
	return made, strays
}

// madeFromOwnFile keeps, of the Addons that carry a repository's label,
// those an empty commit counts: the ones written from their own file of
// its folder, and the ones written from their own name's file in another
// folder.
//
// NOTE: a spec.folder changed to a folder with no definition (a typo, or
// docs/ that holds a README) makes every Addon of the old folder a stray
// of the new one; not counting them would take the change as a folder
// with nothing to refuse, and report it Synced, while a commit that
// empties the folder is refused. A file of its own name says the syncer
// wrote the Addon; a copy under a new name (grafana-test from
// addons/grafana.yaml) still does not count.
func madeFromOwnFile(owned []capstanv1.Addon, folder string) []capstanv1.Addon {
	made, strays := madeFromFolder(owned, folder)
	for _, a := range strays {
		if file := a.Annotations[gitops.GitFileAnnotation]; gitops.IsDefinitionFile(file) && gitops.NameFromFile(file) == a.Name {
			made = append(made, a)
		}
	}
	return made
}

// maxStraysNamed bounds the strays the Ready condition names.
const maxStraysNamed = 5

// straysNote says, for the Ready condition, which Addons carry the
// repository's label but were not written from their own file of its
// folder, and so were left as they are, and what to do.
func straysNote(repo *capstanv1.AddonRepository, folder string, strays []capstanv1.Addon) string {
	if len(strays) == 0 {
		return ""
	}
	var named []string
	for _, a := range strays[:min(len(strays), maxStraysNamed)] {
		file := a.Annotations[gitops.GitFileAnnotation]
		if file == "" {
			file = "no " + gitops.GitFileAnnotation + " annotation"
		}
		named = append(named, fmt.Sprintf("%s (%s)", a.Name, file))
	}
	if len(strays) > maxStraysNamed {
		named = append(named, fmt.Sprintf("and %d more", len(strays)-maxStraysNamed))
	}
	return fmt.Sprintf("; %d Addons carry the label %s=%s but were not written from their own file in folder %q, so they are neither deleted nor changed: %s "+
		"(an Addon copied under a new name keeps the label and %s of the one it was copied from): remove the label to keep one (kubectl -n %s label addon NAME %s-), or delete it",
		len(strays), gitops.ManagedByGitLabel, repo.Name, folder, strings.Join(named, ", "), gitops.GitFileAnnotation, repo.Namespace, gitops.ManagedByGitLabel)
}

// managed counts the Addons that a sync could still delete: those not
// being deleted already.
func managed(owned []capstanv1.Addon) int {
	n := 0
	for _, a := range owned {
		if a.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// emptyRefusedMessage says why a commit with no definition was refused,
// and what to do.
func emptyRefusedMessage(repo *capstanv1.AddonRepository, snap *gitops.Snapshot, folder string, n int) string {
	return fmt.Sprintf("Commit %s holds no definition in folder %q, and the repository manages %d Addons: the commit was refused, and nothing was deleted or changed. "+
		"Check spec.branch and spec.folder, and that the branch was not reset to an old commit; to remove every Addon of the repository, "+
		"set spec.allowEmpty to true, or delete them by hand (kubectl -n %s delete addons -l %s=%s)%s",
		gitops.ShortCommit(snap.Commit), folder, n, repo.Namespace, gitops.ManagedByGitLabel, repo.Name, subfoldersNote(snap))
}

// maxPrunedNamed bounds the deleted Addons the Ready condition names.
const maxPrunedNamed = 5

// prunedPolicy says what deleting a, an Addon whose file left git, does
// to its software, for the Ready condition and the log: Delete
// (uninstalled) or Orphan (left running), as Addon.DeletionPolicyFor
// decides. The profile the Addon's controller places it in is that
// controller's to know: when it decides, and the Addon does not say, the
// note says the profile's default decides.
func prunedPolicy(a *capstanv1.Addon) string {
	switch {
	case a.Annotations[capstanv1.UninstallAnnotation] == "true":
		return string(capstanv1.DeletionDelete) + ", marked for uninstall"
	case a.Spec.DeletionPolicy != "":
		return string(a.Spec.DeletionPolicy)
	case a.Status.Profile == capstanv1.ProfileCluster:
		// NOTE: installed under the cluster profile, its deletion
		// follows that profile's default wherever it is placed now.
		return string(a.DeletionPolicyFor(capstanv1.ProfileCluster))
	}
	return "its profile's default deletion policy"
}

// prunedNote says, for the Ready condition of the sync that deleted them,
// which Addons it deleted as their files left git: the one place, with
// the log, that tells a person whose Addon vanished which repository and
// commit took it.
// total counts them all: pruned may hold only the first of them.
func prunedNote(pruned []string, total int) string {
	if total == 0 {
		return ""
	}
	named := pruned[:min(len(pruned), maxPrunedNamed)]
	more := ""
	if total > len(named) {
		more = fmt.Sprintf(" and %d more", total-len(named))
	}
	return fmt.Sprintf("; deleted %d Addons whose files left git, each with its deletion policy (Delete uninstalls, Orphan leaves the software running): %s%s", total, strings.Join(named, ", "), more)
}

// deletions are the Addons one or more syncs of a repository deleted as
// their files left git, as the Ready condition names them: the first
// maxPrunedNamed of each list, and how many in all, so that what is held
// of a repository whose status writes keep failing stays small.
type deletions struct {
	pruned      []string
	prunedCount int
	nested      []undecided
	nestedCount int
	// written says the status being written names them (sync set its
	// Ready condition from them).
	written bool
}

// add counts in the Addons of one more sync.
func (d *deletions) add(pruned []string, nested []undecided) {
	d.pruned = append(d.pruned, pruned[:min(len(pruned), maxPrunedNamed-len(d.pruned))]...)
	d.prunedCount += len(pruned)
	d.nested = append(d.nested, nested[:min(len(nested), maxPrunedNamed-len(d.nested))]...)
	d.nestedCount += len(nested)
}

// note is what the Ready condition says of them.
func (d deletions) note() string {
	return prunedNote(d.pruned, d.prunedCount) + nestedNote(d.nested, d.nestedCount)
}

// deletionsToWrite adds the Addons a sync of the repository key deleted
// to those no status write has named yet, and returns them all, for the
// Ready condition of the status that sync writes.
func (r *AddonRepositoryReconciler) deletionsToWrite(key types.NamespacedName, pruned []string, nested []undecided) deletions {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unreported == nil {
		r.unreported = map[types.NamespacedName]deletions{}
	}
	d := r.unreported[key]
	d.add(pruned, nested)
	d.written = true
	if d.prunedCount == 0 {
		delete(r.unreported, key)
		return d
	}
	r.unreported[key] = d
	return d
}

// deletionsWritten forgets the deletions of the repository key once a
// status that names them is written.
func (r *AddonRepositoryReconciler) deletionsWritten(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unreported[key].written {
		delete(r.unreported, key)
	}
}

// deletionsNotWritten keeps the deletions of the repository key for the
// next sync's status, as the write that named them failed.
func (r *AddonRepositoryReconciler) deletionsNotWritten(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d, ok := r.unreported[key]; ok {
		d.written = false
		r.unreported[key] = d
	}
}

// undecidedNote says, for the Ready condition, which Addons whose files
// left the folder are kept because another AddonRepository may define
// them and cannot be told of, and until when: the first five, grouped by
// what they wait for, and how many more.
// NOTE: a sibling whose reads keep failing keeps them for as long; without
// a word, the Addon of a file gone from git would stay with no status
// that says why.
func undecidedNote(kept []undecided) string {
	if len(kept) == 0 {
		return ""
	}
	var order []string
	byUntil := map[string][]string{}
	for _, u := range kept[:min(len(kept), maxPrunedNamed)] {
		if _, ok := byUntil[u.until]; !ok {
			order = append(order, u.until)
		}
		byUntil[u.until] = append(byUntil[u.until], u.name)
	}
	var parts []string
	for _, until := range order {
		parts = append(parts, fmt.Sprintf("%s until %s", strings.Join(byUntil[until], ", "), until))
	}
	more := ""
	if len(kept) > maxPrunedNamed {
		more = fmt.Sprintf("; and %d more", len(kept)-maxPrunedNamed)
	}
	return fmt.Sprintf("; %d Addons whose files left the folder are kept as they are, as another AddonRepository may define them and cannot be told of yet: %s%s",
		len(kept), strings.Join(parts, "; "), more)
}

// nestedNote says, for the Ready condition, which of the Addons deleted
// had a file of their name in a subfolder of the folder, which is not
// read: the first five, with their files, and how many more. A file moved
// down by mistake (a folder reorganised a team at a time) is then found
// from the status, not only from the log.
// total counts them all: deleted may hold only the first of them.
func nestedNote(deleted []undecided, total int) string {
	if total == 0 {
		return ""
	}
	var named []string
	for _, u := range deleted[:min(len(deleted), maxPrunedNamed)] {
		named = append(named, fmt.Sprintf("%s (%s)", u.name, u.until))
	}
	if total > len(named) {
		named = append(named, fmt.Sprintf("and %d more", total-len(named)))
	}
	return fmt.Sprintf("; of those, %d have a file of their name in a subfolder, which is not read: %s: to have such an add-on again, "+
		"move its file back up into the folder, or point spec.folder (or another AddonRepository) at its subfolder", total, strings.Join(named, ", "))
}

// subfoldersNote warns, for the Ready condition, of definition files in
// subfolders of a folder that holds none: the syncer reads the folder
// alone.
func subfoldersNote(snap *gitops.Snapshot) string {
	if len(snap.Subfolders) == 0 {
		return ""
	}
	return fmt.Sprintf("; the folder holds no definition, but its subfolders %s do, which are not read: move the files up into the folder, or point spec.folder at one of them",
		strings.Join(snap.Subfolders, ", "))
}

// What status.invalidFiles holds is bounded, so that the status patch
// stays well under the API server's request limit: a repository may hold
// thousands of invalid files, and the parser keeps up to 20 problems of
// each (gitops.Parse), which would otherwise make a message the API server
// refuses, and every sync would fail without saying why.
const (
	// maxInvalidFilesListed bounds the files listed; invalidFileCount
	// still counts them all.
	maxInvalidFilesListed = 20
	// maxInvalidFileProblems bounds the problems, one a line, of one file.
	maxInvalidFileProblems = 10
	// maxInvalidFileMessage bounds one file's message in bytes.
	maxInvalidFileMessage = 4096
)

// boundInvalidFiles returns the invalid files as the status lists them: the
// first maxInvalidFilesListed, each with its first maxInvalidFileProblems
// problems and how many more it has, in at most maxInvalidFileMessage
// bytes.
func boundInvalidFiles(files []capstanv1.InvalidFile) []capstanv1.InvalidFile {
	if len(files) == 0 {
		return nil
	}
	out := make([]capstanv1.InvalidFile, 0, min(len(files), maxInvalidFilesListed))
	for _, f := range files[:min(len(files), maxInvalidFilesListed)] {
		lines, suffix, more := strings.Split(f.Message, "\n"), "", 0
		if n, ok := gitops.ProblemsLeftOut(f.Path, lines[len(lines)-1]); ok {
			lines, more = lines[:len(lines)-1], n
		}
		if len(lines) > maxInvalidFileProblems {
			more += len(lines) - maxInvalidFileProblems
			lines = lines[:maxInvalidFileProblems]
		}
		if more > 0 {
			if suffix = fmt.Sprintf("\n%s: and %d more problems", f.Path, more); len(suffix) > maxInvalidFileMessage/2 {
				suffix = fmt.Sprintf("\nand %d more problems", more)
			}
		}
		// NOTE: the count of the problems left out is kept whole, as what
		// tells how much is wrong.
		f.Message = conditions.Truncate(strings.Join(lines, "\n"), maxInvalidFileMessage-len(suffix)) + suffix
		out = append(out, f)
	}
	return out
}

// listedInvalidFiles says, for the Ready condition, which of n invalid files
// status.invalidFiles lists when it cannot list them all.
func listedInvalidFiles(n int) string {
	if n <= maxInvalidFilesListed {
		return ""
	}
	return fmt.Sprintf(" (status.invalidFiles lists the first %d)", maxInvalidFilesListed)
}

// timedOut says so of an error that came as the fetch's time ran out.
func timedOut(ctx context.Context, err error, timeout time.Duration) error {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: the server did not answer within %s (--fetch-timeout)", err, timeout)
}

// notifyTransition hands the notifier a change of the repository's Ready
// condition, once its status is written: a repository that cannot be read,
// or whose files are skipped as invalid, changes nothing in the cluster,
// and would otherwise go unseen as git moves on. A repository synced with
// invalid files is a warning, and so is one more or fewer of them.
func (r *AddonRepositoryReconciler) notifyTransition(before, repo *capstanv1.AddonRepository) {
	if r.Notifier == nil {
		return
	}
	if e := r.transition(before, repo); e != nil {
		r.Notifier.Notify(*e)
	}
}

// transition is the event notifyTransition posts for the repository's
// status before and after one sync, or nil when there is none, and
// records what it stands for as posted.
func (r *AddonRepositoryReconciler) transition(before, repo *capstanv1.AddonRepository) *notify.Event {
	state := func(st *capstanv1.AddonRepositoryStatus) string {
		c := apimeta.FindStatusCondition(st.Conditions, capstanv1.ConditionReady)
		if c == nil {
			return ""
		}
		return fmt.Sprintf("%s/%s/%d", c.Status, c.Reason, st.InvalidFileCount)
	}
	key := client.ObjectKeyFromObject(repo)
	now := apimeta.FindStatusCondition(repo.Status.Conditions, capstanv1.ConditionReady)
	then := apimeta.FindStatusCondition(before.Status.Conditions, capstanv1.ConditionReady)
	busyBefore := then != nil && then.Reason == ReasonGitMemoryBusy
	if now != nil && now.Reason == ReasonGitMemoryBusy {
		// NOTE: a wait of seconds (gitBusy), not a transition: the next
		// read's outcome is compared with what was posted before it.
		// When this process posted nothing of the repository yet (after
		// a restart, or a new one), that is the status that stood before
		// the wait, recorded as posted here: compared with the wait's
		// own status, a warning, the next read that syncs would post
		// "Synced" to every receiver, and a close of an incident never
		// opened.
		r.mu.Lock()
		if _, ok := r.notified[key]; !ok && !busyBefore {
			if r.notified == nil {
				r.notified = map[types.NamespacedName]repoNotice{}
			}
			r.notified[key] = repoNotice{state: state(&before.Status), severity: repoSeverity(then), labels: maps.Clone(repo.Labels)}
		}
		r.mu.Unlock()
		return nil
	}
	r.mu.Lock()
	// NOTE: what this process posted last, before the cached repository: a
	// retry that comes before the cache has the status just written
	// would otherwise post the same transition again.
	last, ok := r.notified[key]
	was, wasSeverity := last.state, last.severity
	if !ok {
		was, wasSeverity = state(&before.Status), repoSeverity(then)
		if busyBefore {
			// NOTE: a wait written by a process before this one tells
			// nothing of what stood before it: the repository is taken
			// as one with no status yet, as a new one is, so that its
			// next read closes no incident it did not see open.
			was, wasSeverity = "", ""
		}
	}
	is := state(&repo.Status)
	notice := repoNotice{state: is, severity: repoSeverity(now), labels: maps.Clone(repo.Labels)}
	if r.notified == nil {
		r.notified = map[types.NamespacedName]repoNotice{}
	}
	if now == nil || was == is {
		if now != nil {
			// NOTE: remembered though nothing is posted, with the labels
			// as they are now: a failing repository deleted after a
			// restart still closes the incident its failure opened.
			r.notified[key] = notice
		}
		r.mu.Unlock()
		return nil
	}
	r.notified[key] = notice
	r.mu.Unlock()
	e := notify.Event{Time: r.now().UTC(), Kind: "AddonRepository", Namespace: repo.Namespace, Name: repo.Name,
		Phase: "Synced", Reason: now.Reason, Message: conditions.Truncate(now.Message, 4000), Severity: notice.severity,
		PreviousSeverity: wasSeverity, Source: netguard.Redact(repo.Spec.URL), Labels: maps.Clone(repo.Labels)}
	switch {
	case now.Reason == ReasonSuspended:
		e.Phase = ReasonSuspended
	case now.Status != metav1.ConditionTrue:
		e.Phase = "Failed"
	}
	if c := repo.Status.LastSyncedCommit; c != "" {
		e.Version = gitops.ShortCommit(c)
	}
	return &e
}

// repoSeverity is how a repository's Ready condition stands for the
// receivers: a warning when it failed or skipped invalid files, "" when
// there is none yet.
func repoSeverity(ready *metav1.Condition) notify.Severity {
	switch {
	case ready == nil:
		return ""
	case ready.Reason == ReasonSuspended:
		return notify.SeverityInfo
	case ready.Status != metav1.ConditionTrue || ready.Reason == ReasonInvalidFiles:
		return notify.SeverityWarning
	}
	return notify.SeverityInfo
}

// setCondition sets Ready, and Stalled when the repository cannot be used
// until someone changes something (credentials, URL, branch, folder, an
// empty commit); a read that failed for a moment is not (readFailed).
func (r *AddonRepositoryReconciler) setCondition(repo *capstanv1.AddonRepository, ready metav1.ConditionStatus, reason, message string) {
	conditions.Set(&repo.Status.Conditions, repo.Generation, conditions.Summary{
		Ready:   ready == metav1.ConditionTrue,
		Stalled: reason == ReasonAuthFailed || reason == ReasonUnreadable || reason == ReasonEmptyRefused,
		Reason:  reason, Message: message,
	})
}

// authTransient reports whether err, of the credentials step, passes by
// itself: the API server that holds the Secret did not answer as it
// should (a timeout, too many requests, a 500 or 503), or the network or
// server did (gitops.Transient, a GitHub App's token request refused, say).
// A Secret that is not there or may not be read, and credentials that
// are wrong, are a person's to fix.
func authTransient(err error) bool {
	return apply.ServerBusy(err) || gitops.Transient(err)
}

func (r *AddonRepositoryReconciler) auth(ctx context.Context, repo *capstanv1.AddonRepository) (transport.AuthMethod, error) {
	if repo.Spec.SecretRef == nil {
		if r.Auth != nil {
			// NOTE: Auth is called without a Secret too, so a guarded
			// gitops.AuthFunc (source's) routes even anonymous fetches through the
			// fetch guard.
			return r.Auth(ctx, repo.Spec.URL, nil)
		}
		return nil, nil
	}
	reader := r.reader()
	secret := &corev1.Secret{}
	key := types.NamespacedName{Namespace: repo.Namespace, Name: repo.Spec.SecretRef.Name}
	if err := reader.Get(ctx, key, secret); err != nil {
		return nil, fmt.Errorf("cannot read the credentials Secret %s named by spec.secretRef: %w", key, err)
	}
	auth := r.Auth
	if auth == nil {
		auth = gitops.BasicAuth
	}
	return auth(ctx, repo.Spec.URL, secret)
}

// applyOutcome is what apply made of a snapshot.
type applyOutcome struct {
	// invalid are the invalid files, with the files that the API server
	// refused or that name another's Addon.
	invalid []capstanv1.InvalidFile
	// applied counts the Addons that match their definitions.
	applied int
	// retained counts the Addons whose file is gone, kept as prune is not
	// set.
	retained int
	// strays are the Addons with the repository's label that no file of
	// its folder made (madeFromFolder), which apply left as they are.
	strays []capstanv1.Addon
	// pruned names the Addons deleted as their files left git.
	pruned []string
	// undecided are the Addons whose files left the folder, kept as a
	// sibling that may define them cannot be told of.
	undecided []undecided
	// nested are the Addons deleted (of pruned) while a subfolder, which
	// is not read, holds a file of their name, each with that file (in
	// until).
	nested []undecided
}

// undecided is an Addon whose file left the folder, kept until what
// until says.
type undecided struct{ name, until string }

// apply makes the Addons match a snapshot, and deletes those whose file is
// gone when prune is set, and says what it did.
func (r *AddonRepositoryReconciler) apply(ctx context.Context, repo *capstanv1.AddonRepository, snap *gitops.Snapshot, sibs *siblings, prune bool) (out applyOutcome, err error) {
	out.invalid = append([]capstanv1.InvalidFile(nil), snap.Invalid...)
	var live capstanv1.AddonList
	if err := r.Client.List(ctx, &live, client.InNamespace(repo.Namespace)); err != nil {
		return out, fmt.Errorf("cannot list the Addons of namespace %s: %w", repo.Namespace, err)
	}
	byName := map[string]*capstanv1.Addon{}
	for i := range live.Items {
		byName[live.Items[i].Name] = &live.Items[i]
	}
	var errs []error
	for _, p := range snap.Definitions {
		want, err := p.Definition.Addon(gitops.Origin{
			Namespace: repo.Namespace, Repository: repo.Name, URL: repo.Spec.URL,
			Commit: snap.Commit, File: p.File, SecretRef: repo.Spec.SecretRef, Shard: repo.Labels[gitops.ShardLabel],
		})
		if err != nil {
			out.invalid = append(out.invalid, gitops.InvalidFile(p.File, err))
			continue
		}
		ok, bad, err := r.applyOne(ctx, repo, snap, sibs, p.File, want, byName[want.Name])
		switch {
		case ok:
			out.applied++
		case bad != "":
			out.invalid = append(out.invalid, capstanv1.InvalidFile{Path: p.File, Message: bad})
		case err != nil:
			errs = append(errs, err)
		}
	}
	// NOTE: the Addons whose files are gone are listed on the API server,
	// past the cache: a controller's cache holds only its shard's Addons,
	// and an Addon a person put in another shard by hand (it keeps that
	// label) is still the repository's, which alone can delete it. No
	// other syncer would: the shard's own does not hold the repository.
	owned, err := r.ownedAddons(ctx, repo)
	if err != nil {
		return out, errors.Join(append(errs, err)...)
	}
	folder := syncFolder(repo)
	for _, a := range owned {
		if snap.Claimed[a.Name] || snap.Kept[a.Name] || a.DeletionTimestamp != nil {
			continue
		}
		// NOTE: before prune decides: the file did not leave git, it moved
		// to another repository's folder, which the Addon goes to as it is.
		switch c, err := sibs.claimant(ctx, snap, a.Name); {
		case err != nil:
			errs = append(errs, err)
			continue
		case c.to != "":
			if err := r.handOver(ctx, repo, sibs, &a, c.to); err != nil {
				errs = append(errs, err)
			}
			continue
		case c.unknown:
			// NOTE: a sibling this commit was not read with, or one that
			// has not read its branch yet, may define it: kept, and a
			// later sync decides once that sibling can be told of.
			out.undecided = append(out.undecided, undecided{name: a.Name, until: c.until})
			continue
		}
		if !gitops.MadeFrom(folder, a.Name, a.Annotations[gitops.GitFileAnnotation]) {
			// NOTE: no file of the folder made it (madeFromFolder): a
			// copy a person made, reported and left alone.
			out.strays = append(out.strays, a)
			continue
		}
		if !prune {
			// NOTE: left as it is, label too, as Flux's prune: false
			// leaves its objects: a file that comes back takes it up
			// again, and prune: true deletes it.
			out.retained++
			continue
		}
		// NOTE: the Addon's deletion policy decides what happens to the
		// software; the cluster profile's default, Orphan, keeps it running.
		switch deleted, err := r.prune(ctx, repo, &a); {
		case err != nil:
			errs = append(errs, fmt.Errorf("cannot delete Addon %s/%s, whose file was deleted: %w", a.Namespace, a.Name, err))
		case deleted:
			policy := prunedPolicy(&a)
			out.pruned = append(out.pruned, fmt.Sprintf("%s (%s)", a.Name, policy))
			if f := snap.NestedFile(a.Name); f != "" {
				// NOTE: deleted all the same, and named with that file:
				// a file moved into addons/disabled/ turns its add-on
				// off, and one that only shares the name (a chart's
				// values, another repository's folder) must not keep
				// an Addon whose file was deleted for good.
				out.nested = append(out.nested, undecided{name: a.Name, until: f})
			}
			log.FromContext(ctx).Info("Deleted an Addon whose file left git", "addon", a.Name, "commit", snap.Commit,
				"file", a.Annotations[gitops.GitFileAnnotation], "deletionPolicy", policy,
				"uninstall", a.Annotations[capstanv1.UninstallAnnotation] == "true")
		}
	}
	sort.Slice(out.invalid, func(i, j int) bool { return out.invalid[i].Path < out.invalid[j].Path })
	return out, errors.Join(errs...)
}

// prune deletes a, an Addon of the repository whose file left git, as
// the list of the repository's Addons read it.
//
// NOTE: the delete carries the UID and the resourceVersion that list
// read: a person may move the Addon to another repository by hand
// (kubectl label … capstan.dev/managed-by-git=<new> --overwrite, as the
// docs say to) after the list, and this repository must not delete it
// then. A refused delete reads the Addon again, and deletes it only while
// it is the same Addon and still this repository's: its status and other
// writes change its resourceVersion too. deleted reports whether this
// sync deleted it.
func (r *AddonRepositoryReconciler) prune(ctx context.Context, repo *capstanv1.AddonRepository, a *capstanv1.Addon) (deleted bool, err error) {
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		err := r.Client.Delete(ctx, a, client.Preconditions{UID: &a.UID, ResourceVersion: &a.ResourceVersion})
		switch {
		case err == nil:
			deleted = true
			return nil
		case apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err):
			return err
		}
		live, readErr := r.liveAddon(ctx, a.Namespace, a.Name)
		switch {
		case readErr != nil:
			return readErr
		case live == nil || live.UID != a.UID || live.DeletionTimestamp != nil || live.Labels[gitops.ManagedByGitLabel] != repo.Name:
			// NOTE: gone, made anew, being deleted, or moved to another
			// repository: nothing of this sync's to delete.
			return nil
		}
		*a = *live
		return err
	})
	return deleted, err
}

// applyOne makes the Addon of one definition file match want: ok when it
// does, or the file's problem (bad), or an error to retry. have is the
// Addon as the cache holds it, or nil. An Addon of a sibling whose folder
// no longer defines it at snap's commit is taken over (takeOver).
func (r *AddonRepositoryReconciler) applyOne(ctx context.Context, repo *capstanv1.AddonRepository, snap *gitops.Snapshot, sibs *siblings, file string, want, have *capstanv1.Addon) (ok bool, bad string, err error) {
	if have == nil {
		// NOTE: two repositories of one namespace that define one add-on,
		// synced at once, would each find no Addon and apply it by force,
		// the second taking the first's; so a new Addon is looked for on
		// the API server, past the cache, and the look and the apply of
		// one name are made one at a time.
		lock := r.creatingLock(types.NamespacedName{Namespace: repo.Namespace, Name: want.Name})
		lock.Lock()
		defer lock.Unlock()
		if have, err = r.liveAddon(ctx, repo.Namespace, want.Name); err != nil {
			return false, "", fmt.Errorf("cannot read Addon %s/%s before creating it from %s: %w", repo.Namespace, want.Name, file, err)
		}
	}
	if have != nil {
		if owner := have.Labels[gitops.ManagedByGitLabel]; owner != repo.Name {
			took := false
			if owner != "" {
				if took, err = r.takeOver(ctx, repo, snap, sibs, have, owner); err != nil {
					return false, "", err
				}
			}
			if !took {
				return false, notOurs(file, have, owner), nil
			}
		}
		if sameMeta(have, want, func() bool { return r.ownsShard(ctx, have) }) {
			spec := intendedSpec(want, have)
			if sameSpec(&have.Spec, spec) {
				r.forgetUnkept(have.UID)
				return true, "", nil
			}
			if msg, ok := r.stillUnkept(have.UID, file, spec, &have.Spec); ok {
				return false, msg, nil
			}
		}
	}
	obj, err := gitops.ApplyObject(want)
	if err == nil {
		err = r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(gitops.FieldManager), client.ForceOwnership)
	}
	if err == nil {
		// NOTE: obj holds the Addon as the apply left it.
		bad, err = r.settleSpec(ctx, repo, file, want, obj)
	}
	switch {
	case err == nil && bad != "":
		return false, bad, nil
	case err == nil:
		return true, "", nil
	case refusesTheFile(err):
		return false, fmt.Sprintf("%s: the API server refused the Addon: %s", file, errMessage(err)), nil
	}
	return false, "", fmt.Errorf("cannot apply Addon %s/%s from %s: %w", repo.Namespace, want.Name, file, err)
}

// refusesTheFile reports whether the API server's answer to the write of
// one file's Addon is that file's problem, to report and skip, rather
// than an error to retry the sync for: the Addon is invalid or malformed,
// or an admission webhook or a ResourceQuota on Addons forbids it.
// NOTE: Forbidden too: a policy engine's webhook denial and an exceeded
// quota answer 403. Both refuse this Addon, not the repository; taken as
// an error, the sync of every other file would never be recorded as done
// (lastSyncedCommit), and it would be retried for nothing.
func refusesTheFile(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err)
}

// settleSpec makes the spec of the Addon that the apply left (applied)
// git's, whole: the file's spec with the fields people set in the cluster
// (withClusterSide) as they are.
//
// NOTE: a server-side apply removes a field the file no longer sets only
// when no other field manager owns it, force or not. A field set in the
// cluster by someone else (spec.suspend by `capstan addon suspend` while
// the repository was suspended, a key of spec.values or manualSync by
// kubectl edit) would stay for good, though the docs and the resume
// promise git's version, and every sync would apply again in vain. So a
// spec that still differs after the apply is replaced by an update that
// carries the resourceVersion the apply returned: git's spec plus the
// cluster-side fields as that very version holds them. A write in between
// (an approval) makes it a conflict, and the Addon is read again, so
// nothing written in the cluster that git does not own is lost. Flux
// instead rewrites the other managers' entries of managedFields before its
// apply; that edits the API server's bookkeeping by hand, and a write
// between the rewrite and the apply still stays.
//
// An update whose result still differs from git's spec is a difference the
// API server keeps making (unkeptSpec): it is logged once, remembered, and
// returned as the file's problem (bad).
func (r *AddonRepositoryReconciler) settleSpec(ctx context.Context, repo *capstanv1.AddonRepository, file string, want *capstanv1.Addon, applied *unstructured.Unstructured) (bad string, err error) {
	live := &capstanv1.Addon{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(applied.Object, live); err != nil {
		return "", fmt.Errorf("cannot read Addon %s/%s as the apply left it: %w", want.Namespace, want.Name, err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		bad = ""
		if live == nil || live.DeletionTimestamp != nil || live.Labels[gitops.ManagedByGitLabel] != repo.Name {
			// NOTE: gone, going, or handed to another repository since.
			return nil
		}
		spec := intendedSpec(want, live)
		if sameSpec(&live.Spec, spec) {
			r.forgetUnkept(live.UID)
			return nil
		}
		if msg, ok := r.stillUnkept(live.UID, file, spec, &live.Spec); ok {
			bad = msg
			return nil
		}
		// NOTE: a copy: the update decodes the API server's answer into
		// live, and must not write into spec.
		live.Spec = *spec.DeepCopy()
		// NOTE: no managedFields in the update: the API server keeps its
		// own, and drops the removed fields from every manager's.
		live.ManagedFields = nil
		err := r.Client.Update(ctx, live, client.FieldOwner(gitops.FieldManager))
		if apierrors.IsConflict(err) {
			var readErr error
			if live, readErr = r.liveAddon(ctx, want.Namespace, want.Name); readErr != nil {
				return readErr
			}
		}
		if err != nil {
			return fmt.Errorf("cannot remove from Addon %s/%s the spec fields that its file does not set: %w", want.Namespace, want.Name, err)
		}
		if !sameSpec(&live.Spec, spec) {
			fields := unkeptFields(spec, &live.Spec)
			bad = unkeptMessage(file, want, fields)
			r.rememberUnkept(live.UID, file, spec, &live.Spec, bad)
			log.FromContext(ctx).Info("The API server does not keep the spec the Addon's file sets; not writing it again until the file or the Addon changes",
				"addon", want.Namespace+"/"+want.Name, "file", file, "fields", strings.Join(fields, ","))
		}
		return nil
	})
	return bad, err
}

// withClusterSide copies onto spec, from live, the fields of an Addon that
// git manages which its definition file cannot hold, so they are set in the
// cluster only: an approval (spec.approvedPlan) and the sync request that
// goes with it (spec.syncRequest), which `capstan addon sync`, the API and
// the page write; and the fields the definition format has no key for
// (spec.allowUnsafeCRDChanges, spec.healthTimeout, spec.test,
// spec.kubeConfig, spec.registration), set with kubectl. The file holds
// every other field of the spec.
//
// NOTE: the parser refuses a key it does not know, so the file can neither
// set nor remove these; replacing them with the file's nothing would undo
// what docs/crds.md tells a person to patch (allowUnsafeCRDChanges), and
// would send an Addon with a kubeConfig to the management cluster.
// TestClusterSideCoversTheSpec fails when a field of AddonSpec is neither
// written from a definition nor kept here.
func withClusterSide(spec, live *capstanv1.AddonSpec) {
	spec.SyncRequest, spec.ApprovedPlan = live.SyncRequest, live.ApprovedPlan
	spec.AllowUnsafeCRDChanges = live.AllowUnsafeCRDChanges
	spec.HealthTimeout = live.HealthTimeout
	spec.Test = live.Test
	spec.KubeConfig = live.KubeConfig
	spec.Registration = live.Registration
}

// reader reads past the cache: APIReader, or Client when nil.
func (r *AddonRepositoryReconciler) reader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// ownedAddons lists, from the API server, the Addons of the repository's
// namespace that carry its managed-by-git label, whatever their shard.
func (r *AddonRepositoryReconciler) ownedAddons(ctx context.Context, repo *capstanv1.AddonRepository) ([]capstanv1.Addon, error) {
	reader := r.reader()
	var list capstanv1.AddonList
	if err := reader.List(ctx, &list, client.InNamespace(repo.Namespace), client.MatchingLabels{gitops.ManagedByGitLabel: repo.Name}); err != nil {
		return nil, fmt.Errorf("cannot list the Addons of namespace %s that the repository manages: %w", repo.Namespace, err)
	}
	return list.Items, nil
}

// liveAddon reads an Addon from the API server, or nil when there is none.
func (r *AddonRepositoryReconciler) liveAddon(ctx context.Context, namespace, name string) (*capstanv1.Addon, error) {
	reader := r.reader()
	var a capstanv1.Addon
	switch err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &a); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return &a, nil
}

func notOurs(file string, a *capstanv1.Addon, owner string) string {
	if owner == "" {
		return fmt.Sprintf("%s: an Addon %s/%s exists and is not managed by git: delete it, or label it %s=<this repository> to hand it over", file, a.Namespace, a.Name, gitops.ManagedByGitLabel)
	}
	return fmt.Sprintf("%s: the Addon %s/%s is managed by the AddonRepository %q: keep the add-on in one repository", file, a.Namespace, a.Name, owner)
}

func errMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}

// sameMeta reports whether a live Addon already has the label and
// annotations the syncer would apply; with a spec that matches
// (intendedSpec), a resync with no change writes nothing. ownsShard says
// whether the syncer set the live Addon's shard label, for the one case
// that needs it.
func sameMeta(have, want *capstanv1.Addon, ownsShard func() bool) bool {
	return have.Labels[gitops.ManagedByGitLabel] == want.Labels[gitops.ManagedByGitLabel] &&
		sameShard(have, want, ownsShard) &&
		have.Annotations[gitops.GitFileAnnotation] == want.Annotations[gitops.GitFileAnnotation] &&
		have.Annotations[gitops.GitCommitAnnotation] != ""
}

// intendedSpec is the spec the syncer makes the live Addon's: want's, with
// the fields that only the cluster holds (withClusterSide) as live has them.
func intendedSpec(want, live *capstanv1.Addon) *capstanv1.AddonSpec {
	spec := want.Spec.DeepCopy()
	withClusterSide(spec, &live.Spec)
	return spec
}

// sameSpec reports whether two specs are equal, their values compared as
// JSON.
func sameSpec(a, b *capstanv1.AddonSpec) bool {
	if !sameJSON(a.Values, b.Values) {
		return false
	}
	x, y := a.DeepCopy(), b.DeepCopy()
	x.Values, y.Values = nil, nil
	return equality.Semantic.DeepEqual(x, y)
}

// sameShard reports whether the live Addon is in the shard the repository
// puts it in: its label is the repository's, or, for a repository in no
// shard, one the syncer did not set (a person may put one Addon in a
// shard by hand, and the syncer's apply could not take that label away;
// a repository taken out of its shard takes its Addons out too).
func sameShard(have, want *capstanv1.Addon, ownsShard func() bool) bool {
	h, w := have.Labels[gitops.ShardLabel], want.Labels[gitops.ShardLabel]
	return h == w || w == "" && !ownsShard()
}

// ownsShard reports whether the syncer set the Addon's shard label, by its
// managed fields, which the cache does not keep: read from the API server
// when a holds none, only for an Addon in a shard whose repository is in
// none. Unknown on an error, which counts as the syncer's: an apply then
// settles it.
func (r *AddonRepositoryReconciler) ownsShard(ctx context.Context, a *capstanv1.Addon) bool {
	live := a
	if len(a.GetManagedFields()) == 0 {
		var err error
		if live, err = r.liveAddon(ctx, a.Namespace, a.Name); err != nil || live == nil {
			return true
		}
	}
	for _, m := range live.GetManagedFields() {
		if m.Manager != gitops.FieldManager || m.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Metadata struct {
				Labels map[string]json.RawMessage `json:"f:labels"`
			} `json:"f:metadata"`
		}
		if json.Unmarshal(m.FieldsV1.GetRawBytes(), &fields) == nil {
			if _, ok := fields.Metadata.Labels["f:"+gitops.ShardLabel]; ok {
				return true
			}
		}
	}
	return false
}

func sameJSON(a, b *apiextensionsv1.JSON) bool {
	decode := func(x *apiextensionsv1.JSON) any {
		if x == nil || len(x.Raw) == 0 {
			return nil
		}
		var v any
		if err := json.Unmarshal(x.Raw, &v); err != nil {
			return string(x.Raw)
		}
		return v
	}
	return equality.Semantic.DeepEqual(decode(a), decode(b))
}
