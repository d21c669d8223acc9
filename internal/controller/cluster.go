package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/remote"
	"capstan.dev/capstan/internal/render"
)

// targetCluster is a cluster an add-on's objects go to: the controller's
// own, or another one that spec.kubeConfig names. Everything that touches
// the objects goes through it (preview, apply, prune, hooks, health, the
// watch cache that finds drift), so an add-on works the same in either.
type targetCluster struct {
	appliers map[capstanv1.Profile]*apply.Applier
	mapper   apimeta.RESTMapper
	// watched caches the metadata of the objects Capstan applied there;
	// nil outside a manager (`capstan plan`).
	watched    cache.Cache
	discoverer discovery.DiscoveryInterface
	// gaps are the resources the watch cache may not list or watch.
	gaps *watchGaps

	capsMu sync.Mutex
	caps   *render.Capabilities
	capsAt time.Time

	// server and as are a remote cluster's API server and the account
	// Capstan acts as there; empty for the controller's own cluster.
	server, as string
	// identity names a remote cluster and that account for the plan's
	// hash (remote.Config.Identity); empty for the controller's own.
	identity string
	// endpoint names a remote cluster alone, without the account, to tell
	// whether an inventory is in it (remote.Config.Endpoint); empty for
	// the controller's own.
	endpoint string
	// hash is the kubeconfig's, so a changed Secret builds a new client.
	hash   string
	cancel context.CancelFunc
}

// capabilities returns the cluster's Kubernetes version and API list, read
// by discovery at most once a minute, or at once after CRDs were applied.
func (c *targetCluster) capabilities(force bool) (*render.Capabilities, error) {
	c.capsMu.Lock()
	defer c.capsMu.Unlock()
	if c.caps != nil && !force && time.Since(c.capsAt) < time.Minute {
		return c.caps, nil
	}
	caps, err := render.CapabilitiesFromDiscovery(c.discoverer)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster's API list: %w", err)
	}
	c.caps, c.capsAt = caps, time.Now()
	return caps, nil
}

// kindScope looks up whether a kind is namespaced in the cluster.
func (c *targetCluster) kindScope(gvk schema.GroupVersionKind) (namespaced, known bool, err error) {
	namespaced, err = apiutil.IsGVKNamespaced(gvk, c.mapper)
	if apimeta.IsNoMatchError(err) {
		return false, false, nil
	}
	return namespaced, err == nil, err
}

// resourceOf returns the resource of a kind in the cluster; the zero
// GroupResource when the kind is unknown to it.
func (c *targetCluster) resourceOf(gvk schema.GroupVersionKind) schema.GroupResource {
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupResource{}
	}
	return m.Resource.GroupResource()
}

// remoteClusters keeps one targetCluster per kubeconfig, rebuilt when that
// kubeconfig changes and released when no Addon uses it any more.
type remoteClusters struct {
	mu   sync.Mutex
	by   map[remoteKey]*targetCluster
	uses remoteUses
}

// remoteUses records which kubeconfig each Addon's last reconcile selected,
// and how many Addons use each: a remote cluster is kept while one does.
// Its methods say which kubeconfig a change leaves unused; the caller
// releases that one's cluster.
type remoteUses struct {
	of    map[types.NamespacedName]remoteKey
	count map[remoteKey]int
}

// use records that addon now uses key. When the kubeconfig it used before
// is another, and no other Addon uses that one, it is returned, with true.
func (u *remoteUses) use(addon types.NamespacedName, key remoteKey) (remoteKey, bool) {
	if prev, ok := u.of[addon]; ok && prev == key {
		return remoteKey{}, false
	}
	unused, released := u.drop(addon)
	if u.of == nil {
		u.of, u.count = map[types.NamespacedName]remoteKey{}, map[remoteKey]int{}
	}
	u.of[addon] = key
	u.count[key]++
	return unused, released
}

// drop records that addon uses no remote cluster. When the kubeconfig it
// used is used by no other Addon, it is returned, with true.
func (u *remoteUses) drop(addon types.NamespacedName) (remoteKey, bool) {
	prev, ok := u.of[addon]
	if !ok {
		return remoteKey{}, false
	}
	delete(u.of, addon)
	u.count[prev]--
	if u.count[prev] > 0 {
		return remoteKey{}, false
	}
	delete(u.count, prev)
	return prev, true
}

// remoteKey names one kubeconfig: a key of a Secret. One Secret may hold
// the kubeconfigs of a whole fleet, one key each.
type remoteKey struct {
	types.NamespacedName
	Key string
}

// remoteKeyOf is the kubeconfig an add-on's spec.kubeConfig names.
//
// NOTE: keyed by the Secret's key too, not by the Secret alone: two add-ons
// of one Secret with different keys would otherwise replace each other's
// clients on every reconcile, cancelling the other's watch cache (drift
// watches restarting with full lists, a reconcile reading a stopped cache).
func remoteKeyOf(addon *capstanv1.Addon) remoteKey {
	ref := addon.Spec.KubeConfig
	return remoteKey{NamespacedName: types.NamespacedName{Namespace: addon.Namespace, Name: ref.SecretRef.Name}, Key: kubeConfigKey(ref)}
}

// kubeConfigKey is the Secret key ref reads: its own, or the default.
func kubeConfigKey(ref *capstanv1.KubeConfigReference) string {
	if ref.Key == "" {
		return kubeConfigDefaultKey
	}
	return ref.Key
}

// kubeConfigDefaultKey is the Secret key spec.kubeConfig reads when it
// names none.
const kubeConfigDefaultKey = "value"

// selectCluster points the scope at the cluster spec.kubeConfig names, and
// checks that it answers, but for an Addon whose deletion leaves its
// inventory in another cluster (leavesInventory). It is the pipeline's
// first step, so nothing is read from or written to the wrong cluster. A
// restricted add-on stays in this cluster; the guardrails refuse its
// spec.kubeConfig.
func (r *AddonReconciler) selectCluster(ctx context.Context, s *scope) (bool, error) {
	ref := s.addon.Spec.KubeConfig
	if s.cluster.server != "" {
		return false, nil
	}
	addon := types.NamespacedName{Namespace: s.addon.Namespace, Name: s.addon.Name}
	if ref == nil || s.profile != capstanv1.ProfileCluster {
		// An add-on that no longer names a kubeconfig (or may not use
		// one) lets go of the cluster it used.
		// NOTE: a restricted add-on's kubeconfig Secret is not even read
		// here. The remote-cluster guardrail refuses the field only
		// later (guard.CheckSpec, in Prepare); a read before it would
		// dial the server the Secret names with its credentials, on the
		// word of a tenant who may not read that Secret.
		r.releaseRemote(addon)
		return false, nil
	}
	data, err := r.secretKey(ctx, s, ref.SecretRef.Name, ref.Key, kubeConfigDefaultKey, "spec.kubeConfig")
	if err != nil {
		if classify(err) == classTerminal {
			// The Secret, or its key, is gone: the kubeconfig is no
			// more, and neither are the watches and credentials built
			// from it. An admin who deletes it to cut Capstan off from
			// a cluster gets that, not watches kept open there. An
			// Addon repointed to it lets go of the one it used before.
			r.dropRemote(addon, remoteKeyOf(s.addon))
		}
		return false, err
	}
	c, err := r.remoteCluster(addon, remoteKeyOf(s.addon), data)
	if err != nil {
		return false, terminal{fmt.Errorf("the kubeconfig in Secret %s/%s: %w", s.addon.Namespace, ref.SecretRef.Name, err)}
	}
	if leavesInventory(s, c) {
		// NOTE: the Addon is being deleted and its inventory is in
		// another cluster than c, which the kubeconfig's endpoint says
		// without a request: the uninstall deletes nothing in c and runs
		// no delete hook there, and leaves the former cluster as it is
		// (placeInventory, uninstall). So c need not answer, and an
		// unreachable c must not hold the deletion.
		s.cluster = c
		s.applier = c.appliers[capstanv1.ProfileCluster]
		return false, nil
	}
	// NOTE: one small request each time, so an unreachable cluster is
	// named as such, not as the step that happened to fail first.
	_, err = c.discoverer.ServerVersion()
	if err == nil {
		_, err = c.capabilities(false)
	}
	if err != nil {
		msg := err.Error()
		if netguard.IsRefused(err) {
			msg = strings.ReplaceAll(msg, "--fetch-allow", "--remote-cluster-allow")
		}
		return false, fmt.Errorf("cannot reach the remote cluster %s that spec.kubeConfig names: %s; Capstan retries, and changes and deletes nothing there or here meanwhile", c.server, msg)
	}
	s.cluster = c
	s.applier = c.appliers[capstanv1.ProfileCluster]
	return false, nil
}

// leavesInventory reports whether the deletion of the scope's Addon leaves
// its inventory where it is, in another cluster than c, the one its
// kubeconfig names now: nothing of the add-on was applied in c, so its
// uninstall has nothing to do there.
func leavesInventory(s *scope, c *targetCluster) bool {
	return !s.addon.DeletionTimestamp.IsZero() && inventoryMoved(&s.addon.Status, c.inventoryCluster())
}

// remoteCluster returns the remote cluster of a kubeconfig for an Addon,
// building its clients and metadata cache the first time and whenever the
// kubeconfig changes, and records that the Addon uses it: the cluster the
// Addon used before is released when no other Addon uses it.
//
// NOTE: an Addon's use changes only in its own reconcile (remoteCluster,
// releaseRemote), which the work queue never runs twice at once, and after
// it is done with the cluster it used before; and a use is recorded under
// the same lock that hands the cluster out. So a cluster released for want
// of Addons is used by no reconcile, and an Addon that names its kubeconfig
// again right after builds a new one, never gets the stopped one. A changed
// kubeconfig is another matter: the cluster it replaces is stopped at once,
// while a reconcile of another Addon of the same kubeconfig may still be
// using it. That reconcile reads what the stopped watch cache last held, or
// the API server for a kind it had not synced; the change of the Secret
// queues that Addon again (valuesRefIndex), and its next look uses the new
// cluster. A changed kubeconfig that is refused, or cannot be built, stops
// the cluster of the one it replaces all the same: whoever broke it may
// mean to cut Capstan off from that cluster, whose watches and credentials
// would otherwise live on.
func (r *AddonReconciler) remoteCluster(addon types.NamespacedName, key remoteKey, kubeconfig []byte) (*targetCluster, error) {
	sum := sha256.Sum256(kubeconfig)
	hash := hex.EncodeToString(sum[:])
	r.remotes.mu.Lock()
	defer r.remotes.mu.Unlock()
	// NOTE: recorded before the kubeconfig is checked: an Addon repointed
	// to a kubeconfig that is refused no longer uses the one it left.
	if unused, ok := r.remotes.uses.use(addon, key); ok {
		r.stopRemote(r.remotes.by[unused])
		delete(r.remotes.by, unused)
	}
	if c := r.remotes.by[key]; c != nil && c.hash == hash {
		return c, nil
	}
	c, err := r.buildRemote(kubeconfig)
	if err != nil {
		r.stopRemote(r.remotes.by[key])
		delete(r.remotes.by, key)
		return nil, err
	}
	c.hash = hash
	r.stopRemote(r.remotes.by[key])
	if r.remotes.by == nil {
		r.remotes.by = map[remoteKey]*targetCluster{}
	}
	r.remotes.by[key] = c
	return c, nil
}

// buildRemote checks a kubeconfig and builds the clients of the cluster it
// names, through the remote clusters' egress guard.
func (r *AddonReconciler) buildRemote(kubeconfig []byte) (*targetCluster, error) {
	guard, err := netguard.New(r.Config.RemoteGuard)
	if err != nil {
		return nil, err
	}
	cfg, err := remote.Load(kubeconfig, guard)
	if err != nil {
		return nil, err
	}
	c, err := r.newTargetCluster(cfg.Config, cfg.Server)
	if err != nil {
		return nil, err
	}
	c.server, c.as, c.identity, c.endpoint = cfg.Server, cfg.As, cfg.Identity(), cfg.Endpoint()
	return c, nil
}

// dropRemote stops and forgets the cluster built from a kubeconfig that is
// no more (its Secret or key deleted), which addon names. The Addons that
// name it still use it: it is built anew once it is back. The cluster addon
// used before is released when no other Addon uses it, as remoteCluster
// releases it.
//
// NOTE: an Addon repointed to a kubeconfig Secret that does not exist (yet,
// or misspelt) uses the one it left no more; kept, that cluster's watches
// would stay open, and its credentials in memory, for as long as the Addon
// lives.
func (r *AddonReconciler) dropRemote(addon types.NamespacedName, key remoteKey) {
	r.remotes.mu.Lock()
	defer r.remotes.mu.Unlock()
	if unused, ok := r.remotes.uses.use(addon, key); ok {
		r.stopRemote(r.remotes.by[unused])
		delete(r.remotes.by, unused)
	}
	r.stopRemote(r.remotes.by[key])
	delete(r.remotes.by, key)
}

// releaseRemote records that an Addon uses no remote cluster: it names
// none, or it is gone or no longer this controller's. The cluster it used
// is released when no other Addon uses it.
func (r *AddonReconciler) releaseRemote(addon types.NamespacedName) {
	r.remotes.mu.Lock()
	defer r.remotes.mu.Unlock()
	if unused, ok := r.remotes.uses.drop(addon); ok {
		r.stopRemote(r.remotes.by[unused])
		delete(r.remotes.by, unused)
	}
}

// stopRemote stops a remote cluster's watch cache (its informers' watches
// there, and their goroutines) and unhooks the drift handler from it; its
// clients go with the last reference. c may be nil.
func (r *AddonReconciler) stopRemote(c *targetCluster) {
	if c == nil {
		return
	}
	if c.cancel != nil {
		c.cancel()
	}
	if c.watched != nil {
		r.drift.unhook(c.watched)
	}
}

// newTargetCluster builds a remote cluster's clients, and a metadata cache
// of what Capstan applied there when the controller runs in a manager (the
// drift watch hangs on it as on the local one). cfg already impersonates
// the account the kubeconfig names, so one applier serves. server is its
// API server, redacted, for the cache's log lines.
func (r *AddonReconciler) newTargetCluster(cfg *rest.Config, server string) (*targetCluster, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	cl, err := client.New(cfg, client.Options{HTTPClient: httpClient, Scheme: r.Client.Scheme(), Mapper: mapper})
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	applier := &apply.Applier{Client: cl, CRDTimeout: r.Config.CRDTimeout, Discovery: apply.Recent(disc)}
	c := &targetCluster{
		appliers:   map[capstanv1.Profile]*apply.Applier{capstanv1.ProfileCluster: applier},
		mapper:     mapper,
		discoverer: disc,
	}
	if r.drift != nil {
		// The cache's watches are long-lived requests: its client has no
		// whole-request time bound (see remote.WatchConfig).
		watchCfg := remote.WatchConfig(cfg)
		watchClient, err := rest.HTTPClientFor(watchCfg)
		if err != nil {
			return nil, err
		}
		c.gaps = &watchGaps{server: server}
		opts := watchedCacheOptions(r.Client.Scheme(), mapper, c.gaps)
		opts.HTTPClient = watchClient
		c.watched, err = cache.New(watchCfg, opts)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		c.cancel = cancel
		go func() { _ = c.watched.Start(ctx) }()
	}
	return c, nil
}
