package plan

import (
	"testing"
	"time"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// craftedWindows is the costliest set of windows the CRD lets through
// that a reviewer found: fifteen deny windows that each join a minute's
// openings into a week, and an allow window that changes every minute.
func craftedWindows() []capstanv1.SyncWindow {
	ws := make([]capstanv1.SyncWindow, 0, 16)
	for range 15 {
		ws = append(ws, win(capstanv1.SyncWindowDeny, "* * * * 1-6", time.Minute, false))
	}
	return append(ws, win(capstanv1.SyncWindowAllow, "*/2 * * * *", time.Minute, false))
}

// weeklyWindows are sixteen deny windows that never end, each opening
// a week after the last, whose cron takes many steps to find each opening.
func weeklyWindows() []capstanv1.SyncWindow {
	ws := make([]capstanv1.SyncWindow, 16)
	for i := range ws {
		ws[i] = win(capstanv1.SyncWindowDeny, "59 23 * * 0", 168*time.Hour, false)
		ws[i].TimeZone = "America/St_Johns"
	}
	return ws
}

// ordinaryWindows is the example of docs/sync-windows.md: weeknights in
// Amsterdam, and a holiday freeze.
func ordinaryWindows() []capstanv1.SyncWindow {
	nightly := win(capstanv1.SyncWindowAllow, "0 22 * * 1-5", 2*time.Hour, false)
	nightly.TimeZone = "Europe/Amsterdam"
	return []capstanv1.SyncWindow{nightly, win(capstanv1.SyncWindowDeny, "0 0 24 12 *", 72*time.Hour, true)}
}

func BenchmarkEvaluateWindows(b *testing.B) {
	cases := []struct {
		name    string
		windows []capstanv1.SyncWindow
		now     time.Time
	}{
		// A Monday's first minute: the deny windows join up to Sunday.
		{"crafted", craftedWindows(), at("2026-12-07T00:00:30Z")},
		// Sixteen weekly windows in a time zone, each a week long: every
		// opening joins the next, and each step of the cron is slow.
		{"crafted-weekly", weeklyWindows(), at("2026-12-09T12:00:00Z")},
		// A Wednesday's noon: closed, and the search finds the evening.
		{"ordinary", ordinaryWindows(), at("2026-12-09T12:00:00Z")},
		// Christmas: the freeze holds, and the search steps past it.
		{"ordinary-freeze", ordinaryWindows(), at("2026-12-25T12:00:00Z")},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := EvaluateWindows(tc.windows, tc.now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
