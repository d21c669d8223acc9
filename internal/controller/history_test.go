package controller_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestHistoryRecordsEachRender: the install and each upgrade add a
// revision, newest first, with the version, the plan that was applied and
// what it changed; undoing drift applies the same render and adds none.
// `capstan addon history` prints them.
func TestHistoryRecordsEachRender(t *testing.T) {
	ns := newNamespace(t)
	url1, _ := charts.publish(t, releaseConfigMaps("history", "1.0.0", "a", "b"))
	url2, _ := charts.publish(t, releaseConfigMaps("history", "2.0.0", "a", "c"))
	a := create(t, newAddon(ns, "history", url1, withSpec(func(s *capstanv1.AddonSpec) { s.Prune = true })))
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	if h := got.Status.History; len(h) != 1 || h[0].Number != 1 || h[0].Version != "1.0.0" || h[0].AppliedHash != got.Status.AppliedHash ||
		h[0].PlanHash == "" || h[0].Changes.Create != 2 || h[0].Generation != got.Generation {
		t.Fatalf("after the install: history %+v", h)
	}

	// Drift undone is the same render: no revision.
	cm := live(t, "v1", "ConfigMap", ns, "history-a")
	if err := admin.Delete(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the deleted ConfigMap back", func() bool {
		back := live(t, "v1", "ConfigMap", ns, "history-a")
		return back != nil && back.GetUID() != cm.GetUID()
	})
	if h := waitPhase(t, a, capstanv1.PhaseSynced).Status.History; len(h) != 1 {
		t.Fatalf("undoing drift added a revision: %+v", h)
	}

	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url2 })
	got = waitFor(t, a, 90*time.Second, "the upgrade", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.Version == "2.0.0"
	})
	h := got.Status.History
	if len(h) != 2 || h[0].Number != 2 || h[0].Version != "2.0.0" || h[1].Number != 1 || h[1].Version != "1.0.0" ||
		h[0].Changes.Create != 1 || h[0].Changes.Delete != 1 || h[0].AppliedHash != got.Status.AppliedHash || h[0].Generation != got.Generation {
		t.Fatalf("after the upgrade: history %+v", h)
	}

	out := capstan(t, "addon", "history", "history", "-n", ns)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "2 ") || !strings.Contains(lines[1], "2.0.0") || !strings.Contains(lines[1], "1 created, 0 updated, 1 deleted") ||
		!strings.HasPrefix(lines[2], "1 ") || !strings.Contains(lines[2], "1.0.0") {
		t.Fatalf("capstan addon history printed:\n%s", out)
	}
	var printed []capstanv1.Revision
	if err := json.Unmarshal([]byte(capstan(t, "addon", "history", "history", "-n", ns, "-o", "json")), &printed); err != nil || len(printed) != 2 || printed[0].PlanHash != h[0].PlanHash {
		t.Fatalf("history -o json: %v, %+v", err, printed)
	}
}
