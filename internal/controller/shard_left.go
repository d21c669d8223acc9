package controller

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// errLeftShard ends a reconcile whose Addon left this controller's shard
// while it ran: its status is the new shard's to write.
var errLeftShard = errors.New("the Addon left this controller's shard (--watch-label-selector) during the reconcile; the shard that now selects it reconciles it")

// leftShard reports whether the scope's Addon has left this controller's
// shard since the reconcile read it, and if so forgets it (once). Reconcile
// checks the selector when it starts; a sync runs for minutes, and an
// Addon relabelled meanwhile is reconciled by the new shard at once, so
// every status write checks again and is skipped once the Addon is gone:
// the old shard forgets it without writing to it. The cache answers (no
// request): an Addon relabelled out of the shard leaves the label-filtered
// cache; only then the API server is asked, to tell that from a deletion.
// NOTE: a relabel between this check and the write still lets one write
// through; the merge patch carries no resourceVersion, so closing that
// window would need optimistic locking on every status write.
func (r *AddonReconciler) leftShard(ctx context.Context, s *scope) bool {
	if s.leftShard {
		return true
	}
	if r.Config.Selector == nil || r.Config.Selector.Empty() {
		return false
	}
	key := types.NamespacedName{Namespace: s.addon.Namespace, Name: s.addon.Name}
	cur := &capstanv1.Addon{}
	err := r.Client.Get(ctx, key, cur)
	if apierrors.IsNotFound(err) && r.APIReader != nil {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = r.APIReader.Get(rctx, key, cur)
		cancel()
	}
	if err != nil || r.Config.Selects(cur.Labels) {
		// NOTE: an Addon that cannot be read now, or is gone, is written
		// as before: the write fails or does nothing.
		return false
	}
	logf.FromContext(ctx).Info("The Addon left this controller's shard during the reconcile; its status is not written",
		"selector", r.Config.Selector.String())
	s.leftShard = true
	r.warned.Delete(key)
	r.forget(key)
	return true
}
