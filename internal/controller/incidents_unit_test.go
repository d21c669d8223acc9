package controller

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/notify"
)

// TestDroppedIncidentEventsAreSentAgain: a trigger or a close that the
// notifier drops, its queue full, is not remembered as sent, so the
// add-on's next reconcile sends it again (incidentAgain); one the notifier
// queued is remembered, and not sent again.
func TestDroppedIncidentEventsAreSentAgain(t *testing.T) {
	n := &notify.Notifier{Receivers: func(context.Context) ([]notify.Receiver, error) { return nil, nil }}
	r := &AddonReconciler{Notifier: n}
	addon := func(name string, phase capstanv1.Phase, since *metav1.Time) (*capstanv1.Addon, *scope) {
		a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name},
			Status: capstanv1.AddonStatus{Phase: phase, WarningSince: since}}
		return a, &scope{addon: a, outcome: outcome{Phase: phase, Reason: string(phase)}}
	}
	was := &capstanv1.Addon{Status: capstanv1.AddonStatus{Phase: capstanv1.PhaseProgressing}}
	since := &metav1.Time{Time: time.Now().Add(-time.Hour)}

	// Queued: remembered.
	db, dbScope := addon("db", capstanv1.PhaseFailed, since)
	trigger := r.addonEvent(was, dbScope, notify.SeverityWarning)
	r.announce(db, &trigger)
	if again := r.incidentAgain(db, dbScope, nil); again != nil {
		t.Fatalf("a trigger the notifier queued is sent again: %+v", again)
	}

	// The queue full, and the events waiting past it at their bound: a
	// warning's transition is dropped, and so is its trigger sent again.
	filler := notify.Event{Kind: "Addon", Namespace: "apps", Name: "other", Phase: "Progressing", Severity: notify.SeverityInfo}
	for n.Notify(filler) {
	}
	web, webScope := addon("web", capstanv1.PhaseFailed, since)
	trigger = r.addonEvent(was, webScope, notify.SeverityWarning)
	r.announce(web, &trigger)
	again := r.incidentAgain(web, webScope, nil)
	if again == nil || !again.IncidentOnly || again.Severity != notify.SeverityWarning {
		t.Fatalf("a dropped transition to Failed: the next reconcile sends %+v; want its trigger again", again)
	}
	r.announce(web, nil, again)
	if again := r.incidentAgain(web, webScope, nil); again == nil {
		t.Fatal("a dropped trigger sent again, dropped again, is not sent again")
	}

	// Closes wait past the full queue up to their own bound; past it, a
	// close is dropped too, and sent again.
	settled := filler
	settled.Phase, settled.PreviousSeverity = "Synced", notify.SeverityWarning
	for n.Notify(settled) {
	}
	cache, cacheScope := addon("cache", capstanv1.PhaseSynced, since)
	failedBefore := &capstanv1.Addon{Status: capstanv1.AddonStatus{Phase: capstanv1.PhaseFailed, WarningSince: since}}
	closeEvent := r.addonEvent(failedBefore, cacheScope, notify.SeverityInfo)
	r.announce(cache, &closeEvent)
	again = r.incidentAgain(cache, cacheScope, nil)
	if again == nil || !again.IncidentOnly || again.Phase != string(capstanv1.PhaseSynced) {
		t.Fatalf("a dropped close: the next reconcile sends %+v; want the close again", again)
	}
}
