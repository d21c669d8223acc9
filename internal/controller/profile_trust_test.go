package controller_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
)

// TestRestrictedAddonTrustedForAWhileStaysRestricted installs a restricted
// add-on in a tenant namespace, then moves it, suspended in the same
// write, to a shard that trusts that namespace: a controller that trusts
// it for a while (a shard with wider trust, a --trusted-namespaces edited
// by mistake). The shard's look applies nothing, so status.profile stays
// restricted: were it cluster, the controller that does not trust the
// namespace would hold its sync (ProfileChanged) once the Addon came back,
// and its deletion would leave its software running. Resumed, the shard
// syncs it under the cluster profile, which drops the owner reference the
// restricted profile set, and only then records cluster.
func TestRestrictedAddonTrustedForAWhileStaysRestricted(t *testing.T) {
	ns := newNamespace(t)
	inShard := startShard(t, "trusting", func(c *controller.Config) {
		c.TrustedNamespaces = append(slices.Clone(c.TrustedNamespaces), ns)
	})
	name := fmt.Sprintf("tenant-%d", time.Now().UnixNano()%100000)
	url, _ := charts.publish(t, chart{name: "tenant", version: "1.0.0", files: map[string]string{
		"templates/main.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-main\ndata:\n  at: main\n",
	}})

	a := synced(t, create(t, newAddon(ns, name, url)))
	if a.Status.Profile != capstanv1.ProfileRestricted || len(a.Status.Inventory) != 1 {
		t.Fatalf("installed with status.profile %q and %d inventory entries; want restricted and 1", a.Status.Profile, len(a.Status.Inventory))
	}
	moved := update(t, a, func(cur *capstanv1.Addon) {
		inShard(cur)
		cur.Spec.Suspend = true
	})
	got := waitFor(t, a, 90*time.Second, "the shard's look at the suspended Addon", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == moved.Generation && cur.Status.Phase == capstanv1.PhaseSuspended
	})
	if got.Status.Profile != capstanv1.ProfileRestricted {
		t.Errorf("a look of the trusting shard that applied nothing recorded status.profile %q; want restricted\n%s", got.Status.Profile, describeStatus(got))
	}

	resumed := update(t, got, func(cur *capstanv1.Addon) { cur.Spec.Suspend = false })
	got = waitFor(t, a, 90*time.Second, "the shard's sync under the cluster profile", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == resumed.Generation && cur.Status.Phase == capstanv1.PhaseSynced
	})
	if got.Status.Profile != capstanv1.ProfileCluster {
		t.Errorf("the sync under the cluster profile left status.profile %q; want cluster\n%s", got.Status.Profile, describeStatus(got))
	}
	if cm := live(t, "v1", "ConfigMap", ns, name+"-main"); cm == nil {
		t.Error("the ConfigMap is gone")
	} else if refs := cm.GetOwnerReferences(); len(refs) > 0 {
		t.Errorf("the ConfigMap still has owner references %v; want the cluster profile's apply to drop them", refs)
	}
}
