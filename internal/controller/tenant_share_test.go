package controller_test

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestTenantShareDefersAndKeepsTheRequest: while a tenant's namespace has
// its share of the workers reconciling, a new Addon there is not touched
// (no finalizer, no status), a cluster-profile add-on created after it
// syncs all the same, and once the share frees, the deferred Addon is
// reconciled from the queue, with no event to bring it back.
func TestTenantShareDefersAndKeepsTheRequest(t *testing.T) {
	ns := newNamespace(t)
	release := reconciler.FillTenantShare(ns)
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	url, _ := charts.publish(t, cmChart("1.0.0", "fair"))
	adminsURL, _ := charts.publish(t, cmChart("1.0.1", "fair-admin"))
	tenant := create(t, newAddon(ns, "fair", url))
	admins := create(t, newAddon(controllerNS, "fair-"+ns, adminsURL, withTarget(ns)))
	waitPhase(t, admins, capstanv1.PhaseSynced)
	time.Sleep(3 * time.Second) // a deferral or two more
	got := getAddon(t, tenant)
	if controllerutil.ContainsFinalizer(got, capstanv1.Finalizer) || got.Status.Phase != "" || got.Status.ObservedGeneration != 0 {
		t.Fatalf("a tenant's Addon past its namespace's share was reconciled: finalizers %v\n%s", got.Finalizers, describeStatus(got))
	}
	release()
	released = true
	got = waitFor(t, tenant, 30*time.Second, "the deferred Addon synced", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.ObservedGeneration == cur.Generation
	})
	if got.Status.Profile != capstanv1.ProfileRestricted {
		t.Errorf("the tenant's Addon has the profile %q", got.Status.Profile)
	}
	for _, a := range []*capstanv1.Addon{tenant, admins} {
		if err := admin.Delete(context.Background(), a); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
}
