package controller_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestChartRepositoryDown upgrades an add-on to a chart version whose
// archive the repository cannot serve: the add-on says so and what to fix,
// nothing is pruned and what runs stays as the last sync applied it; once
// the repository answers again the upgrade goes through by itself.
func TestChartRepositoryDown(t *testing.T) {
	ns := newNamespace(t)
	extra := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-extra\n"
	url1, _ := charts.publish(t, webChart("1.0.0", map[string]string{"templates/extra.yaml": extra}))
	name := "down-" + ns
	a := create(t, newAddon(controllerNS, name, url1, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) { s.Prune = true })))
	before := waitPhase(t, a, capstanv1.PhaseSynced)

	url2, _ := charts.publish(t, webChart("1.1.0", nil))
	u, _ := url.Parse(url2)
	hits, mend := charts.breakPath(u.Path, 503, "")
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url2 })
	got := waitFor(t, a, 60*time.Second, "the fetch to fail", func(cur *capstanv1.Addon) bool {
		return readyReason(cur) == "FetchFailed" && cur.Status.ObservedGeneration == cur.Generation
	})
	if msg := readyMessage(got); !strings.Contains(msg, "503") || !strings.Contains(msg, "check") {
		t.Errorf("the condition does not say what failed and what to check: %q", msg)
	}
	if hits() == 0 {
		t.Fatal("the broken path was never asked")
	}
	if live(t, "v1", "ConfigMap", ns, name+"-extra") == nil {
		t.Error("an object was pruned while the repository was down")
	}
	if len(got.Status.Inventory) != len(before.Status.Inventory) || got.Status.Version != "1.0.0" {
		t.Errorf("the inventory or version changed while the repository was down: %d objects, version %s", len(got.Status.Inventory), got.Status.Version)
	}

	mend()
	waitFor(t, a, 90*time.Second, "the upgrade once the repository is back", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.Version == "1.1.0"
	})
	eventually(t, 30*time.Second, "the extra ConfigMap to be pruned", func() bool { return live(t, "v1", "ConfigMap", ns, name+"-extra") == nil })
}

// TestRegistryAsksToWait installs from an OCI registry that answers 429
// with Retry-After: the add-on says how long the registry asked for, and
// the controller waits that long instead of retrying on its own backoff. A
// registry that answers 500 is a failure that says to check it. Once the
// registry answers, a change installs.
func TestRegistryAsksToWait(t *testing.T) {
	ns := newNamespace(t)
	ref, _ := charts.publishOCI(t, webChart("1.0.0", nil))
	prefix := "/v2/" + strings.TrimPrefix(ref, "oci://"+charts.addr+"/")
	hits, mend := charts.breakPath(prefix, 429, "30")
	name := "ratelimited-" + ns
	a := create(t, newAddon(controllerNS, name, "", withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Chart = &capstanv1.ChartSource{OCI: ref, Version: "1.0.0"}
	})))
	got := waitFor(t, a, 60*time.Second, "the registry's answer in the condition", func(cur *capstanv1.Addon) bool {
		return strings.Contains(readyMessage(cur), "retry in 30s")
	})
	t.Logf("429: %s", readyMessage(got))
	first := hits()
	time.Sleep(8 * time.Second)
	// NOTE: the controller's own backoff would have tried about ten times
	// in these 8 s; waiting as asked, at most the status write's own
	// reconcile comes back.
	if n := hits() - first; n > 2 {
		t.Errorf("the registry was asked %d more times in 8 s after it asked to wait 30 s", n)
	}
	mend()

	_, mend500 := charts.breakPath(prefix, 500, "")
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("greeting: again") })
	got = waitFor(t, a, 60*time.Second, "the 500 in the condition", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == cur.Generation && strings.Contains(readyMessage(cur), "500")
	})
	if msg := readyMessage(got); !strings.Contains(msg, "registry is up") {
		t.Errorf("a 500 does not say to check the registry: %q", msg)
	}
	mend500()
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("greeting: now") })
	waitPhase(t, a, capstanv1.PhaseSynced)
}
