package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
)

// TestClusterAddonMovedOutOfTrustIsLeftRunning installs a cluster add-on
// in the controller's namespace, moves it to a shard whose controller does
// not trust that namespace, and deletes it there. The shard finds it
// restricted and Blocks its sync (ProfileChanged), yet status.profile
// keeps recording cluster, and the deletion follows the cluster profile's
// default, Orphan: everything it installed still runs. With a ClusterRole, which the controller may
// not read, the deletion still lets the Addon go; so it does with an
// inventory entry whose API version the cluster no longer serves
// (policy/v1beta1, as a chart that chose it from .Capabilities recorded it
// before an upgrade), which is looked up by a version served now, as the
// uninstall looks it up. Before, that entry failed every try and the Addon
// stayed for ever.
func TestClusterAddonMovedOutOfTrustIsLeftRunning(t *testing.T) {
	inShard := startShard(t, "untrusting", func(c *controller.Config) { c.TrustedNamespaces = []string{"elsewhere"} })
	for _, tc := range []struct {
		name        string
		clusterRole bool
		unserved    bool
	}{
		{"namespaced objects", false, false},
		{"with a ClusterRole", true, false},
		{"with an entry of a version no longer served", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			name := "moved-" + ns[len(ns)-5:]
			extra := map[string]string{}
			running := []struct{ apiVersion, kind, namespace, name string }{
				{"v1", "ConfigMap", ns, name + "-config"},
				{"apps/v1", "Deployment", ns, name},
				{"v1", "Service", ns, name},
			}
			if tc.clusterRole {
				extra["templates/role.yaml"] = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {{ .Release.Name }}-reader\nrules: []\n"
				running = append(running, struct{ apiVersion, kind, namespace, name string }{"rbac.authorization.k8s.io/v1", "ClusterRole", "", name + "-reader"})
				t.Cleanup(func() {
					_ = admin.Delete(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name + "-reader"}})
				})
			}
			url, _ := charts.publish(t, webChart("1.0.0", extra))
			a := synced(t, create(t, newAddon(controllerNS, name, url, withTarget(ns))))
			if a.Status.Profile != capstanv1.ProfileCluster {
				t.Fatalf("status.profile = %q; want cluster", a.Status.Profile)
			}
			update(t, a, inShard)
			got := waitFor(t, a, 90*time.Second, "the shard to Block it as restricted", func(cur *capstanv1.Addon) bool {
				return cur.Status.Phase == capstanv1.PhaseBlocked && cur.Status.ObservedGeneration == cur.Generation
			})
			if got.Status.Profile != capstanv1.ProfileCluster {
				t.Errorf("after the shard's reconcile status.profile = %q; want cluster, the profile it was installed under", got.Status.Profile)
			}
			if tc.unserved {
				eventually(t, 10*time.Second, "recording an entry of policy/v1beta1", func() bool {
					cur := getAddon(t, a)
					cur.Status.Inventory = append(cur.Status.Inventory, capstanv1.ObjectID{ObjectRef: capstanv1.ObjectRef{
						APIVersion: "policy/v1beta1", Kind: "PodDisruptionBudget", Namespace: ns, Name: name}})
					return admin.Status().Update(context.Background(), cur) == nil
				})
			}

			if err := admin.Delete(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			// NOTE: until the Addon is gone, or its deletion took something
			// away; what is left is checked either way.
			gone := false
			_ = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
				gone = apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(a), &capstanv1.Addon{}))
				for _, o := range running {
					if live(t, o.apiVersion, o.kind, o.namespace, o.name) == nil {
						return true, nil
					}
				}
				return gone, nil
			})
			for _, o := range running {
				if live(t, o.apiVersion, o.kind, o.namespace, o.name) == nil {
					t.Errorf("deleting a cluster add-on that a shard finds restricted uninstalled %s %s; want it left running (Orphan)", o.kind, o.name)
				}
			}
			if !gone {
				t.Errorf("the Addon is still there after 90s: %s", describeStatus(getAddon(t, a)))
			}
		})
	}
}

// TestClusterAddonMovedOutOfTrustIsNotUninstalledThere installs a cluster
// add-on whose ConfigMap its chart marks helm.sh/resource-policy: keep,
// moves it to a shard whose controller does not trust its namespace, and
// deletes it there with the uninstall annotation. That shard would
// uninstall it under the restricted profile, which ignores the keep mark
// and renders the delete hooks into the Addon's namespace: so the
// uninstall waits, deletes nothing, and says to trust the namespace again
// or to let the Addon go. Once the annotation is removed, the Addon goes
// with its software left running (Orphan). Before, the shard uninstalled
// it as a restricted add-on, the kept ConfigMap too.
func TestClusterAddonMovedOutOfTrustIsNotUninstalledThere(t *testing.T) {
	inShard := startShard(t, "untrusting-del", func(c *controller.Config) { c.TrustedNamespaces = []string{"elsewhere"} })
	ns := newNamespace(t)
	name := "held-" + ns[len(ns)-5:]
	url, _ := charts.publish(t, webChart("1.0.0", map[string]string{
		"templates/kept.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-kept\n  annotations:\n    helm.sh/resource-policy: keep\ndata:\n  password: generated\n",
	}))
	running := []struct{ apiVersion, kind, name string }{
		{"v1", "ConfigMap", name + "-kept"},
		{"v1", "ConfigMap", name + "-config"},
		{"apps/v1", "Deployment", name},
	}
	a := synced(t, create(t, newAddon(controllerNS, name, url, withTarget(ns))))
	update(t, a, inShard)
	waitFor(t, a, 90*time.Second, "the shard to Block it as restricted", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseBlocked && cur.Status.ObservedGeneration == cur.Generation
	})
	marked := update(t, a, func(cur *capstanv1.Addon) {
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[capstanv1.UninstallAnnotation] = "true"
	})
	if err := admin.Delete(context.Background(), marked); err != nil {
		t.Fatal(err)
	}
	got := waitFor(t, a, 90*time.Second, "the uninstall to wait for the trust", func(cur *capstanv1.Addon) bool {
		return strings.Contains(readyMessage(cur), "the uninstall waits, and deletes nothing")
	})
	for _, want := range []string{"Trust " + controllerNS + " again", "remove the " + capstanv1.UninstallAnnotation + " annotation"} {
		if m := readyMessage(got); !strings.Contains(m, want) {
			t.Errorf("Ready message %q; want %q in it", m, want)
		}
	}
	for _, o := range running {
		if live(t, o.apiVersion, o.kind, ns, o.name) == nil {
			t.Errorf("the held uninstall deleted %s %s; want nothing deleted", o.kind, o.name)
		}
	}

	update(t, got, func(cur *capstanv1.Addon) { delete(cur.Annotations, capstanv1.UninstallAnnotation) })
	gone(t, a)
	for _, o := range running {
		if live(t, o.apiVersion, o.kind, ns, o.name) == nil {
			t.Errorf("deleting it without the annotation deleted %s %s; want it left running (Orphan)", o.kind, o.name)
		}
	}
}
