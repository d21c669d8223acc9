package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// defaultClaimRelease bounds the wait for the StatefulSet controller to
// take up a StatefulSet's new claim retention policy, when the Applier
// sets no ClaimRelease.
const defaultClaimRelease = 30 * time.Second

var statefulSetGK = schema.GroupKind{Group: "apps", Kind: "StatefulSet"}

// DeletesClaims reports whether deleting live, a StatefulSet, would have
// the garbage collector delete its PersistentVolumeClaims with it: its
// persistentVolumeClaimRetentionPolicy.whenDeleted is Delete, so the
// StatefulSet controller makes it an owner of each claim it made.
// Capstan never deletes a claim, so before such a StatefulSet is pruned
// or uninstalled, its claims are released from it (releaseClaims).
func DeletesClaims(live *unstructured.Unstructured) bool {
	if live == nil || live.GroupVersionKind().GroupKind() != statefulSetGK {
		return false
	}
	p, _, _ := unstructured.NestedString(live.Object, "spec", "persistentVolumeClaimRetentionPolicy", "whenDeleted")
	return p == string(appsv1.DeletePersistentVolumeClaimRetentionPolicyType)
}

// errChangedWhileReleasing says that a StatefulSet changed, or was
// created anew, between its read and the release of its claims: the
// caller reads it again.
var errChangedWhileReleasing = errors.New("the StatefulSet changed while its claims were released")

// releaseClaims makes sure that no PersistentVolumeClaim is owned by the
// StatefulSet m (read by ref r), so that its delete takes no claim with
// it, and reports whether it changed anything (the StatefulSet, or a
// claim), which makes the caller read the StatefulSet again before its
// delete. Anything else it leaves at once.
//
// A StatefulSet whose whenDeleted retention policy is Delete is patched
// to Retain, with Capstan's field manager, bound to the resourceVersion
// read. Its controller then takes the owner references it put on the
// claims off again, but only those of pods that run and are ready: the
// claims of a pod that is not ready, or of an ordinal scaled away, keep
// them. So once the controller has seen the new policy (its
// status.observedGeneration reaches the StatefulSet's generation, and it
// no longer adds them), Capstan takes off the references that are left,
// each bound to the claim's resourceVersion. When the controller has not
// seen the policy within the Applier's ClaimRelease, the StatefulSet is
// not deleted: the error says so, and the next look tries again.
func (a *Applier) releaseClaims(ctx context.Context, r capstanv1.ObjectRef, m metav1.Object) (changed bool, err error) {
	set := &appsv1.StatefulSet{}
	switch err := a.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.Name}, set); {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading the StatefulSet, to keep its claims from its delete: %w", err)
	case set.UID != m.GetUID():
		return false, errChangedWhileReleasing
	case len(set.Spec.VolumeClaimTemplates) == 0:
		// NOTE: the StatefulSet controller owns only the claims it made
		// from the templates, which no update can add: nothing to list.
		return false, nil
	}
	owned, err := a.ownedClaims(ctx, set)
	if err != nil {
		return false, err
	}
	p := set.Spec.PersistentVolumeClaimRetentionPolicy
	deletes := p != nil && p.WhenDeleted == appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	if !deletes && len(owned) == 0 {
		return false, nil
	}
	if deletes {
		patch := client.MergeFromWithOptions(set.DeepCopy(), client.MergeFromWithOptimisticLock{})
		set.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
		switch err := a.Client.Patch(ctx, set, patch, client.FieldOwner(capstanv1.FieldManager)); {
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			return false, errChangedWhileReleasing
		case err != nil:
			return false, fmt.Errorf("setting its persistentVolumeClaimRetentionPolicy.whenDeleted to Retain, to keep its claims from its delete: %w", err)
		}
		changed = true
	}
	if err := a.awaitObserved(ctx, set); err != nil {
		return changed, err
	}
	if owned, err = a.ownedClaims(ctx, set); err != nil {
		return changed, err
	}
	for i := range owned {
		claim := &owned[i]
		patch := client.MergeFromWithOptions(claim.DeepCopy(), client.MergeFromWithOptimisticLock{})
		claim.SetOwnerReferences(slices.DeleteFunc(claim.GetOwnerReferences(), func(o metav1.OwnerReference) bool { return o.UID == set.UID }))
		switch err := a.Client.Patch(ctx, claim, patch, client.FieldOwner(capstanv1.FieldManager)); {
		case apierrors.IsNotFound(err):
		case apierrors.IsConflict(err):
			// NOTE: the controller took its reference off at the same
			// time, or someone changed the claim: the check below, or
			// the next try, reads it again.
		case err != nil:
			return changed, fmt.Errorf("taking the StatefulSet's owner reference off PersistentVolumeClaim %s, so that its delete does not delete the claim: %w", claim.Name, err)
		}
		changed = true
	}
	if owned, err = a.ownedClaims(ctx, set); err != nil {
		return changed, err
	}
	if len(owned) > 0 {
		return changed, fmt.Errorf("PersistentVolumeClaim %s is still owned by the StatefulSet, and would be deleted with it, so the StatefulSet is not deleted now; the next sync tries again", owned[0].Name)
	}
	return changed, nil
}

// ReleaseClaims makes sure, before obj (read by ref) is deleted with its
// dependents, that no PersistentVolumeClaim is owned by it, as the prune
// and the uninstall do (releaseClaims); it does nothing unless obj is a
// StatefulSet. changed reports that it changed the StatefulSet or a claim,
// or found the StatefulSet changed since obj was read: the caller reads it
// again, and binds its delete to that read.
func (a *Applier) ReleaseClaims(ctx context.Context, ref capstanv1.ObjectRef, obj metav1.Object) (changed bool, err error) {
	if !releases(ref, metav1.DeletePropagationBackground) {
		return false, nil
	}
	changed, err = a.releaseClaims(ctx, ref, obj)
	if errors.Is(err, errChangedWhileReleasing) {
		return true, nil
	}
	return changed, err
}

// ownedClaims lists the PersistentVolumeClaims in set's namespace that
// name set (by its UID) among their owners.
func (a *Applier) ownedClaims(ctx context.Context, set *appsv1.StatefulSet) ([]corev1.PersistentVolumeClaim, error) {
	var list corev1.PersistentVolumeClaimList
	if err := a.Client.List(ctx, &list, client.InNamespace(set.Namespace)); err != nil {
		return nil, fmt.Errorf("listing the PersistentVolumeClaims of the StatefulSet, to keep them from its delete: %w", err)
	}
	return slices.DeleteFunc(list.Items, func(c corev1.PersistentVolumeClaim) bool {
		return !slices.ContainsFunc(c.GetOwnerReferences(), func(o metav1.OwnerReference) bool { return o.UID == set.UID })
	}), nil
}

// awaitObserved waits, within the Applier's ClaimRelease, until the
// StatefulSet controller has seen set's generation (the one set holds,
// which its patch returned): from then on, it adds no owner reference to
// a claim that the policy set holds does not ask for.
func (a *Applier) awaitObserved(ctx context.Context, set *appsv1.StatefulSet) error {
	timeout := a.ClaimRelease
	if timeout <= 0 {
		timeout = defaultClaimRelease
	}
	generation, uid := set.Generation, set.UID
	err := wait.PollUntilContextTimeout(ctx, a.poll()/4, timeout, true, func(ctx context.Context) (bool, error) {
		cur := &appsv1.StatefulSet{}
		switch err := a.Client.Get(ctx, client.ObjectKeyFromObject(set), cur); {
		case apierrors.IsNotFound(err):
			return false, errChangedWhileReleasing
		case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
			// NOTE: no wait makes it readable; said as it is, not as a
			// StatefulSet controller that is slow.
			return false, fmt.Errorf("reading the StatefulSet, to see its controller take up the claim retention policy Retain: %w", err)
		case err != nil:
			return false, nil
		case cur.UID != uid:
			return false, errChangedWhileReleasing
		}
		return cur.Status.ObservedGeneration >= generation, nil
	})
	switch {
	case err == nil, errors.Is(err, errChangedWhileReleasing), apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return err
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("the StatefulSet controller did not take up the StatefulSet's claim retention policy Retain within %s, so the StatefulSet is not deleted now, since its claims could go with it; the next sync tries again", timeout)
}
