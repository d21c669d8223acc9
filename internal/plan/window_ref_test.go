package plan

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// This is EvaluateWindows as it was before its work was bounded, which
// followed every window's openings afresh at each step of its search. The
// tests hold the bounded one to its answers for ordinary windows.

type refWindow struct {
	index    int
	spec     capstanv1.SyncWindow
	schedule cron.Schedule
	loc      *time.Location
}

// maxChain bounds how many overlapping openings activeAt joins: two
const refMaxChain = 14 * 24 * 60

// activeAt reports whether the window is open at t, and when that opening
// ends. Openings that overlap or touch are one: a window of two hours
// that opens every hour never ends. The end is zero when it does not end
func (w refWindow) activeAt(t time.Time) (bool, time.Time) {
	d := w.spec.Duration.Duration
	// NOTE: Next gives the first opening strictly after its argument, so
	// this is the first opening in (t-d, t], and t is inside it.
	start := w.schedule.Next(t.In(w.loc).Add(-d))
	if start.IsZero() || start.After(t) {
		return false, time.Time{}
	}
	end := start.Add(d)
	for range refMaxChain {
		next := w.schedule.Next(start)
		if next.IsZero() || next.After(end) {
			return true, end
		}
		start, end = next, next.Add(d)
	}
	return true, time.Time{}
}

const refMaxWindowSteps = 512

// EvaluateWindows says whether the windows let changes apply at now, and
func refEvaluateWindows(specs []capstanv1.SyncWindow, now time.Time) (Windows, error) {
	if len(specs) == 0 {
		return Windows{Open: true, Manual: true}, nil
	}
	ws := make([]refWindow, len(specs))
	for i, spec := range specs {
		sched, loc, err := ParseWindow(fmt.Sprintf("spec.syncWindows[%d]", i), spec)
		if err != nil {
			return Windows{}, err
		}
		ws[i] = refWindow{index: i, spec: spec, schedule: sched, loc: loc}
	}
	st := refEvaluate(ws, now)
	if st.Open || st.endless {
		return st, nil
	}
	// When do they open? Step from change to change; a set of windows
	// that never opens stops the search at its bound.
	opens := time.Time{}
	searched := now
	for t, steps := st.Change, 0; !t.IsZero() && steps < refMaxWindowSteps && t.Sub(now) < 366*24*time.Hour; steps++ {
		searched = t
		next := refEvaluate(ws, t)
		if next.Open {
			opens = t
			break
		}
		if next.endless {
			break
		}
		t = next.Change
	}
	switch {
	case !opens.IsZero():
		st.Why += "; changes may apply from " + opens.UTC().Format(time.RFC3339)
	case st.Change.IsZero() && searched.Equal(now):
		st.Why += "; the windows never open"
	default:
		st.Why += "; no opening was found up to " + searched.UTC().Format(time.RFC3339)
	}
	return st, nil
}

func refEvaluate(ws []refWindow, t time.Time) Windows {
	var (
		st                   = Windows{Open: true, Manual: true}
		allows, allowsManual bool
		allowOpen            bool
		firstDeny            = -1
		denyEnds             time.Time
		nextAllow            time.Time
		nextAllowIndex       = -1
	)
	later := func(c time.Time) {
		if !c.IsZero() && c.After(t) && (st.Change.IsZero() || c.Before(st.Change)) {
			st.Change = c
		}
	}
	for _, w := range ws {
		active, end := w.activeAt(t)
		next := w.schedule.Next(t.In(w.loc))
		// NOTE: an opening that comes while the window is open changes
		// nothing; its end does.
		if active {
			later(end)
		} else {
			later(next)
		}
		switch w.spec.Kind {
		case capstanv1.SyncWindowDeny:
			if active {
				st.Open = false
				st.Manual = st.Manual && w.spec.ManualSync
				if firstDeny < 0 || !denyEnds.IsZero() && (end.IsZero() || end.After(denyEnds)) {
					firstDeny, denyEnds = w.index, end
				}
			}
		case capstanv1.SyncWindowAllow:
			allows = true
			allowsManual = allowsManual || w.spec.ManualSync
			allowOpen = allowOpen || active
			if !next.IsZero() && (nextAllow.IsZero() || next.Before(nextAllow)) {
				nextAllow, nextAllowIndex = next, w.index
			}
		}
	}
	if allows && !allowOpen {
		st.Open = false
		if firstDeny < 0 {
			st.Manual = allowsManual
		}
	}
	switch {
	case st.Open:
		st.Manual = true
	case firstDeny >= 0 && denyEnds.IsZero():
		st.endless = true
		st.Why = fmt.Sprintf("the deny window spec.syncWindows[%d] is active, and its openings overlap with no end in two weeks", firstDeny)
	case firstDeny >= 0:
		st.Why = fmt.Sprintf("the deny window spec.syncWindows[%d] is active until %s", firstDeny, denyEnds.UTC().Format(time.RFC3339))
	case nextAllowIndex >= 0:
		st.Why = fmt.Sprintf("changes apply only in an allow window, and none is active; the next, spec.syncWindows[%d], opens at %s", nextAllowIndex, nextAllow.UTC().Format(time.RFC3339))
	default:
		st.Why = "changes apply only in an allow window, and none is active or ever opens"
	}
	return st
}
