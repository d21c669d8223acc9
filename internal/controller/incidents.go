package controller

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/notify"
)

// An incident receiver (PagerDuty, Opsgenie) hears of an add-on's warning
// once, as a trigger, and of its recovery once, as a close; the notifier
// retries either until it is delivered, but only while the process lives.
// A controller that restarts, or a leader that hands over, with either
// still to be sent would leave a failure that lasts unpaged, or an
// incident open for good. So what the next process needs to send them
// again lives in the Addon's status, and the reconciler remembers, per
// process, what it has sent:
//
//   - An add-on in a warning phase (Failed, Blocked, Degraded) that this
//     process has not triggered yet, its first reconcile here finding it
//     so with no transition, is triggered again, to the incident
//     receivers only: the same incident key folds it into the open
//     incident, or opens it anew when someone resolved it by hand.
//   - A Synced add-on keeps status.warningSince while an incident
//     receiver takes its close, until the notifier reports the close
//     delivered (notify.Notifier.Closed); the status write after that
//     clears it. One found Synced with warningSince that this process has
//     sent no close for is closed again, once.
//
// Neither touches an add-on that never was in a warning: a healthy
// install carries no warningSince, and sends and writes nothing more.

// incidentMemory is what the reconciler remembers, in this process, of
// the incidents of its add-ons.
type incidentMemory struct {
	// triggered holds, by types.NamespacedName, the add-ons in a warning
	// whose trigger this process sent: the notifier queued it.
	triggered sync.Map
	// closes holds, by types.NamespacedName, the close this process sent
	// (queued) last of a Synced add-on that keeps status.warningSince
	// (closeSent).
	closes sync.Map
}

// closeSent is an add-on's close: the time of its event, which names it,
// and whether the notifier reported it delivered.
type closeSent struct {
	at        time.Time
	delivered bool
}

// forget drops what the memory holds of an add-on that is gone.
func (m *incidentMemory) forget(key types.NamespacedName) {
	m.triggered.Delete(key)
	m.closes.Delete(key)
}

// wireIncidents has the notifier report delivered closes to the
// reconciler. It is called before the notifier starts (init).
func (r *AddonReconciler) wireIncidents() {
	if r.Notifier != nil && r.Notifier.Closed == nil {
		r.Notifier.Closed = r.closeDelivered
	}
}

// closeDelivered is the notifier's Closed: the close of an add-on was
// delivered to every incident receiver that takes it, or given up for
// good. When it is the close this process sent last, the add-on is
// reconciled soon, and that reconcile's status clears warningSince.
func (r *AddonReconciler) closeDelivered(e notify.Event) {
	if e.Kind != "Addon" {
		return
	}
	key := types.NamespacedName{Namespace: e.Namespace, Name: e.Name}
	v, ok := r.incidents.closes.Load(key)
	if !ok {
		return
	}
	sent := v.(closeSent)
	if sent.delivered || !sent.at.Equal(e.Time) {
		// NOTE: an older close, delivered after a newer one was sent:
		// the newer one is still owed.
		return
	}
	if r.incidents.closes.CompareAndSwap(key, sent, closeSent{at: sent.at, delivered: true}) && r.drift != nil {
		r.drift.wake(key)
	}
}

// owesClose reports whether the add-on, Synced and carrying
// status.warningSince, keeps it: an incident receiver takes its close,
// and the notifier has not reported that close delivered. Without an
// incident receiver, warningSince is cleared in the write that makes the
// add-on Synced, as it always was. Only an add-on that was in a warning
// asks, so the receivers are never read for a healthy one.
func (r *AddonReconciler) owesClose(ctx context.Context, addon *capstanv1.Addon) bool {
	st := &addon.Status
	if st.Phase != capstanv1.PhaseSynced || st.WarningSince == nil || r.Notifier == nil {
		return false
	}
	key := types.NamespacedName{Namespace: addon.Namespace, Name: addon.Name}
	if v, ok := r.incidents.closes.Load(key); ok && v.(closeSent).delivered {
		return false
	}
	return r.Notifier.TakesIncidents(ctx, notify.Event{Kind: "Addon", Namespace: addon.Namespace, Name: addon.Name,
		Phase: string(capstanv1.PhaseSynced), Severity: notify.SeverityInfo, Labels: addon.Labels})
}

// incidentAgain is the event that tells the incident receivers again what
// a controller before this one may not have delivered, alongside notice
// (this reconcile's transition, if any): the trigger of an add-on in a
// warning that this process has not triggered, or the close of a Synced
// add-on that keeps warningSince and that this process has not closed.
// Both go to incident receivers only (IncidentOnly). It is nil when there
// is nothing to say again.
func (r *AddonReconciler) incidentAgain(before *capstanv1.Addon, s *scope, notice *notify.Event) *notify.Event {
	if r.Notifier == nil {
		return nil
	}
	st := &s.addon.Status
	key := types.NamespacedName{Namespace: s.addon.Namespace, Name: s.addon.Name}
	transition := notice != nil && !notice.SameState
	switch {
	case phaseSeverity(st.Phase) == notify.SeverityWarning:
		if transition && notice.Severity == notify.SeverityWarning {
			return nil
		}
		if _, ok := r.incidents.triggered.Load(key); ok {
			return nil
		}
		e := r.addonEvent(before, s, notify.SeverityWarning)
		e.IncidentOnly = true
		return &e
	case st.Phase == capstanv1.PhaseSynced && st.WarningSince != nil:
		if transition && notice.Phase == string(capstanv1.PhaseSynced) {
			return nil
		}
		if _, ok := r.incidents.closes.Load(key); ok {
			return nil
		}
		e := r.addonEvent(before, s, notify.SeverityInfo)
		e.IncidentOnly = true
		return &e
	}
	return nil
}

// rememberIncidents keeps the memory in step with the status this
// reconcile writes: an add-on out of its warning is no longer triggered,
// and one that no longer keeps warningSince owes no close.
func (r *AddonReconciler) rememberIncidents(addon *capstanv1.Addon) {
	key := types.NamespacedName{Namespace: addon.Namespace, Name: addon.Name}
	st := &addon.Status
	if phaseSeverity(st.Phase) != notify.SeverityWarning {
		r.incidents.triggered.Delete(key)
	}
	if st.Phase != capstanv1.PhaseSynced || st.WarningSince == nil {
		r.incidents.closes.Delete(key)
	}
}

// announce hands the notifier the events of a status that was written (or
// that needed no write), and remembers the triggers and closes among
// them that the notifier queued. A close is remembered before it is
// queued: the notifier may report it delivered at once.
func (r *AddonReconciler) announce(addon *capstanv1.Addon, events ...*notify.Event) {
	key := types.NamespacedName{Namespace: addon.Namespace, Name: addon.Name}
	for _, e := range events {
		if e == nil {
			continue
		}
		closing := !e.SameState && e.Severity != notify.SeverityWarning &&
			e.Phase == string(capstanv1.PhaseSynced) && addon.Status.WarningSince != nil
		if closing {
			r.incidents.closes.Store(key, closeSent{at: e.Time})
		}
		queued := r.Notifier.Notify(*e)
		// NOTE: a full queue drops a trigger sent again once it is half
		// full, and any event but a close once the events waiting past
		// it are at their bound, as after a restart that finds hundreds
		// of add-ons failing. One dropped is not remembered as sent, so
		// the add-on's next reconcile sends it again (incidentAgain):
		// the object says nothing more until its next transition.
		switch {
		case e.SameState:
		case e.Severity == notify.SeverityWarning && queued:
			r.incidents.triggered.Store(key, struct{}{})
		case e.Severity == notify.SeverityWarning:
			r.incidents.triggered.Delete(key)
		case closing && !queued:
			r.incidents.closes.CompareAndDelete(key, closeSent{at: e.Time})
		}
	}
}
