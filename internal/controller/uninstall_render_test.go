package controller_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestUninstallWaitsForASourceThatFailsForAMoment deletes applied add-ons
// whose delete render cannot fetch the chart (the cache holds another
// URL, as after a controller restart): one whose server answers 503 for a
// while, and one whose chart is gone for good (404). The first uninstall
// waits, deleting nothing and running no hook, and once the server
// answers runs its pre-delete hook and then deletes everything. The
// second goes on without its delete hooks, and a DeleteHooksRefused event
// says the source could not be rendered.
func TestUninstallWaitsForASourceThatFailsForAMoment(t *testing.T) {
	ctx := context.Background()
	installed, _ := charts.publish(t, chart{name: "guardedhooks", version: "1.0.0", files: guardedHooksChart})
	// deleteWithSource installs an add-on, points it at url while it is
	// paused, so nothing fetches it before the uninstall, and deletes it.
	deleteWithSource := func(t *testing.T, ns, url string) *capstanv1.Addon {
		t.Helper()
		a := create(t, newAddon(controllerNS, "source-"+ns[len(ns)-5:], installed, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
			s.DeletionPolicy = capstanv1.DeletionDelete
		})))
		waitPhase(t, a, capstanv1.PhaseSynced)
		patchAnnotation(t, a, capstanv1.PausedAnnotation, "true")
		waitPhase(t, a, capstanv1.PhasePaused)
		update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url })
		if err := admin.Delete(ctx, a); err != nil {
			t.Fatal(err)
		}
		update(t, a, func(cur *capstanv1.Addon) { delete(cur.Annotations, capstanv1.PausedAnnotation) })
		return a
	}
	gone := func(a *capstanv1.Addon) bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(a), &capstanv1.Addon{}))
	}

	t.Run("a server that fails for a moment", func(t *testing.T) {
		ns := newNamespace(t)
		url, _ := charts.publish(t, chart{name: "guardedhooks", version: "1.0.1", files: guardedHooksChart})
		hits, mend := charts.breakPath(strings.TrimPrefix(url, charts.srv.URL), http.StatusServiceUnavailable, "")
		defer mend()
		a := deleteWithSource(t, ns, url)
		eventually(t, 60*time.Second, "the uninstall to fetch the chart again", func() bool { return hits() >= 3 || gone(a) })
		if gone(a) {
			t.Fatal("the Addon went while its chart could not be fetched: its pre-delete hook never ran")
		}
		if live(t, "v1", "ConfigMap", ns, "settings") == nil {
			t.Fatal("the uninstall deleted the inventory before its pre-delete hook ran")
		}
		if live(t, "v1", "ConfigMap", ns, "before-delete") != nil {
			t.Fatal("a pre-delete hook ran from a chart that could not be fetched")
		}
		cur := getAddon(t, a)
		if d := cur.Status.PreHooksDone; d != nil && d.Event == "pre-delete" {
			t.Fatalf("the pre-delete stage was recorded as over: %s", describeStatus(cur))
		}
		if c := condition(cur, capstanv1.ConditionReady); c == nil || !strings.Contains(c.Message, "tries again") {
			t.Errorf("the Addon does not say the uninstall waits for its source: %s", describeStatus(cur))
		}
		mend()
		eventually(t, 90*time.Second, "the Addon to go once its chart is served", func() bool { return gone(a) })
		if live(t, "v1", "ConfigMap", ns, "before-delete") == nil || live(t, "v1", "ConfigMap", ns, "after-delete") == nil {
			t.Error("the uninstall did not run its delete hooks once the chart was served")
		}
		if live(t, "v1", "ConfigMap", ns, "settings") != nil {
			t.Error("the uninstall left the inventory")
		}
	})

	t.Run("a chart gone for good", func(t *testing.T) {
		ns := newNamespace(t)
		a := deleteWithSource(t, ns, charts.srv.URL+"/charts/deleted/guardedhooks-1.0.1.tgz")
		eventually(t, 90*time.Second, "the Addon to go without its hooks", func() bool { return gone(a) })
		if live(t, "v1", "ConfigMap", ns, "before-delete") != nil || live(t, "v1", "ConfigMap", ns, "after-delete") != nil {
			t.Error("a delete hook ran though the chart could not be fetched")
		}
		if live(t, "v1", "ConfigMap", ns, "settings") != nil {
			t.Error("the uninstall left the inventory")
		}
		eventually(t, 30*time.Second, "a DeleteHooksRefused event that says the source could not be rendered", func() bool {
			note := addonEvent(t, a, "DeleteHooksRefused")
			return strings.Contains(note, "could not be rendered") && strings.Contains(note, "404")
		})
	})
}
