package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/netguard"
)

// fleetKubeconfig is a kubeconfig for server; building its clients dials
// nothing (the REST mapper and discovery are lazy).
func fleetKubeconfig(server string) []byte {
	return []byte(strings.ReplaceAll(`apiVersion: v1
kind: Config
current-context: edge
contexts:
- name: edge
  context: {cluster: edge, user: installer}
clusters:
- name: edge
  cluster:
    server: SERVER
users:
- name: installer
  user:
    token: abc
    as: system:serviceaccount:capstan:installer
`, "SERVER", server))
}

// TestRemoteClustersKeyedByKubeconfig: two add-ons whose kubeconfigs are
// two keys of one Secret each keep their own clients, so neither rebuilds
// (and cancels the watch cache of) the other's on every reconcile; an
// unnamed key is the default key.
func TestRemoteClustersKeyedByKubeconfig(t *testing.T) {
	r, addon := fleetReconciler(t), fleetAddon
	x, y := addon("x", "edge-1"), addon("y", "edge-2")
	edge1, edge2 := fleetKubeconfig("https://127.0.0.1:6443"), fleetKubeconfig("https://127.0.0.2:6443")

	cx, err := r.remoteCluster(keyOf(x), remoteKeyOf(x), edge1)
	if err != nil {
		t.Fatal(err)
	}
	cy, err := r.remoteCluster(keyOf(y), remoteKeyOf(y), edge2)
	if err != nil {
		t.Fatal(err)
	}
	if cx == cy || cx.server != "https://127.0.0.1:6443" || cy.server != "https://127.0.0.2:6443" {
		t.Fatalf("the two keys share a cluster: %s and %s", cx.server, cy.server)
	}
	for i := 0; i < 2; i++ {
		again, err := r.remoteCluster(keyOf(x), remoteKeyOf(x), edge1)
		if err != nil {
			t.Fatal(err)
		}
		if again != cx {
			t.Fatalf("x's clients were rebuilt after y's reconcile")
		}
		if again, _ := r.remoteCluster(keyOf(y), remoteKeyOf(y), edge2); again != cy {
			t.Fatalf("y's clients were rebuilt after x's reconcile")
		}
	}
	if remoteKeyOf(addon("z", "")) != remoteKeyOf(addon("z", kubeConfigDefaultKey)) {
		t.Errorf("an unnamed key is not the default key %q", kubeConfigDefaultKey)
	}
}

func keyOf(a *capstanv1.Addon) types.NamespacedName { return client.ObjectKeyFromObject(a) }

// TestRemoteUses: a kubeconfig is released when the last Addon that used
// it leaves it (repointed, its kubeConfig removed, deleted), and only then;
// an Addon that uses the same one again, or leaves none, releases nothing.
func TestRemoteUses(t *testing.T) {
	a, b := types.NamespacedName{Namespace: "capstan-system", Name: "a"}, types.NamespacedName{Namespace: "capstan-system", Name: "b"}
	k := func(secret, key string) remoteKey {
		return remoteKey{NamespacedName: types.NamespacedName{Namespace: "capstan-system", Name: secret}, Key: key}
	}
	edge1, edge2, other := k("fleet", "edge-1"), k("fleet", "edge-2"), k("other", "value")
	type step struct {
		addon types.NamespacedName
		use   *remoteKey // nil: drop
		// released is the kubeconfig the step leaves unused, if any.
		released *remoteKey
	}
	use := func(addon types.NamespacedName, key remoteKey, released ...remoteKey) step {
		s := step{addon: addon, use: &key}
		if len(released) > 0 {
			s.released = &released[0]
		}
		return s
	}
	drop := func(addon types.NamespacedName, released ...remoteKey) step {
		s := step{addon: addon}
		if len(released) > 0 {
			s.released = &released[0]
		}
		return s
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"the same kubeconfig again releases nothing", []step{use(a, edge1), use(a, edge1), use(a, edge1)}},
		{"repointed, the last user releases", []step{use(a, edge1), use(a, edge2, edge1), use(a, other, edge2)}},
		{"repointed, another user keeps it", []step{use(a, edge1), use(b, edge1), use(a, edge2), use(b, edge2, edge1)}},
		{"kubeConfig removed or deleted", []step{use(a, edge1), use(b, edge1), drop(a), drop(b, edge1)}},
		{"dropped twice releases once", []step{use(a, edge1), drop(a, edge1), drop(a)}},
		{"never used", []step{drop(a), drop(b)}},
		{"named again after its release", []step{use(a, edge1), drop(a, edge1), use(b, edge1), drop(b, edge1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var u remoteUses
			for i, s := range tc.steps {
				var got remoteKey
				var released bool
				if s.use != nil {
					got, released = u.use(s.addon, *s.use)
				} else {
					got, released = u.drop(s.addon)
				}
				switch {
				case s.released == nil && released:
					t.Fatalf("step %d (%s) released %v", i, s.addon.Name, got)
				case s.released != nil && (!released || got != *s.released):
					t.Fatalf("step %d (%s) released %v (%v), want %v", i, s.addon.Name, got, released, *s.released)
				}
			}
		})
	}
}

// TestRemoteClusterReleased: the reconciler drops a kubeconfig's clients,
// and stops its watch cache, once the last Addon that used it names
// another or none; one named again is built anew.
func TestRemoteClusterReleased(t *testing.T) {
	r, addon := fleetReconciler(t), fleetAddon
	held := func(key remoteKey) *targetCluster {
		r.remotes.mu.Lock()
		defer r.remotes.mu.Unlock()
		return r.remotes.by[key]
	}
	x, y := addon("x", "edge-1"), addon("y", "edge-1")
	edge1, edge2 := fleetKubeconfig("https://127.0.0.1:6443"), fleetKubeconfig("https://127.0.0.2:6443")
	cx, err := r.remoteCluster(keyOf(x), remoteKeyOf(x), edge1)
	if err != nil {
		t.Fatal(err)
	}
	// A cancel that is seen, as a manager's watch cache would be stopped.
	ctx, cancel := context.WithCancel(context.Background())
	cx.cancel = cancel
	if cy, _ := r.remoteCluster(keyOf(y), remoteKeyOf(y), edge1); cy != cx {
		t.Fatal("two Addons of one kubeconfig got two clusters")
	}
	// x is repointed: y still uses edge-1.
	moved := addon("x", "edge-2")
	if _, err := r.remoteCluster(keyOf(moved), remoteKeyOf(moved), edge2); err != nil {
		t.Fatal(err)
	}
	if held(remoteKeyOf(y)) != cx || ctx.Err() != nil {
		t.Fatal("edge-1 was released while y used it")
	}
	// y's kubeConfig is removed: edge-1 is released.
	r.releaseRemote(keyOf(y))
	if held(remoteKeyOf(y)) != nil || ctx.Err() == nil {
		t.Fatal("edge-1 was kept, or its watch cache not stopped, after its last Addon left it")
	}
	// x is deleted: edge-2 too.
	r.releaseRemote(keyOf(moved))
	if held(remoteKeyOf(moved)) != nil {
		t.Fatal("edge-2 was kept after its last Addon was deleted")
	}
	// Named again, it is built anew, not the stopped one.
	again, err := r.remoteCluster(keyOf(y), remoteKeyOf(y), edge1)
	if err != nil {
		t.Fatal(err)
	}
	if again == cx || held(remoteKeyOf(y)) != again {
		t.Fatal("a kubeconfig named again after its release got the stopped cluster")
	}
	// y is repointed to a kubeconfig Secret that does not exist: edge-1,
	// whose Secret is still there, is released all the same.
	ctx, cancel = context.WithCancel(context.Background())
	again.cancel = cancel
	missing := addon("y", "edge-1")
	missing.Spec.KubeConfig.SecretRef.Name = "no-such-secret"
	_, err = r.selectCluster(context.Background(), &scope{addon: missing, profile: capstanv1.ProfileCluster, cluster: &targetCluster{}})
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("the missing kubeconfig Secret: %v", err)
	}
	if held(remoteKeyOf(y)) != nil || ctx.Err() == nil {
		t.Fatal("edge-1 was kept, or its watch cache not stopped, after its last Addon was repointed to a kubeconfig Secret that does not exist")
	}
}

// TestRemoteClusterStoppedWhenItsKubeconfigBreaks: a kubeconfig changed
// to one that is refused stops and forgets the cluster built from the one
// it replaces, whose watches and credentials would otherwise live on; the
// kubeconfig restored builds a new cluster, never the stopped one.
func TestRemoteClusterStoppedWhenItsKubeconfigBreaks(t *testing.T) {
	good := fleetKubeconfig("https://127.0.0.1:6443")
	for _, tc := range []struct {
		name       string
		kubeconfig []byte
	}{
		{"an exec plugin", []byte(strings.Replace(string(good), "    token: abc\n",
			"    token: abc\n    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh}\n", 1))},
		{"not a kubeconfig", []byte("{")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fleetReconciler(t)
			held := func(key remoteKey) *targetCluster {
				r.remotes.mu.Lock()
				defer r.remotes.mu.Unlock()
				return r.remotes.by[key]
			}
			x, y := fleetAddon("x", "edge-1"), fleetAddon("y", "edge-1")
			cx, err := r.remoteCluster(keyOf(x), remoteKeyOf(x), good)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cx.cancel = cancel
			if cy, _ := r.remoteCluster(keyOf(y), remoteKeyOf(y), good); cy != cx {
				t.Fatal("two Addons of one kubeconfig got two clusters")
			}
			if _, err := r.remoteCluster(keyOf(x), remoteKeyOf(x), tc.kubeconfig); err == nil {
				t.Fatal("the broken kubeconfig was accepted")
			}
			if held(remoteKeyOf(x)) != nil || ctx.Err() == nil {
				t.Fatal("the cluster of the replaced kubeconfig was kept, or its watch cache not stopped, once the kubeconfig was refused")
			}
			again, err := r.remoteCluster(keyOf(y), remoteKeyOf(y), good)
			if err != nil {
				t.Fatal(err)
			}
			if again == cx || held(remoteKeyOf(y)) != again {
				t.Fatal("the restored kubeconfig got the stopped cluster")
			}
		})
	}
}

// TestDriftUnhook: the informers of a stopped watch cache are let go, and
// those of another cache kept.
func TestDriftUnhook(t *testing.T) {
	d := &driftWatch{Delay: time.Second}
	released, kept := fake.NewClientBuilder().Build(), fake.NewClientBuilder().Build()
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	a, b, c := &controllertest.FakeInformer{}, &controllertest.FakeInformer{}, &controllertest.FakeInformer{}
	d.hook(gvk, a, released)
	d.hook(gvk, b, released)
	d.hook(gvk, c, kept)
	d.unhook(released)
	if _, ok := d.hooked[c]; len(d.hooked) != 1 || !ok {
		t.Fatalf("after the unhook, %d informers are hooked (want only the kept cache's)", len(d.hooked))
	}
	var none *driftWatch
	none.unhook(kept) // outside a manager there is no drift watch
}

// fleetReconciler is a reconciler outside a manager that may reach remote
// clusters on loopback.
func fleetReconciler(t *testing.T) *AddonReconciler {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := capstanv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	return &AddonReconciler{
		Client: c, APIReader: c,
		Config: Config{RemoteGuard: netguard.Config{Allow: []string{"127.0.0.0/8"}, LoopbackOnly: true}},
	}
}

// fleetAddon is an Addon whose kubeconfig is key of the Secret fleet.
func fleetAddon(name, key string) *capstanv1.Addon {
	return &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: name},
		Spec: capstanv1.AddonSpec{KubeConfig: &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: "fleet"}, Key: key}}}
}
