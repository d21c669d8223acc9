package controller_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/values"
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

// TestRestrictedAddonTrustedNowIsLeftRunningWhenDeleted installs a
// restricted add-on with a generated value, moves it, suspended, to a shard
// that trusts its namespace, and deletes it there before any sync under the
// cluster profile. Its deletion follows the cluster profile's default,
// Orphan, and its objects and its generated Secret still carry the owner
// reference the restricted profile set: they lose it before the Addon goes,
// so the garbage collector leaves the software running and its generated
// password with it. Before, only an add-on placed restricted now was
// disowned, and the garbage collector deleted everything.
func TestRestrictedAddonTrustedNowIsLeftRunningWhenDeleted(t *testing.T) {
	ns := newNamespace(t)
	inShard := startShard(t, "trusting-del", func(c *controller.Config) {
		c.TrustedNamespaces = append(slices.Clone(c.TrustedNamespaces), ns)
	})
	name := fmt.Sprintf("tenant-%d", time.Now().UnixNano()%100000)
	url, _ := charts.publish(t, chart{name: "tenant", version: "1.0.0", files: map[string]string{
		"values.schema.json":  `{"type":"object","properties":{"token":{"type":"string","writeOnly":true,"x-capstan-generate":{"length":24}}}}`,
		"templates/main.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-main\ndata:\n  at: main\n",
	}})

	a := synced(t, create(t, newAddon(ns, name, url)))
	if a.Status.Profile != capstanv1.ProfileRestricted {
		t.Fatalf("installed with status.profile %q; want restricted", a.Status.Profile)
	}
	kept := []struct{ kind, name string }{{"ConfigMap", name + "-main"}, {"Secret", values.GeneratedName(name)}}
	for _, o := range kept {
		if u := live(t, "v1", o.kind, ns, o.name); u == nil || len(u.GetOwnerReferences()) == 0 {
			t.Fatalf("%s %s is missing or not owned by the Addon after a restricted sync", o.kind, o.name)
		}
	}
	moved := update(t, a, func(cur *capstanv1.Addon) {
		inShard(cur)
		cur.Spec.Suspend = true
	})
	got := waitFor(t, a, 90*time.Second, "the shard's look at the suspended Addon", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == moved.Generation && cur.Status.Phase == capstanv1.PhaseSuspended
	})
	if got.Status.Profile != capstanv1.ProfileRestricted {
		t.Fatalf("status.profile = %q; want restricted", got.Status.Profile)
	}

	if err := admin.Delete(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	gone(t, a)
	for _, o := range kept {
		u := live(t, "v1", o.kind, ns, o.name)
		if u == nil {
			t.Errorf("deleting the add-on deleted %s %s; want it left running, as Orphan leaves it", o.kind, o.name)
			continue
		}
		for _, ref := range u.GetOwnerReferences() {
			if ref.UID == a.UID {
				t.Errorf("%s %s still names the deleted Addon as owner; the garbage collector deletes it", o.kind, o.name)
			}
		}
	}
}

// TestRestrictedAddonSyncedTrustedIsLeftRunningWhenDeleted installs a
// restricted add-on with an object marked ssa: IfNotPresent and a
// pre-install hook ConfigMap, moves it to a shard that trusts its
// namespace, lets that shard sync it under the cluster profile, and
// deletes it. The deletion follows the cluster profile's default, Orphan,
// and status.profile records cluster, so no deletion step disowns
// anything: the sync itself must have taken off every owner reference the
// restricted profile set, also from what it applies no more (the
// IfNotPresent object, the install's hook), or the garbage collector
// deletes them once the Addon goes.
func TestRestrictedAddonSyncedTrustedIsLeftRunningWhenDeleted(t *testing.T) {
	trustedThenDeleted(t, false)
}

// TestRestrictedAddonFailedTrustedIsLeftRunningWhenDeleted is
// TestRestrictedAddonSyncedTrustedIsLeftRunningWhenDeleted with a first
// sync under the cluster profile that fails at a pre-upgrade hook, after
// its inventory checkpoint recorded status.profile cluster and before it
// applied anything: every object still carries the restricted profile's
// owner reference unless the sync took it off first.
func TestRestrictedAddonFailedTrustedIsLeftRunningWhenDeleted(t *testing.T) {
	trustedThenDeleted(t, true)
}

// trustedThenDeleted installs a restricted add-on, moves it to a shard
// that trusts its namespace, waits for that shard's sync under the
// cluster profile (one whose pre-upgrade hook fails, with fail) to record
// status.profile cluster, deletes the Addon with the default policy,
// Orphan, and checks that every object is left running and owned by no
// Addon gone.
func trustedThenDeleted(t *testing.T, fail bool) {
	ns := newNamespace(t)
	inShard := startShard(t, "trusting-sync", func(c *controller.Config) {
		c.TrustedNamespaces = append(slices.Clone(c.TrustedNamespaces), ns)
	})
	name := fmt.Sprintf("tenant-%d", time.Now().UnixNano()%100000)
	url, _ := charts.publish(t, chart{name: "tenant", version: "1.0.0", files: map[string]string{
		"templates/main.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-main\ndata:\n  at: main\n",
		"templates/once.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-once\n  annotations:\n    kustomize.toolkit.fluxcd.io/ssa: IfNotPresent\ndata:\n  at: once\n",
		"templates/seed.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-seed\n  annotations:\n    helm.sh/hook: pre-install\ndata:\n  at: seed\n",
		// With migrate, the inventory grows, so the sync records its
		// profile at the inventory checkpoint, and then a Job that no
		// node runs fails at the hook timeout.
		"templates/more.yaml": "{{- if .Values.migrate }}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-more\ndata:\n  at: more\n{{- end }}\n",
		"templates/migrate.yaml": "{{- if .Values.migrate }}\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{ .Release.Name }}-migrate\n  annotations:\n    helm.sh/hook: pre-upgrade\n" +
			"spec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      nodeSelector: {capstan.dev/nowhere: \"true\"}\n" +
			"      containers:\n        - name: migrate\n          image: registry.example/migrate:1.0\n{{- end }}\n",
	}})

	a := synced(t, create(t, newAddon(ns, name, url)))
	if a.Status.Profile != capstanv1.ProfileRestricted {
		t.Fatalf("installed with status.profile %q; want restricted", a.Status.Profile)
	}
	kept := []string{name + "-main", name + "-once", name + "-seed"}
	for _, n := range kept {
		if u := live(t, "v1", "ConfigMap", ns, n); u == nil || len(u.GetOwnerReferences()) == 0 {
			t.Fatalf("ConfigMap %s is missing or not owned by the Addon after a restricted sync", n)
		}
	}
	moved := update(t, a, func(cur *capstanv1.Addon) {
		inShard(cur)
		if fail {
			cur.Spec.Values = jsonValues("{migrate: true}")
			cur.Spec.HookTimeout = &metav1.Duration{Duration: 3 * time.Second}
		}
	})
	want := capstanv1.PhaseSynced
	if fail {
		want = capstanv1.PhaseFailed
	}
	got := waitFor(t, a, 90*time.Second, "the shard's sync under the cluster profile", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == moved.Generation && cur.Status.Phase == want && cur.Status.Profile == capstanv1.ProfileCluster
	})

	if err := admin.Delete(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	gone(t, a)
	for _, n := range kept {
		u := live(t, "v1", "ConfigMap", ns, n)
		if u == nil {
			t.Errorf("deleting the add-on deleted ConfigMap %s; want it left running, as Orphan leaves it", n)
			continue
		}
		for _, ref := range u.GetOwnerReferences() {
			if ref.UID == a.UID {
				t.Errorf("ConfigMap %s still names the deleted Addon as owner; the garbage collector deletes it", n)
			}
		}
	}
}
