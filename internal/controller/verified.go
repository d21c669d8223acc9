package controller

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// verifyTTL bounds how long a dry run's "unchanged" is trusted. Past it,
// the object is dry-run again, so what a resourceVersion cannot show (a
// CRD that gained a default, a new admission webhook) is caught too.
const verifyTTL = 30 * time.Minute

// verifiedObjects remembers, per add-on, the objects a server-side dry run
// last found unchanged: the digest of the manifest that was dry-run and the
// resourceVersion of the live object it was compared with. While both hold,
// the object is still unchanged, and a resync need not dry-run it again:
// any change to the live object, drift included, gives it a new
// resourceVersion. It lives in memory only; a restarted controller dry-runs
// everything once.
type verifiedObjects struct {
	mu sync.Mutex
	m  map[types.NamespacedName]verifiedAddon
}

type verifiedAddon struct {
	uid     types.UID
	objects map[string]verifiedObject
}

type verifiedObject struct {
	digest, resourceVersion string
	at                      time.Time
	// healthy is set when a workload was found ready at resourceVersion.
	healthy bool
}

// lookup returns what was verified for an add-on: nothing when the Addon
// is a new one of the same name.
func (v *verifiedObjects) lookup(addon *capstanv1.Addon) map[string]verifiedObject {
	v.mu.Lock()
	defer v.mu.Unlock()
	got, ok := v.m[client.ObjectKeyFromObject(addon)]
	if !ok || got.uid != addon.UID {
		return nil
	}
	return got.objects
}

// object returns what was verified of one object of an add-on.
func (v *verifiedObjects) object(addon types.NamespacedName, key string) (verifiedObject, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	o, ok := v.m[addon].objects[key]
	return o, ok
}

// store replaces what is verified for an add-on.
func (v *verifiedObjects) store(addon *capstanv1.Addon, objects map[string]verifiedObject) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m = map[types.NamespacedName]verifiedAddon{}
	}
	v.m[client.ObjectKeyFromObject(addon)] = verifiedAddon{uid: addon.UID, objects: objects}
}

// note records one object as verified, after it was applied.
func (v *verifiedObjects) note(addon *capstanv1.Addon, key string, o verifiedObject) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m = map[types.NamespacedName]verifiedAddon{}
	}
	k := client.ObjectKeyFromObject(addon)
	got, ok := v.m[k]
	if !ok || got.uid != addon.UID || got.objects == nil {
		got = verifiedAddon{uid: addon.UID, objects: map[string]verifiedObject{}}
		v.m[k] = got
	}
	got.objects[key] = o
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
	if o, ok := got.objects[key]; ok && o.resourceVersion == resourceVersion {
		o.healthy = true
		got.objects[key] = o
	}
}

func (v *verifiedObjects) forget(key types.NamespacedName) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.m, key)
}

// stillUnchanged reports whether an object verified unchanged still is:
// the manifest and the live resourceVersion are the same, and the check is
// recent enough.
func (o verifiedObject) stillUnchanged(digest, resourceVersion string, now time.Time) bool {
	return o.digest == digest && o.resourceVersion == resourceVersion && now.Sub(o.at) < verifyTTL
}

// readLabelled reads, with one label-selected List per kind and namespace,
// the live objects this add-on applied before, keyed by ObjectRef.Key. Only kinds
// with two or more rendered objects in a namespace are listed: for one, a
// Get costs the same. A List that fails (an unknown kind, a forbidden list)
// leaves its objects to be read one by one. Objects in skip need no read.
func readLabelled(ctx context.Context, s *scope, skip map[string]bool) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	if len(s.addon.Status.Inventory) == 0 {
		return out // a first install: nothing of ours runs yet
	}
	type group struct {
		gvk       schema.GroupVersionKind
		namespace string
	}
	counts := map[group]int{}
	for _, o := range s.objects {
		if !skip[capstanv1.RefOf(o).Key()] {
			counts[group{o.GroupVersionKind(), o.GetNamespace()}]++
		}
	}
	for g, n := range counts {
		if n < 2 {
			continue
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(g.gvk.GroupVersion().WithKind(g.gvk.Kind + "List"))
		err := s.applier.Client.List(ctx, list, client.InNamespace(g.namespace), client.MatchingLabels(s.addon.OwnerLabels()))
		if err != nil {
			continue
		}
		for i := range list.Items {
			item := &list.Items[i]
			item.SetGroupVersionKind(g.gvk)
			out[capstanv1.RefOf(item).Key()] = item
		}
	}
	return out
}
