package controller

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// HoldsRemoteCluster reports whether the reconciler holds the clients and
// watch cache of the kubeconfig in a key of a Secret, for the integration
// tests; an empty key is the default key.
func (r *AddonReconciler) HoldsRemoteCluster(namespace, secret, key string) bool {
	if key == "" {
		key = kubeConfigDefaultKey
	}
	r.remotes.mu.Lock()
	defer r.remotes.mu.Unlock()
	return r.remotes.by[remoteKey{NamespacedName: types.NamespacedName{Namespace: namespace, Name: secret}, Key: key}] != nil
}

// FillTenantShare takes every place of a namespace in the tenant share, for
// the integration tests, and returns what gives them back.
func (r *AddonReconciler) FillTenantShare(namespace string) (release func()) {
	taken := 0
	for r.share.limit > 0 && r.share.acquire(namespace) {
		taken++
	}
	return func() {
		for range taken {
			r.share.release(namespace)
		}
	}
}

// FailedGrace is how long after an apply a failed object is still waited
// for, for the integration tests that tell the wait from the failure.
const FailedGrace = failedGrace

// DependencyHold is why a waits for its dependencies (dependencyState):
// the condition's reason and message, and whether a person must act; an
// empty reason when it waits for none.
func (r *AddonReconciler) DependencyHold(ctx context.Context, a *capstanv1.Addon) (reason, message string, blocked bool, err error) {
	h, err := r.dependencyState(ctx, a)
	if h == nil || err != nil {
		return "", "", false, err
	}
	return h.reason, h.message, h.blocked, nil
}

// MasksHolding counts the masks the reconciler keeps that hide secret, for
// the integration tests.
func (r *AddonReconciler) MasksHolding(secret string) int {
	r.masks.mu.Lock()
	defer r.masks.mu.Unlock()
	n := 0
	for e := r.masks.lru.Front(); e != nil; e = e.Next() {
		if e.Value.(*maskEntry).m.Holds(secret) {
			n++
		}
	}
	return n
}

// objectDrifted reports whether one change is drift of an object the
// add-on verified, heard of from the watch cache of the cluster the add-on
// targets, for the tests of judgeChange.
func (r *AddonReconciler) objectDrifted(ctx context.Context, key types.NamespacedName, c change) bool {
	return r.judgeChange(ctx, key, c) == changeDrift
}

// SetDryRunGraceFor sets how long a dry run the API server could not take
// is retried before it is the object's refusal (plan.GraceFor, for zero),
// for the integration tests that cannot wait two minutes.
func (r *AddonReconciler) SetDryRunGraceFor(d time.Duration) { r.dryRunGrace.SetFor(d) }
