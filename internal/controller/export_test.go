package controller

import "k8s.io/apimachinery/pkg/types"

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
