package controller

import (
	"context"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// newWatchedCache is a cache of the identity (name, namespace,
// resourceVersion and Capstan's labels; see keepIdentity) of every object
// Capstan applied, by its managed-by label. Informers start
// per kind the first time a kind is asked for. It watches as the add-ons
// account, which may read every kind an add-on renders. Secret data is
// never cached: the cache holds metadata only.
func newWatchedCache(mgr ctrl.Manager, cfg *rest.Config, user string, gaps *watchGaps) (cache.Cache, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return cache.New(cfg, watchedCacheOptions(mgr.GetScheme(), mgr.GetRESTMapper(), gaps))
}

// watchedCacheOptions are the watch cache's options, for this cluster's and
// each remote cluster's: what Capstan applied, metadata only, stripped to
// its identity; a resource it may not list or watch is recorded in gaps.
func watchedCacheOptions(scheme *runtime.Scheme, mapper apimeta.RESTMapper, gaps *watchGaps) cache.Options {
	return cache.Options{
		Scheme:                      scheme,
		Mapper:                      mapper,
		DefaultLabelSelector:        labels.SelectorFromSet(labels.Set{capstanv1.ManagedByLabel: "capstan"}),
		DefaultTransform:            keepIdentity,
		ReaderFailOnMissingInformer: true,
		DefaultWatchErrorHandler:    gaps.handler,
	}
}

// keepIdentity strips a cached object to what deciding Unchanged needs:
// its name, namespace, resourceVersion and Capstan's labels. Annotations go,
// so a Secret's last-applied-configuration, which can hold its data, is
// never cached.
func keepIdentity(obj any) (any, error) {
	m, err := apimeta.Accessor(obj)
	if err != nil {
		return obj, nil
	}
	kept := map[string]string{}
	for _, k := range []string{capstanv1.AddonLabel, capstanv1.AddonNamespaceLabel, capstanv1.ManagedByLabel} {
		if v, ok := m.GetLabels()[k]; ok {
			kept[k] = v
		}
	}
	m.SetLabels(kept)
	m.SetAnnotations(nil)
	m.SetManagedFields(nil)
	m.SetOwnerReferences(nil)
	m.SetFinalizers(nil)
	return obj, nil
}

// watchedVersions returns, from the watch cache, the resourceVersion of
// every object of this add-on of the rendered kinds, keyed by ObjectRef.Key. A
// kind whose informer has not synced yet (the first sync after a start, or
// a kind the account cannot watch, which s.watchGaps records for the
// plan's notice) is left out, and so read from the API server. It never
// waits for an informer.
func (r *AddonReconciler) watchedVersions(ctx context.Context, s *scope) map[string]string {
	watched := s.cluster.watched
	if watched == nil || len(s.addon.Status.Inventory) == 0 {
		return nil
	}
	out := map[string]string{}
	type slice struct {
		gvk       schema.GroupVersionKind
		namespace string
	}
	seen := map[slice]bool{}
	for _, o := range s.objects {
		gvk := o.GroupVersionKind()
		// NOTE: listed per namespace, the cache answers from its namespace
		// index, from the objects of that namespace; listed by labels
		// alone, it would go through every object of the kind that
		// Capstan applied, for every add-on, on every sync.
		at := slice{gvk, o.GetNamespace()}
		if seen[at] {
			continue
		}
		seen[at] = true
		probe := &metav1.PartialObjectMetadata{}
		probe.SetGroupVersionKind(gvk)
		inf, err := watched.GetInformer(ctx, probe, cache.BlockUntilSynced(false))
		if err != nil {
			continue
		}
		r.drift.hook(gvk, inf, watched)
		// NOTE: the resource is looked up only when a refusal may be
		// recorded for it: a synced informer stays synced, so on the
		// clean path no kind costs a RESTMapping.
		if !inf.HasSynced() {
			if gr := s.cluster.resourceOf(gvk); s.cluster.gaps.refused(gr) {
				s.watchGaps = append(s.watchGaps, gr)
			}
			continue
		}
		if s.cluster.gaps.refusedAny() {
			s.cluster.gaps.synced(s.cluster.resourceOf(gvk))
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		// The items are only read: no copy of them is needed.
		opts := []client.ListOption{client.MatchingLabels(s.addon.OwnerLabels()), client.UnsafeDisableDeepCopy}
		if at.namespace != "" {
			opts = append(opts, client.InNamespace(at.namespace))
		}
		if err := watched.List(ctx, list, opts...); err != nil {
			continue
		}
		for _, item := range list.Items {
			ref := refOf(gvk, item.Namespace, item.Name)
			out[ref.Key()] = item.ResourceVersion
		}
	}
	return out
}
