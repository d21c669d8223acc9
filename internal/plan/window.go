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

// maxChain bounds how many overlapping openings one chain joins: two
// weeks of a window that opens every minute.
const maxChain = 14 * 24 * 60

// MaxWindowSteps bounds the work of one EvaluateWindows call, in cron
// openings computed (calls to a schedule's Next), about 130ms of CPU.
// Ordinary windows take a few hundred; a deny window every minute of the
// weekdays, followed to Saturday, up to 7,200; one whose openings never
// end, maxChain. Each window's run of openings is followed once for the
// whole search, but sixteen windows that each join a week of minutes
// would still take over 100,000 on every look, and used to take millions;
// past the bound, whether the windows are open is still answered, and when
// that changes is left unknown.
const MaxWindowSteps = 50_000

// maxSearchSteps bounds the search for the next opening, in changes of
// the answer stepped through.
const maxSearchSteps = 512

// window is one spec.syncWindows entry, parsed, with what one
// EvaluateWindows call has learnt of it so far.
type window struct {
	index    int
	spec     capstanv1.SyncWindow
	schedule cron.Schedule
	loc      *time.Location

	// chain is the last run of joined openings followed: open from
	// chainStart up to chainReach. chainEnd is when it ends, zero when it
	// does not end within maxChain openings; chainReach is then the end
	// of the last opening followed.
	chainStart, chainReach, chainEnd time.Time
	// The window is closed from idleFrom up to idleUntil, when it opens
	// next; idleUntil is zero when it never opens.
	idleFrom, idleUntil time.Time
	idle                bool
}

// evaluator evaluates one set of windows at the moments of one search,
// counting the cron openings it computes against MaxWindowSteps.
type evaluator struct {
	ws    []window
	steps int
	limit int
	// out is true once a step was refused.
	out bool
}

// next is the window's first opening after t, if the bound allows one
// more step.
func (e *evaluator) next(w *window, t time.Time) (time.Time, bool) {
	if e.steps >= e.limit {
		e.out = true
		return time.Time{}, false
	}
	e.steps++
	return w.schedule.Next(t.In(w.loc)), true
}

// spent reports whether the bound ran out.
func (e *evaluator) spent() bool { return e.out }

// opening reports whether the window is open at t and, when it is not,
// when it opens next (zero: never). ok is false when the bound ran out.
func (e *evaluator) opening(w *window, t time.Time) (active bool, next time.Time, ok bool) {
	if !w.chainStart.IsZero() && !t.Before(w.chainStart) && t.Before(w.chainReach) {
		return true, time.Time{}, true
	}
	if w.idle && !t.Before(w.idleFrom) && (w.idleUntil.IsZero() || t.Before(w.idleUntil)) {
		return false, w.idleUntil, true
	}
	d := w.spec.Duration.Duration
	// NOTE: Next gives the first opening strictly after its argument, so
	// this is the first opening in (t-d, t], and t is inside it. When
	// there is none, it is also the first opening after t, and none comes
	// before it: the window stays closed until then.
	start, ok := e.next(w, t.Add(-d))
	if !ok {
		return false, time.Time{}, false
	}
	if start.IsZero() {
		// NOTE: a cron gives up five years ahead, counted from the year
		// it is asked about; asked about t, it may find one more.
		if start, ok = e.next(w, t); !ok {
			return false, time.Time{}, false
		}
	}
	if start.IsZero() || start.After(t) {
		w.idle, w.idleFrom, w.idleUntil = true, t, start
		return false, start, true
	}
	w.chainStart, w.chainReach, w.chainEnd = start, start, time.Time{}
	return true, time.Time{}, true
}

// chainEnd is when the opening of the window that is open at t ends,
// zero when it does not end within maxChain openings. Openings that
// overlap or touch are one: a window of two hours that opens every hour
// never ends. It follows the chain that opening found, and a later call
// inside the chain followed costs nothing. ok is false when the bound ran
// out.
func (e *evaluator) chainEnd(w *window, t time.Time) (time.Time, bool) {
	if t.Before(w.chainReach) {
		// NOTE: from any opening of a chain that ends, the same end is
		// at most maxChain openings away. Of a chain with no end within
		// maxChain openings, a later opening may find an end that the
		// first did not; that takes more than two weeks of openings every
		// minute, and the window is counted as endless all the same.
		return w.chainEnd, true
	}
	d := w.spec.Duration.Duration
	start := w.chainStart
	end := start.Add(d)
	for range maxChain {
		next, ok := e.next(w, start)
		if !ok {
			return time.Time{}, false
		}
		if next.IsZero() || next.After(end) {
			w.chainReach, w.chainEnd = end, end
			return end, true
		}
		start, end = next, next.Add(d)
	}
	w.chainReach = end
	return time.Time{}, true
}

// Windows is what an add-on's sync windows say at one moment.
type Windows struct {
	// Open is true when changes may apply: no deny window is active, and
	// an allow window is, or there is none.
	Open bool
	// Manual is true when a person's sync may apply while they are
	// closed: while a deny window is active, every deny window that is
	// active says manualSync; otherwise, while no allow window is
	// active, one of the allow windows does.
	Manual bool
	// Change is the next moment the answer may change, zero when it never
	// does or when the windows took more than MaxWindowSteps to follow.
	Change time.Time
	// Why says, when they are closed, which window closes them and until
	// when.
	Why string
	// endless is true when a deny window is active with no end found.
	endless bool
}

// EvaluateWindows says whether the windows let changes apply at now, and
// when that may change. Its work is bounded by MaxWindowSteps, whatever
// the windows are: whether they are open is always answered, but when
// they change may be left unknown (see Windows.Change).
func EvaluateWindows(specs []capstanv1.SyncWindow, now time.Time) (Windows, error) {
	st, _, err := evaluateWindows(specs, now, MaxWindowSteps)
	return st, err
}

// evaluateWindows is EvaluateWindows with a bound of limit cron openings;
// it also returns how many it computed.
func evaluateWindows(specs []capstanv1.SyncWindow, now time.Time, limit int) (Windows, int, error) {
	if len(specs) == 0 {
		return Windows{Open: true, Manual: true}, 0, nil
	}
	// NOTE: the first look computes one opening a window, or two for one
	// that never opens, and that says whether they are open: the bound
	// never leaves that unknown.
	e := &evaluator{ws: make([]window, len(specs)), limit: max(limit, 2*len(specs))}
	for i, spec := range specs {
		sched, loc, err := ParseWindow(fmt.Sprintf("spec.syncWindows[%d]", i), spec)
		if err != nil {
			return Windows{}, 0, err
		}
		e.ws[i] = window{index: i, spec: spec, schedule: sched, loc: loc}
	}
	st := e.evaluate(now)
	if e.spent() {
		return e.unknown(st), e.steps, nil
	}
	if st.Open || st.endless {
		return st, e.steps, nil
	}
	// When do they open? Step from change to change; a set of windows
	// that never opens stops the search at its bound.
	opens := time.Time{}
	searched := now
	for t, steps := st.Change, 0; !t.IsZero() && steps < maxSearchSteps && t.Sub(now) < 366*24*time.Hour; steps++ {
		searched = t
		next := e.evaluate(t)
		if e.spent() {
			return e.unknown(st), e.steps, nil
		}
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
	return st, e.steps, nil
}

// unknown is the answer at now, st, once the bound ran out: whether the
// windows are open, which st always has, and no moment of change, so that
// the controller looks again at its resync, not sooner.
func (e *evaluator) unknown(st Windows) Windows {
	st.Change, st.endless = time.Time{}, false
	if st.Open {
		return st
	}
	st.Why += fmt.Sprintf("; no opening was found within the bound of %d cron openings the controller follows, "+
		"so it looks again at its resync: use fewer windows, or openings further apart that last longer "+
		"(\"0 9 * * 1-5\" for 8h, not \"* 9-16 * * 1-5\" for 1m)", MaxWindowSteps)
	return st
}

// evaluate is EvaluateWindows at t, without the search for the opening.
// Open and Manual are known before the end of any window is followed:
// when the bound runs out (e.spent), they are still right, and Why names
// the window that closes them, without its end.
func (e *evaluator) evaluate(t time.Time) Windows {
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
	active := make([]bool, len(e.ws))
	for i := range e.ws {
		w := &e.ws[i]
		on, next, ok := e.opening(w, t)
		if !ok {
			break
		}
		active[i] = on
		// NOTE: next is zero while the window is open: an opening that
		// comes then changes nothing; its end, below, does.
		later(next)
		switch w.spec.Kind {
		case capstanv1.SyncWindowDeny:
			if on {
				st.Open = false
				st.Manual = st.Manual && w.spec.ManualSync
				if firstDeny < 0 {
					firstDeny = w.index
				}
			}
		case capstanv1.SyncWindowAllow:
			allows = true
			allowsManual = allowsManual || w.spec.ManualSync
			allowOpen = allowOpen || on
			if !next.IsZero() && (nextAllow.IsZero() || next.Before(nextAllow)) {
				nextAllow, nextAllowIndex = next, w.index
			}
		}
	}
	if e.spent() {
		// NOTE: only a search step can run out here (see
		// evaluateWindows), and its answer is not used.
		return st
	}
	if allows && !allowOpen {
		st.Open = false
		// NOTE: as in Argo CD, the allow windows decide a person's sync
		// only while no deny window is active: a deny window that is
		// active holds the changes by itself, whether an allow window is
		// active or not, so only the deny windows that are active say
		// whether a person's sync may apply then.
		if firstDeny < 0 {
			st.Manual = allowsManual
		}
	}
	// The ends of the windows that are open: the deny window that ends
	// last, or never, is the one that holds.
	denyAt := -1
	for i := range e.ws {
		w := &e.ws[i]
		if !active[i] {
			continue
		}
		end, ok := e.chainEnd(w, t)
		if !ok {
			break
		}
		later(end)
		if w.spec.Kind == capstanv1.SyncWindowDeny &&
			(denyAt < 0 || !denyEnds.IsZero() && (end.IsZero() || end.After(denyEnds))) {
			denyAt, denyEnds = w.index, end
		}
	}
	switch {
	case st.Open:
		st.Manual = true
	case e.spent() && firstDeny >= 0:
		st.Why = fmt.Sprintf("the deny window spec.syncWindows[%d] is active", firstDeny)
	case denyAt >= 0 && denyEnds.IsZero():
		st.endless = true
		st.Why = fmt.Sprintf("the deny window spec.syncWindows[%d] is active, and its openings overlap with no end in two weeks", denyAt)
	case denyAt >= 0:
		st.Why = fmt.Sprintf("the deny window spec.syncWindows[%d] is active until %s", denyAt, denyEnds.UTC().Format(time.RFC3339))
	case nextAllowIndex >= 0:
		st.Why = fmt.Sprintf("changes apply only in an allow window, and none is active; the next, spec.syncWindows[%d], opens at %s", nextAllowIndex, nextAllow.UTC().Format(time.RFC3339))
	default:
		st.Why = "changes apply only in an allow window, and none is active or ever opens"
	}
	return st
}
