package shards_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/install"
)

// leaseDuration is controller-runtime's default, which the controller
// keeps. A standby counts the lease from when it saw the leader's last
// renewal, on its own clock, and looks every retry period of 2 s stretched
// by client-go's jitter of up to 1.2 times it: up to 4.4 s. So it may take
// the Lease up to maxTakeover after the leader dies: one look to see the
// last renewal, the lease, one look to find it expired, and 2 s for the
// requests on a loaded machine.
//
// A leader stopped with SIGTERM gives the Lease up as it stops, so the
// standby takes it at its next look instead: maxHandOver from the signal
// is that look, the stop itself and the standby's label of its Pod,
// about half the lease.
const (
	leaseDuration = 15 * time.Second
	longestLook   = 2 * time.Second * 22 / 10
	maxTakeover   = longestLook + leaseDuration + longestLook + 2*time.Second
	maxHandOver   = 8 * time.Second
)

// TestLeaderElectionFailover runs two controllers with --leader-elect.
// Add-ons with a post-install hook are created, and the leader is killed
// with SIGKILL while it syncs them. The standby takes the Lease within
// maxTakeover, and every add-on ends Synced, with no hook
// left running or pending and no object created twice.
func TestLeaderElectionFailover(t *testing.T) {
	f := setup(t)
	ns := newNamespace(t, f.admin, "failover")
	first := f.start(t, "capstan-first", "--leader-elect")
	holder := waitHolder(t, f.admin, "", 60*time.Second)
	// The first holds the Lease before the second starts, so it leads.
	leader, standby := first, f.start(t, "capstan-second", "--leader-elect")
	const n = 20
	for i := range n {
		a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("hooked-%02d", i)},
			Spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: f.hookedURL}}}
		if err := f.admin.Create(t.Context(), a); err != nil {
			t.Fatal(err)
		}
	}
	// Kill the leader while it works: once the first hook Job exists.
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := cluster.AuditEvents()
		if err != nil {
			return false, nil
		}
		for _, e := range events {
			if e.ObjectRef != nil && e.ObjectRef.Resource == "jobs" && e.ObjectRef.Namespace == ns {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatal("the leader created no hook Job within 60 s")
	}
	killed := time.Now()
	leader.Kill()
	next := waitHolder(t, f.admin, holder, leaseDuration+30*time.Second)
	takeover := time.Since(killed)
	t.Logf("the standby took the Lease %s after the leader was killed (lease %s); holder %s -> %s", takeover.Round(100*time.Millisecond), leaseDuration, holder, next)
	if takeover > maxTakeover {
		t.Errorf("the takeover took %s; want within %s: the lease and two of the standby's looks", takeover, maxTakeover)
	}
	waitSynced(t, f.admin, ns, n, 3*time.Minute, standby)

	list := &capstanv1.AddonList{}
	if err := f.admin.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, a := range list.Items {
		if a.Status.Hook != nil || a.Status.PendingHook != nil {
			t.Errorf("Addon %s is left mid-hook: hook %+v, pending %+v", a.Name, a.Status.Hook, a.Status.PendingHook)
		}
	}
	events, err := cluster.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	created := map[string]int{}
	for _, e := range events {
		o := e.ObjectRef
		if o == nil || o.Namespace != ns || o.Resource != "configmaps" || e.ResponseStatus == nil || e.ResponseStatus.Code != 201 || strings.Contains(e.RequestURI, "dryRun") {
			continue
		}
		created[o.Name]++
	}
	for _, a := range list.Items {
		if c := created[a.Name]; c != 1 {
			t.Errorf("ConfigMap %s was created %d times; want once", a.Name, c)
		}
	}
}

// waitHolder waits until the Lease has a holder other than not, and
// returns it.
func waitHolder(t *testing.T, admin client.Client, not string, limit time.Duration) string {
	t.Helper()
	var holder string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, limit, true, func(ctx context.Context) (bool, error) {
		lease := &coordinationv1.Lease{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: "capstan-controller"}, lease); err != nil {
			return false, nil
		}
		if lease.Spec.HolderIdentity != nil {
			holder = *lease.Spec.HolderIdentity
		}
		return holder != "" && holder != not, nil
	})
	if err != nil {
		t.Fatalf("no new holder of the Lease within %s (last %q)", limit, holder)
	}
	return holder
}
