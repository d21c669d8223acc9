package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// waveLook is one look at the objects a wave waits for.
type waveLook struct {
	// left are the objects that are not Current, and notCurrent why.
	left       []*unstructured.Unstructured
	notCurrent []string
	kinds      []schema.GroupVersionKind
	// failed says why an object failed, when one did and its failure
	// counts now.
	failed string
}

// failedGrace is how long an object this sync applied may look failed
// before the wait takes it for a failure: a status that no
// observedGeneration ties to a generation may still describe the object
// as it was before the apply, which may have fixed it.
const failedGrace = 30 * time.Second

// lookAtWave reads each of objs from the API server and judges it as the
// health step does (kstatus, or spec.healthChecks). A failed object
// counts as failed unless changed holds it and grace is true.
func (r *AddonReconciler) lookAtWave(ctx context.Context, s *scope, objs []*unstructured.Unstructured, changed map[*unstructured.Unstructured]bool, grace bool) (waveLook, error) {
	var look waveLook
	for _, obj := range objs {
		live, err := s.applier.Get(ctx, capstanv1.RefOf(obj))
		if err != nil {
			return look, err
		}
		current, failed, why, err := objectHealth(obj, live, s.checks)
		if err != nil {
			return look, err
		}
		if failed && !(grace && changed[obj]) {
			look.failed = why
			return look, nil
		}
		if !current {
			look.left = append(look.left, obj)
			look.notCurrent = append(look.notCurrent, why)
			look.kinds = append(look.kinds, obj.GroupVersionKind())
		}
	}
	return look, nil
}

// awaitWave holds a sync before it applies wave until every one of objs,
// the objects of the waves before it, is Current, as the health step
// judges them. It reads each object from the API server until it is
// Current, and shows a wait that lasts in status.wave.
//
// When the sync has applied nothing yet (nothingApplied), one look is all:
// if the objects are not all Current, the sync ends waiting for them
// (waveDeferred), holding no worker, and the next one plans again, to the
// same plan. Otherwise the sync waits within itself, as for a running
// hook, since the plan was approved whole and a later sync would plan only
// what is left: up to spec.healthTimeout, or plan.DefaultWaveTimeout when
// unset, for each wave. An object that failed, the timeout, or a change to
// the Addon (a new generation, a pause, its deletion) ends the wait with
// the waves from this one on not applied. The next sync waits again for
// the objects that are still not Current, changed or not.
func (r *AddonReconciler) awaitWave(ctx context.Context, s *scope, wave int32, objs []*unstructured.Unstructured,
	changed map[*unstructured.Unstructured]bool, nothingApplied bool) error {
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
		look, err := r.lookAtWave(ctx, s, left, changed, time.Since(start) < failedGrace)
		if err != nil {
			return err
		}
		if look.failed != "" {
			return terminal{fmt.Errorf("wave %d and the waves after it are not applied, since an object of a wave before it failed: %s", wave, look.failed)}
		}
		left = look.left
		if len(left) == 0 {
			return nil
		}
		list := notCurrentList(look.notCurrent)
		if nothingApplied {
			return r.deferWave(s, wave, look)
		}
		if s.addon.Status.Wave == nil && time.Since(start) >= time.Second {
			// NOTE: only a wait that lasts is written: most waves of an
			// install are Current at once or within a second.
			r.showWave(ctx, s, &capstanv1.WaveProgress{Wave: wave, Waiting: truncate(s.mask().String(list), 1000), Since: metav1.NewTime(start)})
		}
		if waited := time.Since(start); waited > timeout {
			return terminal{fmt.Errorf("wave %d and the waves after it are not applied: the waves before it are not Current after %s (spec.healthTimeout, %s when unset, for each wave): %s",
				wave, waited.Round(time.Second), plan.DefaultWaveTimeout, list)}
		}
		if err := r.addonUnchanged(ctx, s); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
		poll = min(poll*2, most)
	}
}

// waveDeferred ends a sync that applied nothing, to wait for the waves
// before wave, as the health step waits: by requeueing.
type waveDeferred struct {
	wave  int32
	what  string
	kinds []schema.GroupVersionKind
}

func (d *waveDeferred) Error() string { return d.what }

// deferWave ends a sync whose first wave to apply waits, unless
// spec.healthTimeout has passed since the last apply.
func (r *AddonReconciler) deferWave(s *scope, wave int32, look waveLook) error {
	list := notCurrentList(look.notCurrent)
	if t, at := s.addon.Spec.HealthTimeout, s.addon.Status.LastAppliedTime; t != nil && at != nil {
		if since := time.Since(at.Time); since > t.Duration {
			return terminal{fmt.Errorf("wave %d and the waves after it are not applied: the waves before it are not Current %s after the last apply (spec.healthTimeout %s): %s",
				wave, since.Round(time.Second), t.Duration, list)}
		}
	}
	return &waveDeferred{wave: wave, kinds: look.kinds,
		what: fmt.Sprintf("wave %d waits for the waves before it, with nothing of this sync applied yet: waiting for %s", wave, list)}
}

// errAddonChanged ends a wait whose sync the Addon has outgrown: the next
// reconcile, which the change queued, plans again or removes it.
var errAddonChanged = errors.New("the Addon changed, was paused or is being deleted while the sync waited for a wave")

// addonUnchanged reads the Addon from the controller's cache, at no cost
// to the API server, and fails when its spec is newer than this sync's,
// it is paused, or it is being deleted.
func (r *AddonReconciler) addonUnchanged(ctx context.Context, s *scope) error {
	now := &capstanv1.Addon{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(s.addon), now); apierrors.IsNotFound(err) {
		return errAddonChanged
	} else if err != nil {
		return err
	}
	// NOTE: newer, not other: a cache that lags behind the read this sync
	// started from holds an older generation.
	if now.UID != s.addon.UID || now.Generation > s.addon.Generation || !now.DeletionTimestamp.IsZero() ||
		now.Annotations[capstanv1.PausedAnnotation] == "true" {
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

// endedByWave turns the ends of a sync that waits for a wave into what the
// reconcile reports: a deferred wave waits as workloads do, and a sync
// the Addon outgrew ends with no status of its own, since the reconcile
// the change queued writes one. It reports false for any other error.
func (r *AddonReconciler) endedByWave(ctx context.Context, s *scope, err error) bool {
	var d *waveDeferred
	switch {
	case errors.As(err, &d):
		s.found.waitingFor = d.what
		s.requeueSoon(r.Config.HealthPoll)
		r.watchKinds(ctx, s, d.kinds)
		return true
	case errors.Is(err, errAddonChanged):
		return true
	}
	return false
}

// dryRunWaitsForWave reports whether a plan fails only because objects of
// a later wave call webhooks that do not answer yet, while the objects of
// the waves before them are not Current: an operator's webhook, in wave 0,
// whose custom resources are in wave 1. Such a plan waits for the earlier
// waves, as the apply would, instead of failing. Once they are Current,
// or when one of them failed, the dry run's error stands.
func (r *AddonReconciler) dryRunWaitsForWave(ctx context.Context, s *scope) (bool, error) {
	first, refused := int32(0), false
	for i, obj := range s.objects {
		msg := s.previews[i].Error
		if msg == "" {
			continue
		}
		if !webhookUnreachable(msg) {
			return false, nil
		}
		if w := apply.Wave(obj); !refused || w < first {
			first, refused = w, true
		}
	}
	if !refused {
		return false, nil
	}
	var before []*unstructured.Unstructured
	for _, obj := range s.objects {
		if apply.Wave(obj) < first {
			before = append(before, obj)
		}
	}
	if len(before) == 0 {
		return false, nil
	}
	if t, at := s.addon.Spec.HealthTimeout, s.addon.Status.LastAppliedTime; t != nil && at != nil && time.Since(at.Time) > t.Duration {
		return false, nil
	}
	look, err := r.lookAtWave(ctx, s, before, nil, false)
	if err != nil || look.failed != "" || len(look.left) == 0 {
		return false, err
	}
	s.found.waitingFor = fmt.Sprintf("the dry run of wave %d calls a webhook that does not answer yet, so it waits for the waves before it: waiting for %s",
		first, notCurrentList(look.notCurrent))
	s.requeueSoon(r.Config.HealthPoll)
	r.watchKinds(ctx, s, look.kinds)
	return true, nil
}

// webhookUnreachable reports whether a dry run's error is the API server
// failing to call an admission or conversion webhook, as opposed to a
// webhook that answered and refused.
func webhookUnreachable(msg string) bool {
	return strings.Contains(msg, "failed calling webhook") || strings.Contains(msg, "conversion webhook for")
}
