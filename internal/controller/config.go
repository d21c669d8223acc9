// Package controller reconciles Addons. The reconciler is a thin pipeline:
// it reads the Addon, defers one status patch, handles pause and deletion,
// then runs small steps over a scope. The work itself lives in the source,
// render, values, guard, plan, apply and hooks packages.
package controller

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/render"
)

// Config is the controller's configuration, from the command line.
type Config struct {
	// Namespace is the controller's own namespace.
	Namespace string
	// TrustedNamespaces use the cluster profile; every other namespace the
	// restricted profile. Empty means the controller's own namespace.
	TrustedNamespaces []string
	// AddonsServiceAccount is the account cluster-profile add-ons are applied
	// as, by impersonation, in the controller's namespace.
	AddonsServiceAccount string
	// PlatformKey is the reserved values key; empty means "capstan".
	PlatformKey string
	// PlatformConfigMap names a ConfigMap in the controller's namespace whose
	// data are the platform's facts. Empty means none.
	PlatformConfigMap string
	// ResyncInterval is how often an add-on is reconciled without a change.
	ResyncInterval time.Duration
	// HookTimeout is the default bound of one Helm hook.
	HookTimeout time.Duration
	// CRDTimeout bounds the wait for new CRDs to become Established.
	CRDTimeout time.Duration
	// DriftDelay is how long after an applied object is changed or deleted
	// behind Capstan's back its add-on is reconciled. Zero means 5 seconds;
	// a negative value leaves drift to the resync.
	DriftDelay time.Duration
	// HookWait is how long one reconcile waits for a Job or Pod hook that
	// still runs. Past it, the reconcile ends and frees its worker; the
	// add-on is looked at again when the hook's object changes, or after
	// the health poll, and each look reads only the hook until it has
	// finished. Zero means 2 seconds (defaultHookWait); a negative value
	// waits within the reconcile until the hook ends.
	HookWait time.Duration
	// HealthPoll is how soon an add-on whose workloads are not yet ready is
	// looked at again. Zero or less means 5 seconds (defaultHealthPoll).
	HealthPoll time.Duration
	// PruneApprovalThreshold is the share of an add-on's inventory one sync
	// may prune without an approval. Zero means 0.5; 1 turns the gate off.
	PruneApprovalThreshold float64
	// MaxObjects bounds the objects (hooks included) one add-on may
	// render. Zero means DefaultMaxObjects.
	MaxObjects int
	// RemoteGuard is the egress guard of remote clusters' API servers:
	// spec.kubeConfig may only reach what it lets through.
	RemoteGuard netguard.Config
	// Selector is the shard's label selector (--watch-label-selector):
	// the controller reconciles only the Addons it matches. Nil matches
	// every Addon.
	Selector labels.Selector
	// MaxConcurrentPerTenant is the most reconciles of one
	// restricted-profile namespace that run at once (--max-concurrent-per-tenant);
	// a reconcile past it is deferred, and cluster-profile add-ons are never
	// counted. Zero turns the share off; a negative number means a quarter
	// of the workers, at least 1 (tenantShareLimit).
	MaxConcurrentPerTenant int
	// Sandbox runs chart templates in worker processes bounded in time and
	// memory, since a template can loop for ever. Nil renders in the
	// controller's process, unbounded.
	Sandbox *render.Sandbox
}

// DefaultMaxObjects is how many objects one add-on may render by default.
// Every object costs a dry run, an apply, an inventory entry and status
// space; an add-on past this is a chart gone wrong (a values typo in a
// range) or one that should be several add-ons, and the bound keeps one
// such chart from starving the controller and the API server.
const DefaultMaxObjects = 5000

// defaultHookWait is the hook wait when the Config sets none: most Jobs
// that finish at once finish within it, in the reconcile that made them.
const defaultHookWait = 2 * time.Second

// defaultHealthPoll is the health poll when the Config sets none.
const defaultHealthPoll = 5 * time.Second

// WithDefaults fills in what was left empty.
func (c Config) WithDefaults() Config {
	if c.Namespace == "" {
		c.Namespace = "capstan-system"
	}
	if len(c.TrustedNamespaces) == 0 {
		c.TrustedNamespaces = []string{c.Namespace}
	}
	if c.AddonsServiceAccount == "" {
		c.AddonsServiceAccount = install.AddonsServiceAccount
	}
	if c.ResyncInterval <= 0 {
		c.ResyncInterval = 5 * time.Minute
	}
	if c.HookTimeout <= 0 {
		c.HookTimeout = 10 * time.Minute
	}
	if c.DriftDelay == 0 {
		c.DriftDelay = 5 * time.Second
	}
	if c.CRDTimeout <= 0 {
		c.CRDTimeout = time.Minute
	}
	if c.HealthPoll <= 0 {
		c.HealthPoll = defaultHealthPoll
	}
	if c.HookWait == 0 {
		c.HookWait = defaultHookWait
	}
	if c.PruneApprovalThreshold <= 0 {
		c.PruneApprovalThreshold = 0.5
	}
	if c.MaxObjects <= 0 {
		c.MaxObjects = DefaultMaxObjects
	}
	return c
}

// Profile decides an Addon's profile from its namespace. The Addon's author
// never chooses it.
func (c Config) Profile(addon *capstanv1.Addon) capstanv1.Profile {
	return c.profileOf(addon.Namespace)
}

// profileOf is the profile of the Addons of a namespace.
func (c Config) profileOf(namespace string) capstanv1.Profile {
	if slices.Contains(c.TrustedNamespaces, namespace) {
		return capstanv1.ProfileCluster
	}
	return capstanv1.ProfileRestricted
}

// Selects reports whether an Addon with these labels is this
// controller's to reconcile: the manager's cache holds only those, but a
// key can come from elsewhere (an Addon that just left the shard, whose
// DELETE event the label-filtered cache sends, or a dependsOn naming an
// Addon of another shard), and the API server, which answers when the
// cache does not, sees every Addon.
func (c Config) Selects(addonLabels map[string]string) bool {
	return c.Selector == nil || c.Selector.Matches(labels.Set(addonLabels))
}

// Shard is the value of the shard label (capstan.dev/shard) that the
// selector requires of every Addon it selects, when it requires one value
// alone (capstan.dev/shard=a, == a, or in (a)), as the chart's shard makes
// it; "" otherwise. An Addon this controller creates for a person carries
// it, as the syncer hands a repository's label on to its Addons.
func (c Config) Shard() string {
	if c.Selector == nil {
		return ""
	}
	reqs, _ := c.Selector.Requirements()
	for _, r := range reqs {
		if r.Key() != gitops.ShardLabel {
			continue
		}
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			if v := r.Values(); v.Len() == 1 {
				return v.UnsortedList()[0]
			}
		}
	}
	return ""
}

// AddonsUser is the user name of the impersonated add-ons service account.
func (c Config) AddonsUser() string {
	return "system:serviceaccount:" + c.Namespace + ":" + c.AddonsServiceAccount
}

// ClientOptions are the options the manager's client needs: Secrets and
// ConfigMaps are read from the API server, never from a cache, so no Secret
// data is held in the controller's memory. (The watches that map a values
// object to its Addons read metadata only.)
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}}
}

// CacheTransform trims what the manager's cache keeps of every object:
// managed fields, which nothing reads from the cache, and, of the Secrets
// and ConfigMaps it watches by metadata only, their annotations too. The
// cache is there to map a values object to the Addons that read it, by name;
// a Secret's annotations can hold its data (kubectl's
// last-applied-configuration), and at a thousand add-ons the metadata of
// every Secret and ConfigMap in the cluster is most of what it holds.
func CacheTransform(obj any) (any, error) {
	m, err := apimeta.Accessor(obj)
	if err != nil {
		return obj, nil
	}
	m.SetManagedFields(nil)
	if _, ok := obj.(*metav1.PartialObjectMetadata); ok {
		m.SetAnnotations(nil)
	}
	return obj, nil
}
