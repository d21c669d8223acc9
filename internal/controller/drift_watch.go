package controller

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/plan"
)

// driftWatch queues an add-on's reconcile soon after an object it applied
// is changed or deleted behind its back, as Argo CD's self-heal does,
// instead of at the next resync. It hangs a handler on each informer of the
// metadata watch cache.
//
// Changes are gathered per add-on, and checked once when Delay is over: by
// then the controller has recorded its own writes, and a burst of edits
// queues one reconcile. While the add-on is being reconciled the check waits,
// so it sees the status that reconcile leaves (a failed hook, say). How
// often drift that keeps coming back is undone is the reconcile's business
// (driftPacer).
type driftWatch struct {
	// Delay is how long after a change its add-on is looked at.
	Delay time.Duration
	// Busy reports whether the add-on is being reconciled now.
	Busy func(addon types.NamespacedName) bool
	// IsDrift decides whether the changes gathered for an add-on call for
	// a reconcile, and returns those that were writes of an object's
	// status alone (an object without a generation, whose update the
	// watch cannot tell from an edit by its metadata): each is then taken
	// as a status change (statusChanged).
	IsDrift func(addon types.NamespacedName, changes []change) (drift bool, statusOnly []change)
	// Awaiting reports whether an add-on waits for its objects to become
	// healthy: any change to one of them, status included, looks again at
	// once instead of at the next health poll.
	Awaiting func(addon types.NamespacedName) bool
	// AwaitingGone reports whether an add-on's uninstall waits for what a
	// wave deleted to be gone: the deletion of one of its objects looks
	// again at once. Its other changes do not, since each look reads the
	// whole inventory.
	AwaitingGone func(addon types.NamespacedName) bool
	// Settled reports whether an add-on was last found Synced, or held by
	// a gate: a status change of one of its objects looks again after
	// healthLookDelay, so that an object that stops being Current shows
	// (Degraded, and the Healthy condition) without waiting for the resync.
	Settled func(addon types.NamespacedName) bool
	// StatusCounts reports whether a status change of an object of kind
	// gvk may change a settled add-on's health (statusMayChangeHealth);
	// nil counts every kind.
	StatusCounts func(addon types.NamespacedName, gvk schema.GroupVersionKind) bool
	// Knows reports whether an add-on applied, verified or waits for an
	// object, in the cluster of the watch cache reader. A status change or
	// a deletion looks at an add-on early only for an object it knows:
	// Capstan's labels alone prove nothing, since whoever may write an
	// object may put any add-on's labels on it, in any cluster Capstan
	// watches.
	Knows func(addon types.NamespacedName, ref capstanv1.ObjectRef, reader client.Reader) bool

	mu    sync.Mutex
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]
	// hooked holds the informers with the handler, of every cluster's
	// watch cache, with the cache each belongs to.
	hooked map[cache.Informer]client.Reader
	// pending holds, per add-on, the latest change of each object since
	// its check was started, of each cluster apart (pendingKey).
	pending map[types.NamespacedName]map[pendingKey]change
	// looks holds, per settled add-on, when its last look was due
	// (lookSettled).
	looks map[types.NamespacedName]time.Time
}

// change is one event on an object an add-on applied.
type change struct {
	gvk             schema.GroupVersionKind
	namespace, name string
	resourceVersion string
	deleted         bool
	// reader is the watch cache the change came from: the cluster the
	// object lives in.
	reader client.Reader
}

// pendingKey is an object of one cluster: its ObjectRef.Key, and the
// watch cache that heard of it.
//
// NOTE: not the key alone. An object of the same namespace and name in
// another cluster, wearing an add-on's labels (a tenant's twin of a remote
// add-on's object, changed in a loop), would otherwise take the place of a
// change of the add-on's own object in the same Delay; the check would
// see the twin's change alone, which is not the add-on's, and the drift
// would wait for the resync.
type pendingKey struct {
	reader client.Reader
	ref    string
}

func (c change) ref() capstanv1.ObjectRef {
	return refOf(c.gvk, c.namespace, c.name)
}

// refOf is the ObjectRef of the object of kind gvk named name in namespace.
func refOf(gvk schema.GroupVersionKind, namespace, name string) capstanv1.ObjectRef {
	return capstanv1.ObjectRef{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Namespace: namespace, Name: name}
}

// start records the controller's queue; it is the Start of a source.Func.
func (d *driftWatch) start(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.queue = q
	return nil
}

// hook adds the drift handler to an informer of gvk in the watch cache
// reader, once.
func (d *driftWatch) hook(gvk schema.GroupVersionKind, inf cache.Informer, reader client.Reader) {
	if d == nil || d.Delay <= 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.hooked[inf]; ok {
		return
	}
	_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		// NOTE: no AddFunc. An informer's first list adds every object,
		// and objects the controller creates are its own.
		UpdateFunc: func(oldObj, newObj any) {
			if !changed(oldObj, newObj) {
				d.nudge(gvk, reader, oldObj, newObj)
				return
			}
			// Both owners hear of a relabelled object. (An object whose
			// labels are removed leaves the label-selected watch, and
			// comes as a delete.)
			for _, addon := range owners(oldObj, newObj) {
				d.seen(addon, gvk, reader, newObj, false)
			}
		},
		DeleteFunc: func(obj any) { d.gone(gvk, reader, obj) },
	})
	if err != nil {
		logf.Log.Error(err, "Watching for drift failed", "kind", gvk.String())
		return
	}
	if d.hooked == nil {
		d.hooked = map[cache.Informer]client.Reader{}
	}
	d.hooked[inf] = reader
}

// gone hears of the deletion of obj, of kind gvk, from the watch cache
// reader: drift for its owners, and a look at once for an owner whose
// uninstall waits for what it deleted to be gone, if it knows the object.
func (d *driftWatch) gone(gvk schema.GroupVersionKind, reader client.Reader, obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	for _, addon := range owners(obj) {
		d.seen(addon, gvk, reader, obj, true)
		if d.AwaitingGone != nil && d.AwaitingGone(addon) && d.knows(addon, gvk, reader, obj) {
			d.wake(addon)
		}
	}
}

// unhook forgets the informers of a watch cache that was stopped (a remote
// cluster released, or rebuilt for a changed kubeconfig), so that they and
// the objects they held are not kept for ever.
func (d *driftWatch) unhook(reader client.Reader) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for inf, from := range d.hooked {
		if from == reader {
			delete(d.hooked, inf)
		}
	}
}

// changed reports whether an update may be drift. Objects with a
// generation (workloads, custom resources) count only when it moves or
// their labels change, not on status updates; objects without one
// (ConfigMaps, Services, RBAC) count on every update.
func changed(oldObj, newObj any) bool {
	o, err1 := apimeta.Accessor(oldObj)
	n, err2 := apimeta.Accessor(newObj)
	if err1 != nil || err2 != nil || o.GetResourceVersion() == n.GetResourceVersion() {
		return false
	}
	if n.GetGeneration() == 0 {
		return true
	}
	return o.GetGeneration() != n.GetGeneration() || !maps.Equal(o.GetLabels(), n.GetLabels())
}

// owners returns the add-ons that Capstan's labels on objs name, once each.
func owners(objs ...any) []types.NamespacedName {
	var out []types.NamespacedName
	for _, obj := range objs {
		m, err := apimeta.Accessor(obj)
		if err != nil {
			continue
		}
		addon := types.NamespacedName{Namespace: m.GetLabels()[capstanv1.AddonNamespaceLabel], Name: m.GetLabels()[capstanv1.AddonLabel]}
		if addon.Name != "" && addon.Namespace != "" && (len(out) == 0 || out[0] != addon) {
			out = append(out, addon)
		}
	}
	return out
}

// nudgeDelay gathers the status updates of a rollout into one look.
const nudgeDelay = 200 * time.Millisecond

// nudgePriority puts a nudged add-on ahead of the add-ons queued for a
// sync. Looking again at an add-on whose objects just became healthy is
// one read and one status write, and it finishes a sync that has applied
// everything; at the back of the queue it would wait behind every queued
// sync, so that with 200 add-ons created at once an add-on whose
// Deployment was Available said Ready 11 s later in the median. Argo CD
// keeps its status refresh apart from its syncs for the same reason. A
// nudge comes only from a status change of an object its add-on waits
// for, an object it knows (Knows), so it cannot keep the queued syncs
// waiting for long.
const nudgePriority = 1

// healthLookDelay gathers the status updates of an object of a settled
// add-on into one look: a Deployment's rollout or a scale writes several.
const healthLookDelay = 2 * time.Second

// settledLookEvery bounds how often status changes look at one settled
// add-on: each look renders and previews it again, and an object whose
// status changes all the time (a heartbeat, an autoscaled workload) would
// otherwise keep the add-on in the queue.
const settledLookEvery = 10 * time.Second

// nudge queues, soon, the add-ons that wait for an object whose status
// just changed: a Deployment that became Available is seen in a fraction
// of a second, not at the next health poll, and not behind the queued
// syncs (nudgePriority). A settled add-on is looked at again too, in its
// turn: one of its objects may no longer be Current, for a kind whose
// health a status can change (StatusCounts). Either only for an
// object the add-on knows (Knows), in the cluster of the watch cache
// reader.
func (d *driftWatch) nudge(gvk schema.GroupVersionKind, reader client.Reader, oldObj, newObj any) {
	o, err1 := apimeta.Accessor(oldObj)
	n, err2 := apimeta.Accessor(newObj)
	if err1 != nil || err2 != nil || o.GetResourceVersion() == n.GetResourceVersion() || d.Awaiting == nil {
		return
	}
	ref := refOf(gvk, n.GetNamespace(), n.GetName())
	for _, addon := range owners(newObj) {
		d.statusChanged(addon, gvk, reader, ref)
	}
}

// statusChanged looks at an add-on soon for a status change of its object
// ref, of kind gvk, heard of from the watch cache reader: at once when it
// waits for its objects, in its turn when it is settled and a status of
// that kind may change its health (StatusCounts); either only for an
// object it knows (Knows).
func (d *driftWatch) statusChanged(addon types.NamespacedName, gvk schema.GroupVersionKind, reader client.Reader, ref capstanv1.ObjectRef) {
	d.mu.Lock()
	q := d.queue
	d.mu.Unlock()
	if q == nil || d.Awaiting == nil {
		return
	}
	// NOTE: the cheap questions first: Knows may read the Addon.
	awaiting := d.Awaiting(addon)
	settled := !awaiting && d.Settled != nil && d.Settled(addon) && (d.StatusCounts == nil || d.StatusCounts(addon, gvk))
	if !awaiting && !settled || d.Knows == nil || !d.Knows(addon, ref, reader) {
		return
	}
	if awaiting {
		d.wake(addon)
		return
	}
	if after, ok := d.lookSettled(addon, time.Now()); ok {
		q.AddAfter(reconcile.Request{NamespacedName: addon}, after)
	}
}

// knows reports whether addon knows obj, of kind gvk, that the watch cache
// reader heard of (Knows); nothing without Knows.
func (d *driftWatch) knows(addon types.NamespacedName, gvk schema.GroupVersionKind, reader client.Reader, obj any) bool {
	m, err := apimeta.Accessor(obj)
	if err != nil || d.Knows == nil {
		return false
	}
	return d.Knows(addon, refOf(gvk, m.GetNamespace(), m.GetName()), reader)
}

// wake queues an add-on that waits for its objects soon, ahead of the
// queued syncs (nudgePriority).
func (d *driftWatch) wake(addon types.NamespacedName) {
	d.mu.Lock()
	q := d.queue
	d.mu.Unlock()
	if q == nil {
		return
	}
	req := reconcile.Request{NamespacedName: addon}
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		pq.AddWithOpts(priorityqueue.AddOpts{After: nudgeDelay, Priority: ptr.To(nudgePriority)}, req)
		return
	}
	q.AddAfter(req, nudgeDelay)
}

// lookSettled decides when a status change looks at a settled add-on:
// healthLookDelay from now, and settledLookEvery after the last look it
// queued; not at all when one is queued already.
func (d *driftWatch) lookSettled(addon types.NamespacedName, now time.Time) (time.Duration, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	due := now.Add(healthLookDelay)
	if last, ok := d.looks[addon]; ok {
		if last.After(now) {
			return 0, false
		}
		if next := last.Add(settledLookEvery); next.After(due) {
			due = next
		}
	}
	if d.looks == nil {
		d.looks = map[types.NamespacedName]time.Time{}
	}
	d.looks[addon] = due
	return due.Sub(now), true
}

// forget drops what the watch remembers of an add-on that is gone.
func (d *driftWatch) forget(addon types.NamespacedName) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.looks, addon)
}

// seen remembers one change for an add-on, and starts its check when none
// is waiting.
func (d *driftWatch) seen(addon types.NamespacedName, gvk schema.GroupVersionKind, reader client.Reader, obj any, deleted bool) {
	m, err := apimeta.Accessor(obj)
	if err != nil {
		return
	}
	c := change{gvk: gvk, namespace: m.GetNamespace(), name: m.GetName(), resourceVersion: m.GetResourceVersion(), deleted: deleted, reader: reader}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pending == nil {
		d.pending = map[types.NamespacedName]map[pendingKey]change{}
	}
	waiting, ok := d.pending[addon]
	if !ok {
		waiting = map[pendingKey]change{}
		d.pending[addon] = waiting
		time.AfterFunc(d.Delay, func() { d.fire(addon) })
	}
	waiting[pendingKey{reader: reader, ref: c.ref().Key()}] = c
}

// fire checks the changes gathered for an add-on and queues it when one of
// them is drift. While the add-on is being reconciled it waits another
// Delay.
func (d *driftWatch) fire(addon types.NamespacedName) {
	if d.Busy != nil && d.Busy(addon) {
		time.AfterFunc(d.Delay, func() { d.fire(addon) })
		return
	}
	d.mu.Lock()
	changes := slices.Collect(maps.Values(d.pending[addon]))
	delete(d.pending, addon)
	q := d.queue
	d.mu.Unlock()
	if q == nil {
		return
	}
	drift, statusOnly := d.IsDrift(addon, changes)
	if drift {
		q.Add(reconcile.Request{NamespacedName: addon})
		return
	}
	for _, c := range statusOnly {
		d.statusChanged(addon, c.gvk, c.reader, c.ref())
	}
}

// isDrift is the reconciler's drift decision. One of the changes must be
// to an object the add-on verified: to a resourceVersion the controller did
// not record, or a delete of an object the controller has not since created
// again (as it re-creates a Job whose template changed). And the add-on,
// read so that the status a reconcile just wrote counts (readAddon), must
// be one drift may reconcile (driftWanted). When none is drift, it returns
// the changes that were writes of a status alone (statusWritten): the
// drift watch takes them as status changes, as it does the status updates
// of an object with a generation.
func (r *AddonReconciler) isDrift(ctx context.Context, key types.NamespacedName, changes []change) (bool, []change) {
	var statusOnly []change
	drifted := false
	for _, c := range changes {
		switch r.judgeChange(ctx, key, c) {
		case changeDrift:
			drifted = true
		case changeOfStatus:
			statusOnly = append(statusOnly, c)
		}
		if drifted {
			break
		}
	}
	if !drifted {
		return false, statusOnly
	}
	addon, err := r.readAddon(ctx, key)
	if err != nil {
		return false, nil
	}
	return driftWanted(addon), nil
}

// changeVerdict is what one change of an object is to an add-on
// (judgeChange).
type changeVerdict int

const (
	// changeIgnored: not drift. The object is not one the add-on
	// verified, the change was heard of in another cluster, or it is the
	// controller's own.
	changeIgnored changeVerdict = iota
	// changeDrift: drift of an object the add-on verified.
	changeDrift
	// changeOfStatus: a write of the status alone of an object the add-on
	// verified (statusWritten).
	changeOfStatus
)

// knowsObject reports whether an add-on knows an object (driftWatch.Knows):
// one the controller verified of it, one of its inventory (what it applied
// and has not pruned, what an uninstall deletes), or the hook that
// status.hook names; and only from the watch cache reader of the cluster
// the add-on targets: an object of the same namespace and name in another
// cluster is not its own. The Addon is read from the cache.
func (r *AddonReconciler) knowsObject(ctx context.Context, key types.NamespacedName, ref capstanv1.ObjectRef, reader client.Reader) bool {
	if !r.verified.watches(key, reader) {
		return false
	}
	want := ref.Key()
	if _, ok := r.verified.object(key, want); ok {
		return true
	}
	addon := &capstanv1.Addon{}
	if err := r.Client.Get(ctx, key, addon); err != nil {
		return false
	}
	if h := addon.Status.Hook; h != nil && h.Key() == want {
		return true
	}
	return slices.ContainsFunc(capstanv1.RefsOf(addon.Status.Inventory), func(r capstanv1.ObjectRef) bool { return r.Key() == want })
}

// judgeChange says what one change is to an add-on: drift of an object it
// verified, heard of from the watch cache of the cluster it targets; a
// write of that object's status alone; or nothing to it.
func (r *AddonReconciler) judgeChange(ctx context.Context, key types.NamespacedName, c change) changeVerdict {
	known, ok := r.verified.object(key, c.ref().Key())
	switch {
	case !ok || !r.verified.watches(key, c.reader):
		return changeIgnored
	case !c.deleted:
		// NOTE: an update older than the one remembered is the
		// controller's own: the apply before its hand-over of fields
		// (apply.handOver), whose write of managedFields alone no update
		// counts.
		cmp, err := resourceversion.CompareResourceVersion(c.resourceVersion, known.ResourceVersion)
		newer := err != nil && known.ResourceVersion != c.resourceVersion || err == nil && cmp > 0
		switch {
		case !newer:
			return changeIgnored
		case r.statusWritten(ctx, key, c, known):
			return changeOfStatus
		}
		return changeDrift
	case c.reader == nil:
		return changeDrift
	}
	now := &metav1.PartialObjectMetadata{}
	now.SetGroupVersionKind(c.gvk)
	err := c.reader.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.name}, now)
	if err != nil || now.ResourceVersion != known.ResourceVersion {
		return changeDrift
	}
	return changeIgnored
}

// statusWritten reports whether the object of a change, one with a status
// and no metadata.generation (plan.Verified.Shape: a Service, a
// HorizontalPodAutoscaler before Kubernetes 1.37), is still of the shape
// verified, so that only its status was written: by its controller (an
// autoscaler whenever its metrics move, a load balancer's address), which
// a sync would not change. Without this, each such write would render the
// add-on and dry-run the object again. The object is read from the
// add-on's cluster as the account it applies as; a read that fails is
// taken for drift.
func (r *AddonReconciler) statusWritten(ctx context.Context, key types.NamespacedName, c change, known plan.Verified) bool {
	reads := r.verified.reader(key)
	if known.Shape == "" || reads == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, statusReadTimeout)
	defer cancel()
	live, err := reads.Get(ctx, c.ref())
	return err == nil && live != nil && plan.ShapeOf(live) == known.Shape
}

// statusReadTimeout bounds statusWritten's read.
const statusReadTimeout = 10 * time.Second

// statusMayChangeHealth reports whether a status change of an object of
// kind gvk may change the health of an add-on that was settled
// (driftWatch.StatusCounts): not for a kind whose health no status of its
// own changes (statusBlind), unless the add-on's spec.healthChecks judge
// that kind. The Addon is read from the cache.
func (r *AddonReconciler) statusMayChangeHealth(ctx context.Context, key types.NamespacedName, gvk schema.GroupVersionKind) bool {
	if !statusBlind[gvk.GroupKind()] {
		return true
	}
	addon := &capstanv1.Addon{}
	if err := r.Client.Get(ctx, key, addon); err != nil {
		return true
	}
	return slices.ContainsFunc(addon.Spec.HealthChecks, func(h capstanv1.HealthCheck) bool {
		return h.APIVersion == gvk.GroupVersion().String() && h.Kind == gvk.Kind
	})
}

// driftWanted reports whether drift should reconcile an add-on now. Not a
// paused or deleting one, and not one Stalled: a failed hook is retried by
// a change, a sync request or the resync, never by drift, and a Blocked
// add-on would apply nothing.
func driftWanted(addon *capstanv1.Addon) bool {
	if addon.DeletionTimestamp != nil || addon.Annotations[capstanv1.PausedAnnotation] == "true" {
		return false
	}
	if addon.Status.PendingHook != nil {
		return false
	}
	stalled := apimeta.FindStatusCondition(addon.Status.Conditions, capstanv1.ConditionStalled)
	return stalled == nil || stalled.Status != metav1.ConditionTrue
}
