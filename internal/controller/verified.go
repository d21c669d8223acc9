package controller

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/plan"
)

// verifiedObjects remembers, per add-on, the objects a server-side dry run
// last found unchanged: the digest of the manifest that was dry-run and the
// resourceVersion of the live object it was compared with. While both hold,
// the object is still unchanged, and a resync need not dry-run it again:
// any change to the live object, drift included, gives it a new
// resourceVersion. It lives in memory only; a restarted controller dry-runs
// everything once.
//
// What it holds is of one cluster, the one the add-on targeted when it was
// recorded (target): a resourceVersion, a generation or a digest says
// nothing of an object of the same name in another cluster, which may run
// another spec at the same generation.
type verifiedObjects struct {
	mu sync.Mutex
	m  map[types.NamespacedName]verifiedAddon
}

type verifiedAddon struct {
	uid types.UID
	// cluster is the cluster the add-on targets, where its objects were
	// verified, and watched that cluster's watch cache: the drift watch
	// hears of the add-on's objects from it alone.
	cluster *capstanv1.InventoryCluster
	watched client.Reader
	// reads reads the add-on's objects there, as the account it applies
	// as, past any cache.
	reads   objectReader
	objects map[string]plan.Verified
	// checked are the objects a health check found Current (checkedCurrent).
	checked map[string]checkedAt
}

// checkedAt is where a health check found an object Current: its
// resourceVersion, and the generation of the add-on whose
// spec.healthChecks judged it.
type checkedAt struct {
	resourceVersion string
	generation      int64
}

// lookup returns what was verified for an add-on: nothing when the Addon
// is a new one of the same name.
func (v *verifiedObjects) lookup(addon *capstanv1.Addon) map[string]plan.Verified {
	v.mu.Lock()
	defer v.mu.Unlock()
	got, ok := v.m[client.ObjectKeyFromObject(addon)]
	if !ok || got.uid != addon.UID {
		return nil
	}
	return got.objects
}

// objectReader reads one object; *apply.Applier is one.
type objectReader interface {
	Get(ctx context.Context, ref capstanv1.ObjectRef) (*unstructured.Unstructured, error)
}

// target records the cluster an add-on targets, that cluster's watch cache
// (nil outside a manager), and how to read the add-on's objects there.
// What was verified or checked in another cluster is forgotten: an Addon
// pointed at another cluster and back finds there objects the memory knows
// nothing of, and dry-runs them.
func (v *verifiedObjects) target(addon *capstanv1.Addon, cluster *capstanv1.InventoryCluster, watched client.Reader, reads objectReader) {
	v.mu.Lock()
	defer v.mu.Unlock()
	got := v.entry(addon)
	if got.cluster == nil || !sameCluster(got.cluster, cluster) {
		got.objects, got.checked = nil, nil
	}
	got.cluster, got.watched, got.reads = cluster, watched, reads
	v.m[client.ObjectKeyFromObject(addon)] = got
}

// watches reports whether reader is the watch cache of the cluster an
// add-on targets (target): a change an informer of another cluster hears
// of is not of the add-on's objects, whatever labels it wears.
func (v *verifiedObjects) watches(addon types.NamespacedName, reader client.Reader) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	got, ok := v.m[addon]
	return ok && got.cluster != nil && got.watched == reader
}

// release lets go of the watch cache and the reader of the cluster an
// add-on targeted (target), once its kubeconfig is gone or unusable: a
// stopped cache holds the metadata of every Capstan object there, and the
// reader's client that cluster's credentials, for as long as the Addon
// exists. What was verified there is kept, of that cluster, for when the
// kubeconfig is back.
func (v *verifiedObjects) release(addon types.NamespacedName) {
	v.mu.Lock()
	defer v.mu.Unlock()
	got, ok := v.m[addon]
	if !ok {
		return
	}
	got.watched, got.reads = nil, nil
	v.m[addon] = got
}

// reader returns how to read an add-on's objects in the cluster it
// targets (target); nil when none is recorded.
func (v *verifiedObjects) reader(addon types.NamespacedName) objectReader {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.m[addon].reads
}

// object returns what was verified of one object of an add-on.
func (v *verifiedObjects) object(addon types.NamespacedName, key string) (plan.Verified, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	o, ok := v.m[addon].objects[key]
	return o, ok
}

// store replaces what is verified for an add-on.
func (v *verifiedObjects) store(addon *capstanv1.Addon, objects map[string]plan.Verified) {
	v.mu.Lock()
	defer v.mu.Unlock()
	got := v.entry(addon)
	got.objects = objects
	v.m[client.ObjectKeyFromObject(addon)] = got
}

// checkedCurrent reports whether the add-on's health check found an object
// Current at resourceVersion, with the checks of the add-on's generation.
// A check's verdict depends on nothing but the object and the check, so
// it holds until either changes: the object is not evaluated again, and
// costs nothing of the look's budget, which then goes to the objects not
// judged yet. Without it each look would evaluate the same objects first,
// spend its budget on them, and leave the same others unjudged at every
// look, so that the add-on would never be Ready.
func (v *verifiedObjects) checkedCurrent(addon *capstanv1.Addon, key, resourceVersion string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	got, ok := v.m[client.ObjectKeyFromObject(addon)]
	if !ok || got.uid != addon.UID || resourceVersion == "" {
		return false
	}
	return got.checked[key] == checkedAt{resourceVersion, addon.Generation}
}

// markChecked records that the add-on's health check found an object
// Current at resourceVersion (checkedCurrent).
func (v *verifiedObjects) markChecked(addon *capstanv1.Addon, key, resourceVersion string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	got := v.entry(addon)
	if got.checked == nil {
		got.checked = map[string]checkedAt{}
	}
	got.checked[key] = checkedAt{resourceVersion, addon.Generation}
	v.m[client.ObjectKeyFromObject(addon)] = got
}

// note records one object as verified, after it was applied.
func (v *verifiedObjects) note(addon *capstanv1.Addon, key string, o plan.Verified) {
	v.mu.Lock()
	defer v.mu.Unlock()
	got := v.entry(addon)
	if got.objects == nil {
		got.objects = map[string]plan.Verified{}
	}
	got.objects[key] = o
	v.m[client.ObjectKeyFromObject(addon)] = got
}

// entry is what is recorded of the add-on, empty when nothing is or the
// Addon was made anew under its name; the caller holds v.mu, and stores
// it back.
func (v *verifiedObjects) entry(addon *capstanv1.Addon) verifiedAddon {
	if v.m == nil {
		v.m = map[types.NamespacedName]verifiedAddon{}
	}
	got, ok := v.m[client.ObjectKeyFromObject(addon)]
	if !ok || got.uid != addon.UID {
		got = verifiedAddon{uid: addon.UID}
	}
	return got
}

// markHealthy records that a verified workload was ready at
// resourceVersion. A workload whose status moves gets a new
// resourceVersion, and is read again.
func (v *verifiedObjects) markHealthy(addon *capstanv1.Addon, key, resourceVersion string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	got, ok := v.m[client.ObjectKeyFromObject(addon)]
	if !ok || got.uid != addon.UID {
		return
	}
	if o, ok := got.objects[key]; ok && o.ResourceVersion == resourceVersion {
		o.Healthy = true
		got.objects[key] = o
	}
}

func (v *verifiedObjects) forget(key types.NamespacedName) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.m, key)
}
