package plan

import (
	"fmt"
	"strings"
	"time"
	// NOTE: the controller's image has no zoneinfo; a window's time zone
	// must resolve all the same.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// MaxWindowDuration bounds one sync window: longer than a week is a
// schedule written the wrong way round.
const MaxWindowDuration = 7 * 24 * time.Hour

// window is one spec.syncWindows entry, parsed.
type window struct {
	index    int
	spec     capstanv1.SyncWindow
	schedule cron.Schedule
	loc      *time.Location
}

// WindowError is a sync window the controller cannot read.
type WindowError struct {
	Field   string
	Message string
}

func (e *WindowError) Error() string { return e.Field + ": " + e.Message }

// ParseWindow checks one sync window: its schedule, a standard cron
// expression of five fields or a descriptor such as @daily; its
// duration, more than 0 and at most a week; and its time zone, an IANA
// name. field names it in messages, such as spec.syncWindows[0].
func ParseWindow(field string, w capstanv1.SyncWindow) (cron.Schedule, *time.Location, error) {
	if w.Kind != capstanv1.SyncWindowAllow && w.Kind != capstanv1.SyncWindowDeny {
		return nil, nil, &WindowError{field + ".kind", fmt.Sprintf("%q is neither allow nor deny", w.Kind)}
	}
	spec := strings.TrimSpace(w.Schedule)
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, nil, &WindowError{field + ".schedule", "give the time zone in timeZone, not in the schedule"}
	}
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, nil, &WindowError{field + ".schedule", fmt.Sprintf("%q is not a cron schedule of five fields (minute hour day-of-month month day-of-week), such as \"0 2 * * 1-5\": %v", w.Schedule, err)}
	}
	if _, ok := sched.(*cron.SpecSchedule); !ok {
		// NOTE: @every counts from whenever it is read, so a window of it
		// would move with each look.
		return nil, nil, &WindowError{field + ".schedule", fmt.Sprintf("%q counts from whenever the controller reads it: give the times it opens, such as \"0 */2 * * *\"", w.Schedule)}
	}
	if d := w.Duration.Duration; d <= 0 || d > MaxWindowDuration {
		return nil, nil, &WindowError{field + ".duration", fmt.Sprintf("%s is not more than 0s and at most 168h", d)}
	}
	loc := time.UTC
	if w.TimeZone != "" {
		if loc, err = time.LoadLocation(w.TimeZone); err != nil || w.TimeZone == "Local" {
			return nil, nil, &WindowError{field + ".timeZone", fmt.Sprintf("%q is not an IANA time zone, such as Europe/Amsterdam or UTC", w.TimeZone)}
		}
	}
	return sched, loc, nil
}

// maxChain bounds how many overlapping openings activeAt joins: two
// weeks of a window that opens every minute.
const maxChain = 14 * 24 * 60

// activeAt reports whether the window is open at t, and when that opening
// ends. Openings that overlap or touch are one: a window of two hours
// that opens every hour never ends. The end is zero when it does not end
// within maxChain openings.
func (w window) activeAt(t time.Time) (bool, time.Time) {
	d := w.spec.Duration.Duration
	// NOTE: Next gives the first opening strictly after its argument, so
	// this is the first opening in (t-d, t], and t is inside it.
	start := w.schedule.Next(t.In(w.loc).Add(-d))
	if start.IsZero() || start.After(t) {
		return false, time.Time{}
	}
	end := start.Add(d)
	for range maxChain {
		next := w.schedule.Next(start)
		if next.IsZero() || next.After(end) {
			return true, end
		}
		start, end = next, next.Add(d)
	}
	return true, time.Time{}
}

// Windows is what an add-on's sync windows say at one moment.
type Windows struct {
	// Open is true when changes may apply: no deny window is active, and
	// an allow window is, or there is none.
	Open bool
	// Manual is true when a person's sync may apply while they are
	// closed: every window that closes them says manualSync.
	Manual bool
	// Change is the next moment the answer may change, zero when it never
	// does.
	Change time.Time
	// Why says, when they are closed, which window closes them and until
	// when.
	Why string
	// endless is true when a deny window is active with no end found.
	endless bool
}

// maxWindowSteps bounds the search for the next opening.
const maxWindowSteps = 512

// EvaluateWindows says whether the windows let changes apply at now, and
// when that may change.
func EvaluateWindows(specs []capstanv1.SyncWindow, now time.Time) (Windows, error) {
	if len(specs) == 0 {
		return Windows{Open: true, Manual: true}, nil
	}
	ws := make([]window, len(specs))
	for i, spec := range specs {
		sched, loc, err := ParseWindow(fmt.Sprintf("spec.syncWindows[%d]", i), spec)
		if err != nil {
			return Windows{}, err
		}
		ws[i] = window{index: i, spec: spec, schedule: sched, loc: loc}
	}
	st := evaluate(ws, now)
	if st.Open || st.endless {
		return st, nil
	}
	// When do they open? Step from change to change; a set of windows
	// that never opens stops the search at its bound.
	opens := time.Time{}
	searched := now
	for t, steps := st.Change, 0; !t.IsZero() && steps < maxWindowSteps && t.Sub(now) < 366*24*time.Hour; steps++ {
		searched = t
		next := evaluate(ws, t)
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

// evaluate is EvaluateWindows at t, without the search for the opening.
func evaluate(ws []window, t time.Time) Windows {
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
		st.Manual = st.Manual && allowsManual
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
