package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/plan"
)

// waveViolations refuses, in the plan, an object whose sync wave
// annotation is not a whole number: applied in wave 0 it could run before
// what it was meant to wait for. It is a violation, not an error, so that
// an uninstall, which renders to find its delete hooks, never stops at it.
func waveViolations(objs []*unstructured.Unstructured) []capstanv1.Violation {
	var out []capstanv1.Violation
	for _, obj := range objs {
		if _, err := apply.WaveOf(obj); err != nil {
			key := apply.WaveAnnotation
			if _, ok := obj.GetAnnotations()[key]; !ok {
				key = apply.ArgoWaveAnnotation
			}
			out = append(out, capstanv1.Violation{Object: capstanv1.RefOf(obj), Path: "metadata.annotations." + key, Rule: RuleSyncWave, Message: err.Error()})
		}
	}
	return out
}

// RuleSyncWave names the violation of a sync wave that is not a number.
const RuleSyncWave = "sync-wave"

// awaitWave holds a sync before it applies wave until every one of objs,
// the objects of the waves before it, is Current, as the health step
// judges them (kstatus, or spec.healthChecks). It reads each object from
// the API server until it is Current, and shows the wait in status.wave.
//
// It waits inside the sync, as a running hook does, since the plan was
// approved whole and a later sync would plan only what is left: up to
// spec.healthTimeout, or plan.DefaultWaveTimeout when unset. An object
// that fails, the timeout, or a change to the Addon (a new generation, or
// its deletion) stops the sync with the waves from this one on not
// applied; the next sync waits again for the objects that are still not
// Current, changed or not.
func (r *AddonReconciler) awaitWave(ctx context.Context, s *scope, wave int32, objs []*unstructured.Unstructured) error {
	timeout := plan.DefaultWaveTimeout
	if t := s.addon.Spec.HealthTimeout; t != nil && t.Duration > 0 {
		timeout = t.Duration
	}
	start := time.Now()
	// NOTE: cleared in the status the reconcile writes at its end, or at
	// its next checkpoint; a write of its own would cost a request for a
	// field that is gone a moment later.
	defer func() { s.addon.Status.Wave = nil }()
	poll, most := 100*time.Millisecond, min(r.Config.HealthPoll, 2*time.Second)
	left := objs
	for {
		var notCurrent []string
		var next []*unstructured.Unstructured
		for _, obj := range left {
			live, err := s.applier.Get(ctx, capstanv1.RefOf(obj))
			if err != nil {
				return err
			}
			current, failed, why, err := objectHealth(obj, live, s.checks)
			if err != nil {
				return err
			}
			if failed {
				return terminal{fmt.Errorf("wave %d and the waves after it are not applied, since an object of a wave before it failed: %s", wave, why)}
			}
			if !current {
				notCurrent = append(notCurrent, why)
				next = append(next, obj)
			}
		}
		left = next
		if len(left) == 0 {
			return nil
		}
		list := notCurrentList(notCurrent)
		if s.addon.Status.Wave == nil {
			r.showWave(ctx, s, &capstanv1.WaveProgress{Wave: wave, Waiting: truncate(s.mask().String(list), 1000), Since: metav1.NewTime(start)})
		}
		if waited := time.Since(start); waited > timeout {
			return terminal{fmt.Errorf("wave %d and the waves after it are not applied: the waves before it are not Current after %s (spec.healthTimeout, %s when unset): %s",
				wave, waited.Round(time.Second), plan.DefaultWaveTimeout, list)}
		}
		if err := r.addonUnchanged(ctx, s); err != nil {
			return fmt.Errorf("wave %d and the waves after it are not applied: %w", wave, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
		poll = min(poll*2, most)
	}
}

// errAddonChanged stops a wait whose sync the Addon's spec has outgrown.
var errAddonChanged = errors.New("the Addon changed or is being deleted while the sync waited; the next sync plans again")

// addonUnchanged reads the Addon from the controller's cache, at no cost
// to the API server, and fails when its spec changed since this sync read
// it, or it is being deleted.
func (r *AddonReconciler) addonUnchanged(ctx context.Context, s *scope) error {
	now := &capstanv1.Addon{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(s.addon), now); apierrors.IsNotFound(err) {
		return errAddonChanged
	} else if err != nil {
		return err
	}
	if now.Generation != s.addon.Generation || !now.DeletionTimestamp.IsZero() || now.UID != s.addon.UID {
		return errAddonChanged
	}
	return nil
}

// showWave writes the wave that waits into status at once, so that a long
// wait is visible while it lasts.
func (r *AddonReconciler) showWave(ctx context.Context, s *scope, p *capstanv1.WaveProgress) {
	s.addon.Status.Wave = p
	_ = r.checkpointStatus(ctx, s)
}
