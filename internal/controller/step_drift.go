package controller

import (
	"context"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// reasonDriftFought is the Ready reason, and the event reason, of drift that
// keeps coming back.
const reasonDriftFought = "DriftFought"

// driftPacer paces the undoing of drift. An object whose drift keeps
// coming back, because another controller owns a field the chart also sets
// (an autoscaler's replicas, an injected caBundle), would otherwise be
// undone every few seconds, each time with a render, dry runs and an apply.
// After each undo of an object, the next undo of that object waits twice
// as long as the last pause, from twice Delay up to MaxDelay (the resync
// interval), where it stays while the fight goes on. Twice MaxDelay after
// its last undo an object starts afresh.
type driftPacer struct {
	Delay, MaxDelay time.Duration

	mu      sync.Mutex
	history map[string]undoHistory // by add-on and ObjectRef.Key
}

// undoHistory counts the undos of one object's drift that came soon one
// after the other.
type undoHistory struct {
	times int
	last  time.Time
}

func (p *driftPacer) window() time.Duration { return 2 * max(p.MaxDelay, p.Delay) }

// historyKey names one object of one add-on in the pacer's history.
func historyKey(addon types.NamespacedName, ref capstanv1.ObjectRef) string {
	return addon.String() + "|" + ref.Key()
}

// wait returns how long the drift of refs, objects of addon, must wait
// before it is undone, and the object that waits least. It waits only when
// every one of them is paced: drift of an object not fought is undone at
// once, and the fought ones with it.
func (p *driftPacer) wait(addon types.NamespacedName, refs []capstanv1.ObjectRef, now time.Time) (time.Duration, capstanv1.ObjectRef) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var least time.Duration
	var which capstanv1.ObjectRef
	for _, ref := range refs {
		h := p.history[historyKey(addon, ref)]
		if h.times == 0 || now.Sub(h.last) > p.window() {
			return 0, capstanv1.ObjectRef{}
		}
		pause := doubling(p.Delay, min(h.times, 16), max(p.MaxDelay, p.Delay))
		w := h.last.Add(pause).Sub(now)
		if w <= 0 {
			return 0, capstanv1.ObjectRef{}
		}
		if least == 0 || w < least {
			least, which = w, ref
		}
	}
	return least, which
}

// record notes that the drift of refs was undone, and returns how many
// times in a row the most fought of them has now been undone, and which.
func (p *driftPacer) record(addon types.NamespacedName, refs []capstanv1.ObjectRef, now time.Time) (times int, which capstanv1.ObjectRef) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.history == nil {
		p.history = map[string]undoHistory{}
	}
	for k, h := range p.history {
		if now.Sub(h.last) > p.window() {
			delete(p.history, k)
		}
	}
	for _, ref := range refs {
		k := historyKey(addon, ref)
		h := p.history[k]
		h.times++
		h.last = now
		p.history[k] = h
		if h.times > times {
			times, which = h.times, ref
		}
	}
	return times, which
}

// forget drops what the pacer knows of an add-on that is gone.
func (p *driftPacer) forget(addon types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prefix := addon.String() + "|"
	for k := range p.history {
		if strings.HasPrefix(k, prefix) {
			delete(p.history, k)
		}
	}
}

// paceDrift is the pipeline step that paces a sync which only undoes drift:
// the render is the one applied, no hook is pending, and no sync request
// asks for it. A sync that must wait ends OutOfSync with reason
// DriftFought, saying which object and when. Only changed objects are
// paced: a missing one is created again at once, the fought ones with it.
func (r *AddonReconciler) paceDrift(ctx context.Context, s *scope) (bool, error) {
	if s.lifecycle != LifecycleNone || s.addon.Status.AppliedHash != s.render.Hash || s.verdict.HandledSyncRequest {
		return false, nil
	}
	var refs []capstanv1.ObjectRef
	missing := false
	for _, p := range s.previews {
		switch p.Action {
		case capstanv1.ActionCreate:
			// NOTE: an autoscaler fights a field, not an object's being
			// there. A Deployment deleted after a long fight over its
			// replicas would otherwise wait up to the resync to come back,
			// where Argo CD's self-heal and Flux re-create it at their
			// next look.
			missing = true
		case capstanv1.ActionUpdate:
			refs = append(refs, p.Ref)
		}
	}
	if len(refs) == 0 || missing {
		s.driftUndo = refs
		return false, nil
	}
	wait, which := r.pacer.wait(client.ObjectKeyFromObject(s.addon), refs, time.Now())
	if wait <= 0 {
		s.driftUndo = refs
		return false, nil
	}
	wait = max(wait.Round(time.Second), time.Second)
	s.found.driftWait, s.found.driftFought = wait, which
	s.requeueAfter = wait
	return true, nil
}

// recordUndo is the pipeline step after a successful apply that undid
// drift: it counts the undo, and warns once, on the third undo in a row of
// the same object, with a DriftFought event.
func (r *AddonReconciler) recordUndo(ctx context.Context, s *scope) (bool, error) {
	if len(s.driftUndo) == 0 {
		return false, nil
	}
	times, which := r.pacer.record(client.ObjectKeyFromObject(s.addon), s.driftUndo, time.Now())
	if times == 3 && r.Recorder != nil {
		r.Recorder.Eventf(s.addon, nil, corev1.EventTypeWarning, reasonDriftFought, "Reconciling",
			"%s changed behind Capstan's back %d times in a row; another controller may own a field the chart sets (an autoscaler's replicas, an injected caBundle). Capstan now undoes it ever more slowly, up to every %s.",
			which.Describe(), times, max(r.pacer.MaxDelay, r.pacer.Delay))
	}
	return false, nil
}
