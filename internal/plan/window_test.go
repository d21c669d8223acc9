package plan

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

func win(kind capstanv1.SyncWindowKind, schedule string, d time.Duration, manual bool) capstanv1.SyncWindow {
	return capstanv1.SyncWindow{Kind: kind, Schedule: schedule, Duration: metav1.Duration{Duration: d}, ManualSync: manual}
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestEvaluateWindows(t *testing.T) {
	nightly := win(capstanv1.SyncWindowAllow, "0 22 * * *", 2*time.Hour, false)
	freeze := win(capstanv1.SyncWindowDeny, "0 0 24 12 *", 72*time.Hour, true)
	cases := []struct {
		name    string
		windows []capstanv1.SyncWindow
		now     string
		open    bool
		manual  bool
		change  string
		why     string
	}{
		{"no windows", nil, "2026-12-03T12:00:00Z", true, true, "", ""},
		{"inside the allow window", []capstanv1.SyncWindow{nightly}, "2026-12-03T23:30:00Z", true, true, "2026-12-04T00:00:00Z", ""},
		{"at its first minute", []capstanv1.SyncWindow{nightly}, "2026-12-03T22:00:00Z", true, true, "2026-12-04T00:00:00Z", ""},
		{"at its end, closed", []capstanv1.SyncWindow{nightly}, "2026-12-04T00:00:00Z", false, false, "2026-12-04T22:00:00Z",
			"the next, spec.syncWindows[0], opens at 2026-12-04T22:00:00Z; changes may apply from 2026-12-04T22:00:00Z"},
		{"outside it", []capstanv1.SyncWindow{nightly}, "2026-12-03T12:00:00Z", false, false, "2026-12-03T22:00:00Z", "opens at 2026-12-03T22:00:00Z"},
		{"the freeze wins over the allow window", []capstanv1.SyncWindow{nightly, freeze}, "2026-12-25T23:00:00Z", false, true, "2026-12-26T00:00:00Z",
			"the deny window spec.syncWindows[1] is active until 2026-12-27T00:00:00Z; changes may apply from 2026-12-27T22:00:00Z"},
		{"a freeze alone lets a person sync", []capstanv1.SyncWindow{freeze}, "2026-12-25T10:00:00Z", false, true, "2026-12-27T00:00:00Z", "active until 2026-12-27T00:00:00Z"},
		{"after the freeze", []capstanv1.SyncWindow{freeze}, "2026-12-27T00:00:00Z", true, true, "2027-12-24T00:00:00Z", ""},
		{"always denied", []capstanv1.SyncWindow{win(capstanv1.SyncWindowDeny, "* * * * *", time.Minute, false)}, "2026-12-03T12:00:30Z", false, false, "",
			"is active, and its openings overlap with no end in two weeks"},
		{"a deny of weekdays, every minute", []capstanv1.SyncWindow{win(capstanv1.SyncWindowDeny, "* * * * 1-5", time.Minute, false)}, "2026-12-03T12:00:30Z", false, false, "2026-12-05T00:00:00Z",
			"active until 2026-12-05T00:00:00Z; changes may apply from 2026-12-05T00:00:00Z"},
		{"two hours every hour", []capstanv1.SyncWindow{win(capstanv1.SyncWindowDeny, "0 * * * *", 2*time.Hour, false)}, "2026-12-03T12:30:00Z", false, false, "",
			"no end in two weeks"},
		{"a schedule that never comes", []capstanv1.SyncWindow{win(capstanv1.SyncWindowAllow, "0 0 30 2 *", time.Hour, false)}, "2026-12-03T12:00:00Z", false, false, "",
			"none is active or ever opens; the windows never open"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EvaluateWindows(tc.windows, at(tc.now))
			if err != nil {
				t.Fatal(err)
			}
			if got.Open != tc.open || got.Manual != tc.manual {
				t.Errorf("open %v manual %v, want %v and %v (%s)", got.Open, got.Manual, tc.open, tc.manual, got.Why)
			}
			if change := ""; tc.change != "" || !got.Change.IsZero() {
				change = got.Change.UTC().Format(time.RFC3339)
				if change != tc.change {
					t.Errorf("change %s, want %s", change, tc.change)
				}
			}
			if !strings.Contains(got.Why, tc.why) || (tc.open && got.Why != "") {
				t.Errorf("why %q, want it to say %q", got.Why, tc.why)
			}
		})
	}
}

// TestManualSyncFollowsTheActiveDenyWindows: as in Argo CD, while a deny
// window is active, the deny windows that are active alone say whether a
// person's sync applies; the allow windows say it only while no deny
// window is active and none of them is.
func TestManualSyncFollowsTheActiveDenyWindows(t *testing.T) {
	// At 2026-12-25T10:00Z the freezes are active and the nightly windows
	// are not; at 2026-12-25T23:00Z the nightly windows are active too; at
	// 2026-12-03T12:00Z nothing is.
	nightly := func(manual bool) capstanv1.SyncWindow {
		return win(capstanv1.SyncWindowAllow, "0 22 * * *", 2*time.Hour, manual)
	}
	freeze := func(manual bool) capstanv1.SyncWindow {
		return win(capstanv1.SyncWindowDeny, "0 0 24 12 *", 72*time.Hour, manual)
	}
	cases := []struct {
		name    string
		windows []capstanv1.SyncWindow
		now     string
		manual  bool
	}{
		{"an inactive allow without manualSync, an active deny with it", []capstanv1.SyncWindow{nightly(false), freeze(true)}, "2026-12-25T10:00:00Z", true},
		{"an inactive allow with manualSync, an active deny without it", []capstanv1.SyncWindow{nightly(true), freeze(false)}, "2026-12-25T10:00:00Z", false},
		{"an active allow without manualSync, an active deny with it", []capstanv1.SyncWindow{nightly(false), freeze(true)}, "2026-12-25T23:00:00Z", true},
		{"two active denies, one without manualSync", []capstanv1.SyncWindow{nightly(true), freeze(true), freeze(false)}, "2026-12-25T10:00:00Z", false},
		{"two active denies with manualSync", []capstanv1.SyncWindow{nightly(false), freeze(true), freeze(true)}, "2026-12-25T10:00:00Z", true},
		{"no deny active, one inactive allow with manualSync", []capstanv1.SyncWindow{nightly(false), nightly(true), freeze(false)}, "2026-12-03T12:00:00Z", true},
		{"no deny active, no inactive allow with manualSync", []capstanv1.SyncWindow{nightly(false), freeze(true)}, "2026-12-03T12:00:00Z", false},
	}
	pending := &capstanv1.Plan{Hash: "sha256:p", Summary: capstanv1.PlanSummary{Update: 1}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EvaluateWindows(tc.windows, at(tc.now))
			if err != nil {
				t.Fatal(err)
			}
			if got.Open || got.Manual != tc.manual {
				t.Errorf("open %v manual %v, want closed and manual %v (%s)", got.Open, got.Manual, tc.manual, got.Why)
			}
			want, err := refEvaluateWindows(tc.windows, at(tc.now))
			if err != nil {
				t.Fatal(err)
			}
			if want.Manual != got.Manual {
				t.Errorf("manual %v, but the unbounded evaluation says %v", got.Manual, want.Manual)
			}
			v := Decide(State{Plan: pending, Windows: &got, SyncRequest: 2, LastSyncRequest: 1})
			if v.Apply != tc.manual {
				t.Errorf("a person's sync: %+v; want apply %v", v, tc.manual)
			}
		})
	}
}

func TestWindowTimeZone(t *testing.T) {
	// 22:00 in Amsterdam is 21:00 UTC in winter.
	w := win(capstanv1.SyncWindowAllow, "0 22 * * *", time.Hour, false)
	w.TimeZone = "Europe/Amsterdam"
	got, err := EvaluateWindows([]capstanv1.SyncWindow{w}, at("2026-12-03T21:30:00Z"))
	if err != nil || !got.Open {
		t.Fatalf("at 22:30 in Amsterdam: %+v, %v", got, err)
	}
	if got.Change.UTC().Format(time.RFC3339) != "2026-12-03T22:00:00Z" {
		t.Errorf("closes at %s", got.Change.UTC())
	}
}

func TestParseWindowRefusals(t *testing.T) {
	cases := []struct {
		w     capstanv1.SyncWindow
		field string
		want  string
	}{
		{win("sometimes", "@daily", time.Hour, false), "spec.syncWindows[0].kind", "neither allow nor deny"},
		{win(capstanv1.SyncWindowAllow, "0 22 * *", time.Hour, false), "spec.syncWindows[0].schedule", "is not a cron schedule of five fields"},
		{win(capstanv1.SyncWindowAllow, "CRON_TZ=Asia/Tokyo 0 22 * * *", time.Hour, false), "spec.syncWindows[0].schedule", "in timeZone"},
		{win(capstanv1.SyncWindowAllow, "@daily", 0, false), "spec.syncWindows[0].duration", "more than 0s"},
		{win(capstanv1.SyncWindowAllow, "@every 1h", time.Hour, false), "spec.syncWindows[0].schedule", "counts from whenever the controller reads it"},
		{win(capstanv1.SyncWindowAllow, "@daily", 200*time.Hour, false), "spec.syncWindows[0].duration", "at most 168h"},
		{capstanv1.SyncWindow{Kind: capstanv1.SyncWindowDeny, Schedule: "@daily", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Mars/Olympus"}, "spec.syncWindows[0].timeZone", "not an IANA time zone"},
		{capstanv1.SyncWindow{Kind: capstanv1.SyncWindowDeny, Schedule: "@daily", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Local"}, "spec.syncWindows[0].timeZone", "not an IANA time zone"},
	}
	for _, tc := range cases {
		_, err := EvaluateWindows([]capstanv1.SyncWindow{tc.w}, time.Now())
		var we *WindowError
		if !errors.As(err, &we) || we.Field != tc.field || !strings.Contains(we.Message, tc.want) {
			t.Errorf("%+v: error %v, want %s: ...%s", tc.w, err, tc.field, tc.want)
		}
	}
}

func TestWindowGate(t *testing.T) {
	pending := &capstanv1.Plan{Hash: "sha256:p", Summary: capstanv1.PlanSummary{Update: 1}}
	closed := &Windows{Why: "the deny window spec.syncWindows[0] is active until then"}
	closedManual := &Windows{Manual: true, Why: "x"}
	cases := []struct {
		name  string
		s     State
		apply bool
		why   string
	}{
		{"open", State{Plan: pending, Windows: &Windows{Open: true}}, true, ""},
		{"no windows", State{Plan: pending}, true, ""},
		{"closed", State{Plan: pending, Windows: closed}, false, "changes wait for a sync window"},
		{"closed, nothing to change", State{Plan: &capstanv1.Plan{Hash: "sha256:n"}, Windows: closed}, true, ""},
		{"closed, a sync requested", State{Plan: pending, Windows: closed, SyncRequest: 2, LastSyncRequest: 1}, false, "stays pending"},
		{"closed with manualSync, a sync requested", State{Plan: pending, Windows: closedManual, SyncRequest: 2, LastSyncRequest: 1}, true, ""},
		{"closed with manualSync, no request", State{Plan: pending, Windows: closedManual}, false, "changes wait"},
		{"closed, an approval", State{Plan: pending, Windows: closed, ManualSync: true, SyncRequest: 2, LastSyncRequest: 1, ApprovedPlan: "sha256:p"}, false, "stays pending"},
		{"closed with manualSync, an approval", State{Plan: pending, Windows: closedManual, ManualSync: true, SyncRequest: 2, LastSyncRequest: 1, ApprovedPlan: "sha256:p"}, true, ""},
		{"suspended first", State{Plan: pending, Windows: closed, Suspend: true}, false, "spec.suspend"},
	}
	for _, tc := range cases {
		v := Decide(tc.s)
		if v.Apply != tc.apply || !strings.Contains(v.Message, tc.why) {
			t.Errorf("%s: %+v; want apply %v and a message with %q", tc.name, v, tc.apply, tc.why)
		}
		if !v.Apply && v.Reason == ReasonSyncWindow && v.HandledSyncRequest {
			t.Errorf("%s: a held sync request was used up", tc.name)
		}
	}
}

// ordinaryWindowSets are sets of windows as people write them: each is
// held to the answers EvaluateWindows gave before its work was bounded.
func ordinaryWindowSets() map[string][]capstanv1.SyncWindow {
	amsterdam := func(w capstanv1.SyncWindow) capstanv1.SyncWindow {
		w.TimeZone = "Europe/Amsterdam"
		return w
	}
	return map[string][]capstanv1.SyncWindow{
		"the docs' example":          ordinaryWindows(),
		"nightly":                    {win(capstanv1.SyncWindowAllow, "0 22 * * *", 2*time.Hour, false)},
		"business hours denied":      {win(capstanv1.SyncWindowDeny, "0 9 * * 1-5", 8*time.Hour, true)},
		"weekdays, every minute":     {win(capstanv1.SyncWindowDeny, "* * * * 1-5", time.Minute, false)},
		"in the hour DST skips":      {amsterdam(win(capstanv1.SyncWindowAllow, "30 2 * * *", time.Hour, false))},
		"on 30 February":             {win(capstanv1.SyncWindowAllow, "0 0 30 2 *", time.Hour, false)},
		"business hours by minutes":  {amsterdam(win(capstanv1.SyncWindowDeny, "* 9-16 * * 1-5", time.Minute, true)), win(capstanv1.SyncWindowAllow, "0 */4 * * *", 30*time.Minute, true)},
		"allows that join, a freeze": {win(capstanv1.SyncWindowAllow, "0 8 * * *", 4*time.Hour, false), win(capstanv1.SyncWindowAllow, "0 10 * * *", 4*time.Hour, true), win(capstanv1.SyncWindowDeny, "0 0 1 * *", 24*time.Hour, false)},
	}
}

func TestWindowsAnswerAsBeforeTheBound(t *testing.T) {
	// Spring and autumn in Amsterdam, and the turn of the year, every
	// nine hours or so.
	var moments []time.Time
	for _, span := range [][2]string{
		{"2026-03-25T00:00:00Z", "2026-04-02T00:00:00Z"},
		{"2026-10-21T00:00:00Z", "2026-10-29T00:00:00Z"},
		{"2026-12-22T00:00:00Z", "2027-01-03T00:00:00Z"},
	} {
		for now := at(span[0]); now.Before(at(span[1])); now = now.Add(9*time.Hour + 13*time.Minute + 30*time.Second) {
			moments = append(moments, now)
		}
	}
	// Around Amsterdam's skipped hour (01:00 UTC on 29 March) and its
	// repeated one (00:00 to 02:00 UTC on 25 October).
	for _, s := range []string{"2026-03-29T00:45:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z",
		"2026-10-25T00:30:00Z", "2026-10-25T00:45:00Z", "2026-10-25T01:15:00Z", "2026-10-25T01:45:00Z"} {
		moments = append(moments, at(s))
	}
	for name, ws := range ordinaryWindowSets() {
		for _, now := range moments {
			want, err := refEvaluateWindows(ws, now)
			if err != nil {
				t.Fatal(err)
			}
			got, err := EvaluateWindows(ws, now)
			if err != nil {
				t.Fatal(err)
			}
			if got.Open != want.Open || got.Manual != want.Manual || !got.Change.Equal(want.Change) || got.Why != want.Why || got.endless != want.endless {
				t.Errorf("%s at %s:\n got %+v\nwant %+v", name, now.Format(time.RFC3339), got, want)
			}
		}
	}
}

func TestWindowsWorkIsBounded(t *testing.T) {
	crafted := craftedWindows()
	manual := make([]capstanv1.SyncWindow, len(crafted))
	for i, w := range crafted {
		w.ManualSync = true
		manual[i] = w
	}
	weekly := make([]capstanv1.SyncWindow, 16)
	for i := range weekly {
		weekly[i] = win(capstanv1.SyncWindowAllow, "0 0 * * 1", 168*time.Hour, false)
	}
	minutes := []capstanv1.SyncWindow{win(capstanv1.SyncWindowDeny, "* * * * 1-5", time.Minute, false), win(capstanv1.SyncWindowAllow, "*/2 * * * *", time.Minute, false)}
	cases := []struct {
		name    string
		windows []capstanv1.SyncWindow
		now     string
		limit   int
		open    bool
		manual  bool
		change  string
		why     string
		most    int
	}{
		{"fifteen denies every minute of six days, an allow every other minute", crafted, "2026-12-07T00:00:30Z", MaxWindowSteps, false, false, "",
			"the deny window spec.syncWindows[0] is active; no opening was found within the bound of 50000 cron openings", MaxWindowSteps},
		{"the same, on a Saturday evening", crafted, "2026-12-12T23:00:30Z", MaxWindowSteps, false, false, "2026-12-12T23:01:00Z",
			"the deny window spec.syncWindows[0] is active until 2026-12-13T00:00:00Z; changes may apply from 2026-12-13T00:00:00Z", 2_000},
		{"the same with manualSync", manual, "2026-12-07T00:00:30Z", MaxWindowSteps, false, true, "", "use fewer windows", MaxWindowSteps},
		{"sixteen allows that never end", weekly, "2026-12-09T12:00:00Z", MaxWindowSteps, true, true, "", "", MaxWindowSteps},
		// Followed once, a deny window's week of minutes is not followed
		// again at each of the 512 steps of the search.
		{"one deny every minute of the week, an allow every other minute", minutes, "2026-12-09T12:00:30Z", MaxWindowSteps, false, false, "2026-12-09T12:01:00Z",
			"active until 2026-12-12T00:00:00Z; no opening was found up to 2026-12-09T20:32:00Z", 5_000},
		// The freeze is active and says manualSync, so a person may sync,
		// whatever the nightly allow window, not active, says.
		{"the bound runs out in the search", ordinaryWindows(), "2026-12-25T12:00:00Z", 5, false, true, "",
			"the deny window spec.syncWindows[1] is active until 2026-12-27T00:00:00Z; no opening was found within the bound", 5},
		{"the bound runs out while open", []capstanv1.SyncWindow{win(capstanv1.SyncWindowAllow, "0 * * * *", 2*time.Hour, false)}, "2026-12-09T21:30:00Z", 1, true, true, "", "", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, steps, err := evaluateWindows(tc.windows, at(tc.now), tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if got.Open != tc.open || got.Manual != tc.manual {
				t.Errorf("open %v manual %v, want %v and %v (%s)", got.Open, got.Manual, tc.open, tc.manual, got.Why)
			}
			if change := ""; tc.change != "" || !got.Change.IsZero() {
				change = got.Change.UTC().Format(time.RFC3339)
				if change != tc.change {
					t.Errorf("change %s, want %s", change, tc.change)
				}
			}
			if !strings.Contains(got.Why, tc.why) || (tc.open && got.Why != "") {
				t.Errorf("why %q, want it to say %q", got.Why, tc.why)
			}
			if steps > tc.most {
				t.Errorf("%d cron openings, want at most %d", steps, tc.most)
			}
		})
	}
}
