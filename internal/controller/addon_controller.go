package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/notify"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/source"
	"capstan.dev/capstan/internal/values"
)

// +kubebuilder:rbac:groups=capstan.dev,resources=addons,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=capstan.dev,resources=addons/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=capstan.dev,resources=addons/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=secrets;configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;serviceaccounts;persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// NOTE: get on StorageClasses lets health tell a tenant's claim that waits
// for its first consumer from a stuck one (a tenant's add-on is judged as
// the controller's own account); a StorageClass holds nothing secret.
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get

// AddonReconciler reconciles Addons.
type AddonReconciler struct {
	// Reconciled, when set, is told of each reconcile's Addon as it
	// begins (not of one deferred for its namespace's share): a test counts
	// one add-on's reconciles by it, where the controller's metrics count
	// every add-on's.
	Reconciled func(types.NamespacedName)
	// Client is the manager's client: cached reads of Addons, and the
	// controller's own identity for writes.
	Client client.Client
	// APIReader reads the API server directly, for Secrets and ConfigMaps
	// that are not cached.
	APIReader client.Reader
	// PlatformReader reads the platform ConfigMap; APIReader when nil. A
	// plan on demand reads everything else with the identity of the person
	// who asks, and passes the controller's own reader here: the facts are
	// the platform's, not the tenant's, and the person needs no right on
	// the controller's namespace to plan with them.
	PlatformReader client.Reader
	// RestConfig is the controller's own connection, from which the
	// impersonating client is made.
	RestConfig *rest.Config
	// Fetcher fetches charts and git trees.
	Fetcher *source.Fetcher
	// Hooks runs Helm hooks. Nil means a hooks.Runner.
	Hooks HookRunner
	// Recorder emits events on transitions.
	Recorder events.EventRecorder
	// Notifier posts the same transitions to webhooks; nil sends none.
	Notifier *notify.Notifier
	Config   Config

	// BeforeApplyStep, when set, is called between apply steps with the
	// step's name; tests use it to stop a reconcile half-way.
	BeforeApplyStep func(ctx context.Context, addon *capstanv1.Addon, step string) error

	once     sync.Once
	setupErr error
	// local is the controller's own cluster; remotes are those that
	// spec.kubeConfig names.
	local    *targetCluster
	remotes  remoteClusters
	verified verifiedObjects
	// drift queues a reconcile when an applied object changes; nil
	// outside a manager.
	drift *driftWatch
	// inflight holds the add-ons being reconciled now, by
	// types.NamespacedName.
	inflight sync.Map
	// pacer slows down the undoing of drift that keeps coming back.
	pacer driftPacer
	// awaiting holds the add-ons waiting for their objects to become
	// healthy, by types.NamespacedName (see driftWatch.nudge).
	awaiting sync.Map
	// awaitingGone holds the add-ons whose uninstall waits for what a
	// wave deleted to be gone (see driftWatch.wake).
	awaitingGone sync.Map
	// settled holds the add-ons whose last look found them Synced, or
	// held by a gate with something applied: a status change of one of
	// their objects looks at them again, for Degraded and the Healthy
	// condition (see driftWatch.nudge).
	settled sync.Map
	// verifiedSignatures holds the chart signatures that verified, by
	// signatureKey, with who signed; the most recently used only.
	verifiedSignatures signatureMemory
	// written holds the resourceVersion of the controller's last write to
	// each Addon, by types.NamespacedName (see readAddon).
	written sync.Map
	// held holds, by types.NamespacedName, the status of a hookless apply
	// that waits for its workloads and is not written yet (heldStatus).
	held sync.Map
	// refusals holds, by types.NamespacedName, the registrationCheck of
	// an add-on whose manifest was refused (see refusalStands).
	refusals sync.Map
	// unreadable holds, by types.NamespacedName, the unreadableRead of an
	// add-on whose manifest could not be read, to back off its reads.
	unreadable sync.Map
	// warned holds, by types.NamespacedName, the labels of the Addons in
	// a warning not settled since (status.warningSince): one that goes
	// away without the controller removing its finalizer (a person
	// removed it) still closes its incident (notifyGone).
	warned sync.Map
	// incidents remembers the triggers and closes this process sent.
	incidents incidentMemory
	// share bounds the reconciles of one restricted namespace at once;
	// nil (outside a manager) bounds nothing.
	share *tenantShare
	// retries is the queue's retry rate limiter; nil outside a manager.
	retries *retryLimiter
	// bound remembers the renders the sandbox stopped at a bound, so that
	// the same inputs do not hold a render worker again at every look.
	bound boundRenders
	// masks keeps the masks of the secret values of recent reconciles.
	masks maskCache
	// dryRunGrace counts the dry runs the API server could not take for a
	// moment, until one that goes on failing is taken as a refusal.
	dryRunGrace plan.DryRunGrace
}

// valuesRefIndex indexes Addons by the Secrets and ConfigMaps their
// valuesFrom, substituteFrom, decryption, kubeConfig, source credentials
// and signature keys name (values.ReferencedObjects, the list that keeps
// values.Cleanup off them too), so a change to one reconciles its Addons at
// once: new values, new keys, rotated credentials, a repointed remote
// cluster, or the label a restricted add-on waits for (labelledFor).
const valuesRefIndex = "capstan.dev/values-ref"

// SetupWithManager registers the reconciler, with up to maxConcurrent
// reconciles at once, and at most Config.MaxConcurrentPerTenant of them of
// one restricted namespace (tenantShareLimit). Addons are watched, and so is
// the metadata of Secrets and ConfigMaps (only metadata: the controller
// never caches Secret data), to reconcile the Addons that read them (all of
// them for the platform ConfigMap), and
// the metadata of applied objects, to undo drift soon (see driftWatch).
func (r *AddonReconciler) SetupWithManager(mgr ctrl.Manager, maxConcurrent int) error {
	r.Config = r.Config.WithDefaults()
	if err := r.init(); err != nil {
		return err
	}
	gaps := &watchGaps{}
	watched, err := newWatchedCache(mgr, r.RestConfig, r.Config.AddonsUser(), gaps)
	if err != nil {
		return err
	}
	if err := mgr.Add(watched); err != nil {
		return err
	}
	r.local.watched, r.local.gaps = watched, gaps
	workers := max(1, maxConcurrent)
	r.share = newTenantShare(tenantShareLimit(r.Config.MaxConcurrentPerTenant, workers))
	r.retries = newRetryLimiter()
	// Shadow CRDs that a crash left behind in this cluster are swept even
	// when their add-on checks no CRD again.
	sweeper := r.local.appliers[capstanv1.ProfileCluster].Client
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return sweepShadows(ctx, sweeper) })); err != nil {
		return err
	}
	r.drift = &driftWatch{
		Delay: r.Config.DriftDelay,
		Busy: func(addon types.NamespacedName) bool {
			_, busy := r.inflight.Load(addon)
			return busy
		},
		IsDrift: func(addon types.NamespacedName, changes []change) (bool, []change) {
			return r.isDrift(context.Background(), addon, changes)
		},
		Awaiting: func(addon types.NamespacedName) bool {
			_, ok := r.awaiting.Load(addon)
			return ok
		},
		AwaitingGone: func(addon types.NamespacedName) bool {
			_, ok := r.awaitingGone.Load(addon)
			return ok
		},
		Settled: func(addon types.NamespacedName) bool {
			_, ok := r.settled.Load(addon)
			return ok
		},
		StatusCounts: func(addon types.NamespacedName, gvk schema.GroupVersionKind) bool {
			return r.statusMayChangeHealth(context.Background(), addon, gvk)
		},
		Knows: func(addon types.NamespacedName, ref capstanv1.ObjectRef, reader client.Reader) bool {
			return r.knowsObject(context.Background(), addon, ref, reader)
		},
	}
	err = mgr.GetFieldIndexer().IndexField(context.Background(), &capstanv1.Addon{}, valuesRefIndex, func(obj client.Object) []string {
		return values.ReferencedObjects(obj.(*capstanv1.Addon).Spec)
	})
	if err != nil {
		return err
	}
	err = mgr.GetFieldIndexer().IndexField(context.Background(), &capstanv1.Addon{}, dependsOnIndex, func(obj client.Object) []string {
		return r.Config.dependencyKeys(obj.(*capstanv1.Addon))
	})
	if err != nil {
		return err
	}
	err = mgr.GetFieldIndexer().IndexField(context.Background(), &capstanv1.Addon{}, managedByIndex, func(obj client.Object) []string {
		return managedByKeys(obj.(*capstanv1.Addon))
	})
	if err != nil {
		return err
	}
	// A dependency that changes (Ready, or gone) wakes its dependents, and
	// a removal waiting for its dependents wakes when one goes. An Addon
	// removed, whose Ready condition changes, or whose inventory lets an
	// object go wakes those its objects blocked (ManagedByAnotherAddon).
	enqueueRelated := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		a, ok := obj.(*capstanv1.Addon)
		if !ok {
			return nil
		}
		var out []reconcile.Request
		list := &capstanv1.AddonList{}
		if err := r.Client.List(ctx, list, client.MatchingFields{dependsOnIndex: a.Namespace + "/" + a.Name}); err == nil {
			for _, d := range list.Items {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: d.Namespace, Name: d.Name}})
			}
		}
		// NOTE: a dependency is woken only when the cache holds it, which
		// is to say when it is in this controller's shard: one of another
		// shard Blocks its dependent (DependencyInAnotherShard), and is
		// its own controller's to reconcile.
		for _, key := range r.Config.dependencies(a) {
			dep := &capstanv1.Addon{}
			if err := r.Client.Get(ctx, key, dep); err != nil || !r.Config.Selects(dep.Labels) {
				continue
			}
			out = append(out, reconcile.Request{NamespacedName: key})
		}
		blocked := &capstanv1.AddonList{}
		if err := r.Client.List(ctx, blocked, client.MatchingFields{managedByIndex: a.Namespace + "/" + a.Name}); err == nil {
			for _, b := range blocked.Items {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: b.Namespace, Name: b.Name}})
			}
		}
		return out
	})
	enqueueReaders := func(kind string) handler.EventHandler {
		return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
			var list capstanv1.AddonList
			opts := []client.ListOption{client.InNamespace(obj.GetNamespace()), client.MatchingFields{valuesRefIndex: kind + "/" + obj.GetName()}}
			if r.isPlatformConfigMap(kind, obj) {
				// Every add-on reads the platform's facts.
				opts = nil
			}
			if err := r.Client.List(ctx, &list, opts...); err != nil {
				return nil
			}
			out := make([]reconcile.Request, 0, len(list.Items))
			for _, a := range list.Items {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: a.Namespace, Name: a.Name}})
			}
			return out
		})
	}
	return ctrl.NewControllerManagedBy(mgr).
		// NOTE: only spec (generation) and annotation changes reconcile:
		// the controller's own status writes must not, or a failed hook
		// would run again at once instead of waiting for the next sync.
		For(&capstanv1.Addon{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&capstanv1.Addon{}, enqueueRelated, builder.WithPredicates(readyOrGone{})).
		Watches(&corev1.Secret{}, enqueueReaders("Secret"), builder.OnlyMetadata).
		Watches(&corev1.ConfigMap{}, enqueueReaders("ConfigMap"), builder.OnlyMetadata).
		WatchesRawSource(crsource.Func(r.drift.start)).
		Named("addon").
		WithOptions(crcontroller.Options{MaxConcurrentReconciles: workers, RateLimiter: r.retries}).
		Complete(r)
}

// readyOrGone passes an Addon's creation and deletion, an update that
// changes its Ready condition (what its dependents and dependencies wait
// for), and one whose inventory lets an object go (what an add-on Blocked
// by that object waits for: an upgrade that drops an object without a
// workload to wait for stays Ready throughout). Other status writes wake
// no one.
type readyOrGone struct{ predicate.Funcs }

func (readyOrGone) Update(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*capstanv1.Addon)
	n, ok2 := e.ObjectNew.(*capstanv1.Addon)
	if !ok1 || !ok2 {
		return false
	}
	return notReady(o) != notReady(n) || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) || letGo(o.Status.Inventory, n.Status.Inventory)
}

// letGo reports whether the new inventory lacks an object the old one held.
func letGo(old, now []capstanv1.ObjectID) bool {
	if len(old) == 0 {
		return false
	}
	held := make(map[capstanv1.ObjectID]bool, len(now))
	for _, id := range now {
		held[id] = true
	}
	for _, id := range old {
		if !held[id] {
			return true
		}
	}
	return false
}

func (readyOrGone) Create(event.CreateEvent) bool   { return true }
func (readyOrGone) Delete(event.DeleteEvent) bool   { return true }
func (readyOrGone) Generic(event.GenericEvent) bool { return false }

// isPlatformConfigMap reports whether obj is the ConfigMap of the
// platform's facts, which every add-on reads.
func (r *AddonReconciler) isPlatformConfigMap(kind string, obj client.Object) bool {
	return kind == "ConfigMap" && r.Config.PlatformConfigMap != "" &&
		obj.GetNamespace() == r.Config.Namespace && obj.GetName() == r.Config.PlatformConfigMap
}

// init builds the two appliers: the controller's own identity for the
// restricted profile, and the impersonated add-ons account for the cluster
// profile.
func (r *AddonReconciler) init() error {
	r.once.Do(func() {
		r.Config = r.Config.WithDefaults()
		r.pacer.Delay, r.pacer.MaxDelay = r.Config.DriftDelay, r.Config.ResyncInterval
		r.dryRunGrace.Resync = r.Config.ResyncInterval
		if r.pacer.Delay <= 0 {
			r.pacer.Delay = r.Config.HealthPoll
		}
		if r.Hooks == nil {
			r.Hooks = &hooks.Runner{}
		}
		r.wireIncidents()
		own, err := client.New(r.RestConfig, client.Options{Scheme: r.Client.Scheme(), Mapper: r.Client.RESTMapper()})
		if err != nil {
			r.setupErr = err
			return
		}
		cfg := rest.CopyConfig(r.RestConfig)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: r.Config.AddonsUser()}
		imp, err := client.New(cfg, client.Options{Scheme: r.Client.Scheme(), Mapper: r.Client.RESTMapper()})
		if err != nil {
			r.setupErr = err
			return
		}
		disc, err := discovery.NewDiscoveryClientForConfig(r.RestConfig)
		if err != nil {
			r.setupErr = err
			return
		}
		recent := apply.Recent(disc)
		r.local = &targetCluster{
			appliers: map[capstanv1.Profile]*apply.Applier{
				capstanv1.ProfileRestricted: {Client: own, CRDTimeout: r.Config.CRDTimeout, Discovery: recent},
				capstanv1.ProfileCluster:    {Client: imp, CRDTimeout: r.Config.CRDTimeout, Discovery: recent},
			},
			mapper:     r.Client.RESTMapper(),
			discoverer: disc,
		}
	})
	return r.setupErr
}

// Reconcile brings one Addon towards its spec. It reads the Addon, defers
// one status patch, handles pause and deletion, then runs the pipeline.
func (r *AddonReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	leave, ok := r.enterShare(req)
	if !ok {
		return r.deferForShare(ctx, req), nil
	}
	// NOTE: deferred first, so the place is given back on every way out,
	// a panic too (controller-runtime recovers it after this unwinds).
	defer leave()
	if r.Reconciled != nil {
		r.Reconciled(req.NamespacedName)
	}
	start := time.Now()
	log := logf.FromContext(ctx)
	if err := r.init(); err != nil {
		return ctrl.Result{}, err
	}
	r.inflight.Store(req.NamespacedName, true)
	defer r.inflight.Delete(req.NamespacedName)
	addon, err := r.readAddon(ctx, req.NamespacedName)
	if err != nil {
		if apierrors.IsNotFound(err) {
			if lbls, ok := r.warned.LoadAndDelete(req.NamespacedName); ok {
				r.notifyGone(req.NamespacedName, lbls.(map[string]string), notify.SeverityWarning)
			}
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !r.Config.Selects(addon.Labels) {
		// NOTE: an Addon outside the shard is another controller's, even
		// when the API server shows it: one that just moved to another
		// shard is forgotten here, without a write and without a requeue,
		// and its incident stays open for the shard that now has it.
		log.V(1).Info("Skipping an Addon outside this controller's label selector", "selector", r.Config.Selector.String())
		r.warned.Delete(req.NamespacedName)
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	s := r.newScope(addon)
	before := addon.DeepCopy()
	r.resumeApplyRecord(s)
	// NOTE: a wave that status shows waiting is over unless this reconcile
	// finds it waiting still; its status clears it, whatever path it takes.
	s.priorWave, s.addon.Status.Wave = s.addon.Status.Wave, nil
	defer func() {
		observeReconcile(s, time.Since(start))
		if ctx.Err() != nil {
			// NOTE: the controller stops (SIGTERM, or a lost Lease) and
			// this reconcile ended part-way: what it found is the
			// stop's, not the add-on's. A hook it waited for still runs,
			// and an apply or a wait cut short failed for no reason of
			// the add-on's; writing that (status.hook cleared, Failed, a
			// Warning event) would have the next controller start the
			// running hook Job anew. So it ends as a SIGKILL does: the
			// checkpoints hold how far it got, and the next controller
			// goes on from them.
			log.Info("Stopping: this reconcile's status is not written; the next reconcile goes on from the last checkpoint", "stage", s.stage)
			return
		}
		// NOTE: a stop that comes now cut nothing short (a cancellation
		// stays): what this reconcile found is the add-on's, and is
		// written.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := r.patchStatus(pctx, before, s); err != nil {
			log.Error(s.mask().Error(err), "Patching status failed")
			retErr = errors.Join(retErr, err)
		}
		if s.leftShard {
			result, retErr = ctrl.Result{}, nil
		}
	}()

	if addon.Annotations[capstanv1.PausedAnnotation] == "true" {
		s.found.paused = true
		if addon.DeletionTimestamp.IsZero() {
			// NOTE: a hold outlasts the pause, and the operations refuse
			// an approval on its Ready reason (addons.RefuseHeld): with
			// the pause's reason instead, an approval would be taken, and
			// used up by the hold once the annotation goes. profileChange
			// reads nothing.
			s.found.profileChanged = profileChange(r.Config, s.addon, s.profile)
		}
		s.outcome = outcomeOf(s.found, "", nil)
		r.settled.Delete(req.NamespacedName)
		// A paused add-on reads nothing there, and its drift is not
		// undone: it holds no remote cluster's watches until it resumes.
		r.releaseRemote(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if r.awaitRunningHook(ctx, s) {
		return r.result(s, nil)
	}
	if !addon.DeletionTimestamp.IsZero() {
		if err := readableInventory(addon); err != nil {
			// NOTE: an uninstall from an inventory it cannot read would
			// leave out the very objects it must delete.
			s.stage = "Inventory"
			return r.result(s, terminal{err})
		}
		return r.reconcileDelete(ctx, s)
	}
	defer refreshHandled(s)
	if err := refreshRequest(s); err != nil {
		s.stage = "Refresh"
		return r.result(s, err)
	}
	if err := readableInventory(addon); err != nil {
		s.stage = "Inventory"
		return r.result(s, terminal{err})
	}
	if !controllerutil.ContainsFinalizer(addon, capstanv1.Finalizer) {
		patch := client.MergeFrom(addon.DeepCopy())
		controllerutil.AddFinalizer(addon, capstanv1.Finalizer)
		if err := r.Client.Patch(ctx, addon, patch); err != nil {
			s.err = err
			return ctrl.Result{}, err
		}
		r.wrote(addon)
		before.Finalizers = addon.Finalizers
		before.ResourceVersion = addon.ResourceVersion
	}
	return r.reconcileNormal(ctx, s)
}

// readableInventory refuses an Addon whose inventory holds entries that
// name no object, as an Addon applied by a Capstan from before the
// inventory's one-string form reads: a prune or an uninstall from it would
// miss the objects those entries named, and a new inventory written over
// it would forget them. The error says how to go on.
func readableInventory(addon *capstanv1.Addon) error {
	bad := capstanv1.UnreadableEntries(addon.Status.Inventory)
	if len(bad) == 0 {
		return nil
	}
	shown := bad
	if len(shown) > 3 {
		shown = append(shown[:3:3], fmt.Sprintf("and %d more", len(bad)-3))
	}
	return fmt.Errorf("status.inventory has %d of %d entries that name no object (%s), so Capstan cannot tell what this add-on applied; "+
		"an Addon applied by a Capstan from before the inventory named each object as \"apiVersion Kind namespace/name\" reads this way. "+
		"Nothing was applied, pruned or deleted. Uninstall it with the Capstan that applied it; or, to keep its software, remove the inventory "+
		"(kubectl patch addon %s -n %s --subresource=status --type=json -p '[{\"op\":\"remove\",\"path\":\"/status/inventory\"}]'): "+
		"the next sync applies the add-on again and records what it applies, and objects it no longer renders stay in place, unmanaged",
		len(bad), len(addon.Status.Inventory), strings.Join(shown, ", "), addon.Name, addon.Namespace)
}

// forget drops what the reconciler holds in memory about an Addon that is
// gone, or no longer this controller's.
func (r *AddonReconciler) forget(key types.NamespacedName) {
	forgetPhase(key)
	r.verified.forget(key)
	r.pacer.forget(key)
	r.awaiting.Delete(key)
	r.awaitingGone.Delete(key)
	r.settled.Delete(key)
	r.drift.forget(key)
	r.written.Delete(key)
	r.held.Delete(key)
	r.refusals.Delete(key)
	r.unreadable.Delete(key)
	r.releaseRemote(key)
	r.incidents.forget(key)
	r.bound.forget(key)
	r.masks.forget(key)
	r.dryRunGrace.Forget(key)
}

// readAddon reads the Addon to reconcile. The manager's cache answers
// when it can be trusted: when it holds the controller's own last write to
// this Addon or a later version (the resourceVersions of one resource
// compare as numbers, resourceversion.CompareResourceVersion), or when the
// controller has not written it since it started (the cache was listed
// after every earlier write). Otherwise the API server answers: when the
// cache has not caught up with the controller's last write (a reconcile
// that saw an Addon without the appliedHash it just recorded would run the
// install hooks again), and for an Addon being deleted, whose finalizer the
// controller may have just removed. A resync costs no request at all, and
// an install two reads less.
func (r *AddonReconciler) readAddon(ctx context.Context, key types.NamespacedName) (*capstanv1.Addon, error) {
	addon := &capstanv1.Addon{}
	err := r.Client.Get(ctx, key, addon)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	if err == nil {
		last, wrote := r.written.Load(key)
		if lastWrite, _ := last.(string); cacheCurrent(addon, lastWrite, wrote) {
			return addon, nil
		}
	}
	addon = &capstanv1.Addon{}
	if err := r.APIReader.Get(ctx, key, addon); err != nil {
		return nil, err
	}
	return addon, nil
}

// cacheCurrent decides whether a cached Addon may be reconciled: one not
// being deleted, when the controller has not written it (wrote false) or
// the cache holds its last write (lastWrite) or a later version.
func cacheCurrent(cached *capstanv1.Addon, lastWrite string, wrote bool) bool {
	switch {
	case !cached.DeletionTimestamp.IsZero():
		return false
	case !wrote || cached.ResourceVersion == lastWrite:
		return true
	}
	order, err := resourceversion.CompareResourceVersion(cached.ResourceVersion, lastWrite)
	return err == nil && order > 0
}

// wrote remembers the resourceVersion of the controller's write to an
// Addon, from the API server's answer.
func (r *AddonReconciler) wrote(addon *capstanv1.Addon) {
	r.written.Store(types.NamespacedName{Namespace: addon.Namespace, Name: addon.Name}, addon.ResourceVersion)
}

// maxRetryDelay bounds the wait before a failed reconcile is tried again.
// controller-runtime's default grows to 16 minutes, so an add-on that
// failed through a 30-second API server outage would sit idle long after
// the server was back; a minute keeps recovery prompt while a server that
// stays down is asked at most once a minute per add-on.
const maxRetryDelay = time.Minute

// newRetryLimiter is controller-runtime's default rate limiter with the
// per-add-on backoff capped at maxRetryDelay.
func newRetryLimiter() *retryLimiter {
	return &retryLimiter{TypedRateLimiter: workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, maxRetryDelay),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)}
}
