package controller

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/notify"
	"capstan.dev/capstan/internal/source"
)

// TestCacheCurrent is when a reconcile may start from the cached Addon
// instead of reading it from the API server.
func TestCacheCurrent(t *testing.T) {
	deleting := metav1.Now()
	cases := []struct {
		name      string
		cached    string
		deleting  bool
		lastWrite string
		wrote     bool
		want      bool
	}{
		{"never written by this process", "120", false, "", false, true},
		{"the cache holds the last write", "120", false, "120", true, true},
		{"the cache holds a later write, someone else's", "130", false, "120", true, true},
		{"the cache has not caught up with the last write", "119", false, "120", true, false},
		{"a longer version is later", "1000", false, "999", true, true},
		{"a shorter version is earlier", "999", false, "1000", true, false},
		{"being deleted, though the cache holds the last write", "120", true, "120", true, false},
		{"being deleted, never written", "120", true, "", false, false},
		{"versions that do not compare as numbers, and differ", "b", false, "a", true, false},
		{"versions that do not compare as numbers, and are equal", "a", false, "a", true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{ResourceVersion: c.cached}}
			if c.deleting {
				a.DeletionTimestamp = &deleting
			}
			if got := cacheCurrent(a, c.lastWrite, c.wrote); got != c.want {
				t.Errorf("cacheCurrent(cached %s, last write %q, wrote %v) = %v; want %v", c.cached, c.lastWrite, c.wrote, got, c.want)
			}
		})
	}
}

// TestHoldApplyRecord is when the status that ends a reconcile waits for
// the next one, and when the next one starts from it.
func TestHoldApplyRecord(t *testing.T) {
	applying := &capstanv1.AddonStatus{}
	setConditions(applying, 1, outcome{Phase: capstanv1.PhaseProgressing, Reason: reasonApplying})
	synced := &capstanv1.AddonStatus{}
	setConditions(synced, 1, outcome{Phase: capstanv1.PhaseSynced, Reason: "Synced"})
	waiting := outcome{Phase: capstanv1.PhaseProgressing, Reason: reasonWaitingForWorkloads, Message: "waiting for Deployment a/web"}
	scopeFor := func(mod func(s *scope)) *scope {
		s := &scope{
			addon:  &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web", UID: "u1", ResourceVersion: "7"}},
			stored: applying.DeepCopy(), hooklessApply: true, outcome: waiting,
		}
		s.found.waitingFor = waiting.Message
		s.addon.Status.AppliedHash = "sha256:new"
		if mod != nil {
			mod(s)
		}
		return s
	}
	cases := []struct {
		name string
		mod  func(s *scope)
		want bool
	}{
		{"a new add-on's first apply, without hooks, waiting for its workloads", nil, true},
		{"an apply that ran hooks", func(s *scope) { s.hooklessApply = false }, false},
		{"healthy at once", func(s *scope) {
			s.found.waitingFor, s.outcome = "", outcome{Phase: capstanv1.PhaseSynced, Reason: "Synced"}
		}, false},
		{"an upgrade: the stored status tells of the render before", func(s *scope) { s.stored = synced.DeepCopy() }, false},
		{"no checkpoint written", func(s *scope) { s.stored = nil }, false},
		{"a look soon after, that resumed a held status and still waits", func(s *scope) {
			s.resumed, s.hooklessApply, s.stored, s.heldSince = true, false, nil, time.Now().Add(-time.Second)
		}, true},
		{"a look that resumed a status held for the health poll's length", func(s *scope) {
			s.resumed, s.hooklessApply, s.stored, s.heldSince = true, false, nil, time.Now().Add(-defaultHealthPoll)
		}, false},
		{"a look that resumed a held status and finds the workloads ready", func(s *scope) {
			s.resumed, s.hooklessApply, s.stored, s.heldSince = true, false, nil, time.Now()
			s.found.waitingFor, s.outcome = "", outcome{Phase: capstanv1.PhaseSynced, Reason: "Synced"}
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &AddonReconciler{Config: Config{}.WithDefaults()}
			s := scopeFor(c.mod)
			r.wrote(s.addon) // the checkpoint's answer
			if got := r.holdApplyRecord(s); got != c.want {
				t.Fatalf("holdApplyRecord = %v; want %v", got, c.want)
			}
			_, held := r.held.Load(types.NamespacedName{Namespace: "a", Name: "web"})
			if held != c.want {
				t.Errorf("a status held: %v; want %v", held, c.want)
			}
		})
	}

	t.Run("a shorter health poll holds a status for less", func(t *testing.T) {
		for _, c := range []struct {
			poll, held time.Duration
			want       bool
		}{
			{2 * time.Second, time.Second, true},
			{2 * time.Second, 3 * time.Second, false},
			{0, 3 * time.Second, true}, // the default, 5 s
		} {
			r := &AddonReconciler{Config: Config{HealthPoll: c.poll}.WithDefaults()}
			s := scopeFor(func(s *scope) {
				s.resumed, s.hooklessApply, s.stored, s.heldSince = true, false, nil, time.Now().Add(-c.held)
			})
			r.wrote(s.addon)
			if got := r.holdApplyRecord(s); got != c.want {
				t.Errorf("health poll %s, held %s ago: holdApplyRecord = %v; want %v", c.poll, c.held, got, c.want)
			}
		}
	})

	t.Run("the next reconcile resumes it only for the same Addon, unwritten since", func(t *testing.T) {
		for _, next := range []struct {
			name          string
			uid, version  string
			wantResumed   bool
			wantAppliedAs string
		}{
			{"same Addon, no write since", "u1", "7", true, "sha256:new"},
			{"written since", "u1", "8", false, ""},
			{"another Addon of the same name", "u2", "7", false, ""},
		} {
			r := &AddonReconciler{Config: Config{}.WithDefaults()}
			first := scopeFor(nil)
			r.wrote(first.addon) // the checkpoint's answer
			if !r.holdApplyRecord(first) {
				t.Fatal("nothing held")
			}
			s := &scope{addon: &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web",
				UID: types.UID(next.uid), ResourceVersion: next.version}}}
			s.addon.Status = *applying.DeepCopy()
			r.resumeApplyRecord(s)
			if next.wantResumed && s.heldSince.IsZero() {
				t.Errorf("%s: resumed without the time it was first held", next.name)
			}
			if s.resumed != next.wantResumed || s.addon.Status.AppliedHash != next.wantAppliedAs {
				t.Errorf("%s: resumed %v, appliedHash %q; want %v, %q", next.name, s.resumed, s.addon.Status.AppliedHash, next.wantResumed, next.wantAppliedAs)
			}
			if _, still := r.held.Load(types.NamespacedName{Namespace: "a", Name: "web"}); still {
				t.Errorf("%s: the held status is kept after the next reconcile", next.name)
			}
		}
	})
}

// TestTransitionNamesTheCommit: a folder's transition carries its
// repository (without credentials) and whole commit; a new commit in the
// same phase is an event for the commit statuses alone (SameState), with
// no Kubernetes event; the same commit in the same phase is nothing, and
// so is a chart's new version in the same phase.
func TestTransitionNamesTheCommit(t *testing.T) {
	commit := "0123456789abcdef0123456789abcdef01234567"
	rec := events.NewFakeRecorder(10)
	r := &AddonReconciler{Notifier: &notify.Notifier{}, Recorder: rec}
	before := &capstanv1.Addon{Status: capstanv1.AddonStatus{Phase: capstanv1.PhaseSynced, Version: "0123456"}}
	setConditions(&before.Status, 1, outcome{Phase: capstanv1.PhaseSynced, Reason: "Synced"})
	scopeAt := func(version string, phase capstanv1.Phase, folder bool) *scope {
		s := &scope{addon: &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}},
			outcome: outcome{Phase: phase, Reason: string(phase)}}
		s.addon.Status.Version = version
		s.artifact = &source.Artifact{Identity: source.Identity{URL: "https://bot:s3cret@github.com/org/repo.git", Commit: commit}}
		if folder {
			s.artifact.Tree = &source.Tree{Commit: commit}
		}
		return s
	}
	e, emit := r.emitTransition(before, scopeAt("0123456", capstanv1.PhaseFailed, true))
	emit()
	if e == nil || e.SameState || e.Commit != commit || e.Repository != "https://github.com/org/repo.git" {
		t.Fatalf("a failure: %+v", e)
	}
	if len(rec.Events) != 1 {
		t.Fatalf("%d Kubernetes events for a transition; want one", len(rec.Events))
	}
	<-rec.Events
	e, emit = r.emitTransition(before, scopeAt("89abcde", capstanv1.PhaseSynced, true))
	emit()
	if e == nil || !e.SameState || e.Phase != "Synced" || e.Commit != commit {
		t.Fatalf("a new commit, still Synced: %+v", e)
	}
	if len(rec.Events) != 0 {
		t.Fatalf("a Kubernetes event for a new commit in the same phase: %s", <-rec.Events)
	}
	if e, _ := r.emitTransition(before, scopeAt("0123456", capstanv1.PhaseSynced, true)); e != nil {
		t.Fatalf("the same commit, still Synced: %+v", e)
	}
	if e, _ := r.emitTransition(before, scopeAt("2.0.0", capstanv1.PhaseSynced, false)); e != nil {
		t.Fatalf("a chart's new version, still Synced: %+v", e)
	}
}

// TestFightEndsForIncidentsOnly: the Synced that ends a fight over a
// field is no transition for a channel or a Kubernetes event, but reaches
// the incident receivers, which close an incident a Degraded add-on
// opened before the fight; the fight itself is nothing.
func TestFightEndsForIncidentsOnly(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	r := &AddonReconciler{Notifier: &notify.Notifier{}, Recorder: rec}
	at := func(phase capstanv1.Phase, reason string) (*capstanv1.Addon, *scope) {
		a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}, Status: capstanv1.AddonStatus{Phase: phase}}
		setConditions(&a.Status, 1, outcome{Phase: phase, Reason: reason})
		return a, &scope{addon: a.DeepCopy(), outcome: outcome{Phase: phase, Reason: reason}}
	}
	degraded, _ := at(capstanv1.PhaseDegraded, "Degraded")
	fighting, fight := at(capstanv1.PhaseOutOfSync, reasonDriftFought)
	e, emit := r.emitTransition(degraded, fight)
	emit()
	if e != nil {
		t.Fatalf("the fight: %+v", e)
	}
	_, synced := at(capstanv1.PhaseSynced, "Synced")
	e, emit = r.emitTransition(fighting, synced)
	emit()
	if e == nil || !e.IncidentOnly || e.Phase != "Synced" {
		t.Fatalf("the Synced after the fight: %+v", e)
	}
	if len(rec.Events) != 0 {
		t.Fatalf("a Kubernetes event for the end of a fight: %s", <-rec.Events)
	}
}

// TestTestRunNames: the filters are part of a test run's name, and an
// Addon without filters keeps the name it had before they were read.
func TestTestRunNames(t *testing.T) {
	s := &scope{addon: &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{UID: "u-1"}}}
	bare := hookRun(s, "test")
	s.addon.Spec.Test = &capstanv1.TestPolicy{Enable: true}
	if hookRun(s, "test") != bare {
		t.Fatal("a test policy without filters renamed the run")
	}
	s.addon.Spec.Test.Filters = []capstanv1.TestFilter{{Name: "check"}}
	filtered := hookRun(s, "test")
	s.addon.Spec.Test.Filters = []capstanv1.TestFilter{{Name: "check"}, {Name: "smoke"}}
	if filtered == bare || hookRun(s, "test") == filtered {
		t.Fatal("other filters kept the run's name")
	}
	if hookRun(s, "pre-install") != hookRun(&scope{addon: &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{UID: "u-1"}}}, "pre-install") {
		t.Fatal("the filters renamed a run of another event")
	}
}

// TestMarkWarning: status.warningSince starts with a warning, stays
// through the phases on the way and through later warnings, and ends
// once the add-on is Synced.
func TestMarkWarning(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	st := &capstanv1.AddonStatus{}
	// Step i comes at minute i; since is the minute warningSince names
	// after it, or -1 for none.
	for i, step := range []struct {
		phase capstanv1.Phase
		since int
	}{
		{capstanv1.PhaseProgressing, -1},
		{capstanv1.PhaseSynced, -1},
		{capstanv1.PhaseFailed, 2},
		{capstanv1.PhaseProgressing, 2},
		{capstanv1.PhaseBlocked, 2},
		{capstanv1.PhaseOutOfSync, 2},
		{capstanv1.PhasePaused, 2},
		{capstanv1.PhaseSynced, -1},
		{capstanv1.PhaseDegraded, 8},
	} {
		was := st.Phase
		st.Phase = step.phase
		markWarning(st, was, t0.Add(time.Duration(i)*time.Minute), false)
		if step.since < 0 && st.WarningSince != nil ||
			step.since >= 0 && (st.WarningSince == nil || !st.WarningSince.Time.Equal(t0.Add(time.Duration(step.since)*time.Minute))) {
			t.Fatalf("step %d, %s: warningSince %v; want minute %d", i, step.phase, st.WarningSince, step.since)
		}
	}
	// A Synced add-on that keeps the mark for its owed close, and then
	// fails again or moves on: the mark starts over.
	for _, next := range []struct {
		phase capstanv1.Phase
		mark  bool
	}{{capstanv1.PhaseFailed, true}, {capstanv1.PhaseProgressing, false}} {
		owed := &capstanv1.AddonStatus{Phase: capstanv1.PhaseSynced}
		owed.WarningSince = &metav1.Time{Time: t0}
		markWarning(owed, capstanv1.PhaseFailed, t0.Add(time.Minute), true)
		was := owed.Phase
		owed.Phase = next.phase
		markWarning(owed, was, t0.Add(time.Hour), false)
		if next.mark != (owed.WarningSince != nil) || next.mark && !owed.WarningSince.Time.Equal(t0.Add(time.Hour)) {
			t.Errorf("Synced with an owed close, then %s: warningSince %v", next.phase, owed.WarningSince)
		}
	}
	// An Addon a Capstan without the field left Failed: its way to
	// Progressing starts the mark.
	old := &capstanv1.AddonStatus{Phase: capstanv1.PhaseProgressing}
	markWarning(old, capstanv1.PhaseFailed, t0, false)
	if old.WarningSince == nil {
		t.Fatal("an add-on from Failed to Progressing, with no mark, has none after")
	}
}

// TestCloseDeliveredMarksTheLastClose: the notifier's report of a
// delivered close marks the add-on's close delivered only when it is the
// close this process sent last: an older one, delivered after the add-on
// failed and recovered again, leaves the newer one owed, and so does a
// repository's of the same name.
func TestCloseDeliveredMarksTheLastClose(t *testing.T) {
	r := &AddonReconciler{}
	key := types.NamespacedName{Namespace: "apps", Name: "web"}
	older := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	newer := older.Add(time.Minute)
	r.incidents.closes.Store(key, closeSent{at: newer})
	delivered := func() bool {
		v, _ := r.incidents.closes.Load(key)
		return v.(closeSent).delivered
	}
	r.closeDelivered(notify.Event{Kind: "Addon", Namespace: "apps", Name: "web", Time: older})
	r.closeDelivered(notify.Event{Kind: "AddonRepository", Namespace: "apps", Name: "web", Time: newer})
	if delivered() {
		t.Fatal("an older close, or a repository's, marked the add-on's last close delivered")
	}
	r.closeDelivered(notify.Event{Kind: "Addon", Namespace: "apps", Name: "web", Time: newer})
	if !delivered() {
		t.Fatal("the add-on's last close, delivered, is not marked so")
	}
	// Delivered, it is owed no longer: the next status clears warningSince.
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"},
		Status: capstanv1.AddonStatus{Phase: capstanv1.PhaseSynced, WarningSince: &metav1.Time{Time: older}}}
	r.Notifier = &notify.Notifier{Receivers: func(context.Context) ([]notify.Receiver, error) {
		pd, err := notify.ReceiverFromSecret("pager", map[string][]byte{"format": []byte("pagerduty"), "token": []byte("k"),
			"url": []byte("http://127.0.0.1:9/v2/enqueue")})
		return []notify.Receiver{pd}, err
	}}
	if r.owesClose(context.Background(), addon) {
		t.Fatal("a close delivered is still owed")
	}
	r.incidents.closes.Store(key, closeSent{at: newer})
	if !r.owesClose(context.Background(), addon) {
		t.Fatal("a close that an incident receiver takes, not delivered, is not owed")
	}
}
