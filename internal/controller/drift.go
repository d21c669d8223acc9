package controller

import (
	"context"
	"maps"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// driftWatch queues an add-on's reconcile soon after an object it applied
// is changed or deleted behind its back, as Argo CD's self-heal does,
// instead of at the next resync. It hangs a handler on each informer of the
// metadata watch cache. A change is drift when the object is one the add-on
// verified (applied, or found unchanged by a dry run) and its new
// resourceVersion is not the one the controller recorded: the controller's
// own writes are recorded, and status-only updates of objects with a
// generation do not count. The check runs Delay after the event, so the
// controller has recorded its own write by then, and a burst of edits
// queues one reconcile.
type driftWatch struct {
	// Delay is how long after a change its add-on is looked at.
	Delay time.Duration
	// IsDrift decides, when the delay is over, whether the change still
	// calls for a reconcile.
	IsDrift func(addon types.NamespacedName, key, resourceVersion string, deleted bool) bool

	mu     sync.Mutex
	queue  workqueue.TypedRateLimitingInterface[reconcile.Request]
	hooked map[schema.GroupVersionKind]bool
}

// start records the controller's queue; it is the Start of a source.Func.
func (d *driftWatch) start(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.queue = q
	return nil
}

// hook adds the drift handler to the informer of gvk, once.
func (d *driftWatch) hook(gvk schema.GroupVersionKind, inf cache.Informer) {
	if d == nil || d.Delay <= 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.hooked[gvk] {
		return
	}
	_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		// NOTE: no AddFunc. An informer's first list adds every object,
		// and objects the controller creates are its own.
		UpdateFunc: func(oldObj, newObj any) {
			if changed(oldObj, newObj) {
				d.seen(gvk, newObj, false)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			d.seen(gvk, obj, true)
		},
	})
	if err != nil {
		logf.Log.Error(err, "Watching for drift failed", "kind", gvk.String())
		return
	}
	if d.hooked == nil {
		d.hooked = map[schema.GroupVersionKind]bool{}
	}
	d.hooked[gvk] = true
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

// seen schedules the drift check of one event.
func (d *driftWatch) seen(gvk schema.GroupVersionKind, obj any, deleted bool) {
	m, err := apimeta.Accessor(obj)
	if err != nil {
		return
	}
	name, ns := m.GetLabels()[capstanv1.AddonLabel], m.GetLabels()[capstanv1.AddonNamespaceLabel]
	if name == "" || ns == "" {
		return
	}
	addon := types.NamespacedName{Namespace: ns, Name: name}
	key := capstanv1.ObjectRef{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Namespace: m.GetNamespace(), Name: m.GetName()}.Key()
	rv := m.GetResourceVersion()
	time.AfterFunc(d.Delay, func() {
		if !d.IsDrift(addon, key, rv, deleted) {
			return
		}
		d.mu.Lock()
		q := d.queue
		d.mu.Unlock()
		if q != nil {
			q.Add(reconcile.Request{NamespacedName: addon})
		}
	})
}

// isDrift is the reconciler's drift decision: the object is one the add-on
// verified, at another resourceVersion (or gone), and the add-on is not
// paused or waiting on a failed hook, which only a change, a sync request
// or the resync retries.
func (r *AddonReconciler) isDrift(ctx context.Context, key types.NamespacedName, objKey, resourceVersion string, deleted bool) bool {
	known, ok := r.verified.object(key, objKey)
	if !ok || (!deleted && known.resourceVersion == resourceVersion) {
		return false
	}
	addon := &capstanv1.Addon{}
	if err := r.Client.Get(ctx, key, addon); err != nil {
		return false
	}
	return driftWanted(addon)
}

// driftWanted reports whether drift should reconcile an add-on now.
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
