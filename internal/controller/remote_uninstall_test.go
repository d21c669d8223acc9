package controller_test

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// withRemote names the kubeconfig Secret secret in spec.kubeConfig.
func withRemote(secret string) addonOpt {
	return func(a *capstanv1.Addon) {
		a.Spec.KubeConfig = &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: secret}}
	}
}

// withUninstall marks the Addon to be uninstalled when it is deleted.
func withUninstall() addonOpt {
	return func(a *capstanv1.Addon) {
		if a.Annotations == nil {
			a.Annotations = map[string]string{}
		}
		a.Annotations[capstanv1.UninstallAnnotation] = "true"
	}
}

// shortName is prefix with the number that ends the test's namespace: an
// Addon's name is at most 53 characters, and the test's own name is long.
func shortName(prefix, ns string) string {
	return prefix + ns[strings.LastIndex(ns, "-"):]
}

// deleteAndWaitGone deletes the Addon and waits, within limit, until the
// API server no longer has it.
func deleteAndWaitGone(t *testing.T, a *capstanv1.Addon, limit time.Duration, what string) {
	t.Helper()
	ctx := context.Background()
	if err := admin.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	var last capstanv1.Addon
	eventually(t, limit, what, func() bool {
		err := admin.Get(ctx, client.ObjectKeyFromObject(a), &last)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return apierrors.IsNotFound(err)
	})
}

// TestRemoteUninstallOfWhatNeverApplied deletes, with the uninstall
// annotation, remote add-ons that never applied anything: one whose
// kubeconfig Secret does not exist (a misspelt name, or a GitOps folder
// that removed it with the Addon), and one whose kubeconfig is refused.
// Each goes at once, as a local add-on that never applied does, and not
// at the resync (20 s in this suite), which could not let it go either.
func TestRemoteUninstallOfWhatNeverApplied(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t) // the target namespace; nothing is created in it
	name := shortName("never", ns)
	url, _ := charts.publish(t, webChart("1.0.0", nil))

	// A kubeconfig with no account to act as: refused before anything is
	// dialled (the server is a loopback port nobody listens on).
	kc := clientcmdapi.NewConfig()
	kc.Clusters["edge"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", CertificateAuthorityData: charts.caPEM}
	kc.AuthInfos["edge"] = &clientcmdapi.AuthInfo{Token: "a token"}
	kc.Contexts["edge"] = &clientcmdapi.Context{Cluster: "edge", AuthInfo: "edge"}
	kc.CurrentContext = "edge"
	refused, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name + "-refused"},
		Data: map[string][]byte{"value": refused}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ secret, says string }{
		{name + "-missing", "does not exist"},
		{name + "-refused", "names no account to act as"},
	} {
		a := create(t, newAddon(controllerNS, tc.secret, url, withTarget(ns), withRemote(tc.secret), withUninstall()))
		got := waitFor(t, a, 60*time.Second, tc.secret+": the kubeconfig's problem reported", func(cur *capstanv1.Addon) bool {
			return strings.Contains(readyMessage(cur), tc.says)
		})
		if !slices.Contains(got.Finalizers, capstanv1.Finalizer) {
			t.Fatalf("%s: no finalizer to run: %v", tc.secret, got.Finalizers)
		}
		deleteAndWaitGone(t, a, 15*time.Second, tc.secret+": the Addon that never applied to be gone")
	}
}

// TestRemoteUninstallOfAnInventoryHere deletes, with the uninstall
// annotation, an add-on installed in the controller's own cluster and then
// pointed at a remote cluster whose kubeconfig Secret does not exist. Its
// inventory is still here, in a cluster spec.kubeConfig no longer names:
// the uninstall needs no kubeconfig to leave it as a repointed add-on's
// uninstall does (running, unmanaged, with a LeftOnFormerCluster event),
// and the Addon goes.
func TestRemoteUninstallOfAnInventoryHere(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	name := "here-" + ns
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := create(t, newAddon(controllerNS, name, url, withTarget(ns), withUninstall()))
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	here := len(got.Status.Inventory)

	update(t, a, func(cur *capstanv1.Addon) { withRemote(name)(cur) })
	got = waitFor(t, a, 60*time.Second, "the missing kubeconfig Secret reported", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == cur.Generation && strings.Contains(readyMessage(cur), "does not exist")
	})
	if c := got.Status.InventoryCluster; c == nil || *c != (capstanv1.InventoryCluster{}) || len(got.Status.Inventory) != here {
		t.Fatalf("the inventory is no longer recorded here: %+v, %d objects", c, len(got.Status.Inventory))
	}

	deleteAndWaitGone(t, a, 15*time.Second, "the Addon whose inventory is here to be gone")
	if live(t, "v1", "ConfigMap", ns, name+"-config") == nil {
		t.Error("the uninstall deleted here, in the cluster spec.kubeConfig no longer names")
	}
	eventually(t, 10*time.Second, "a LeftOnFormerCluster event of the uninstall", func() bool {
		var events eventsv1.EventList
		if err := admin.List(ctx, &events, client.InNamespace(controllerNS)); err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(events.Items, func(e eventsv1.Event) bool {
			return e.Regarding.Name == name && e.Reason == "LeftOnFormerCluster" &&
				strings.Contains(e.Note, "stay in the controller's own cluster") && strings.Contains(e.Note, "Secret "+controllerNS+"/"+name)
		})
	})
}

// TestRemoteUninstallWaitsForItsCluster installs an add-on into a second
// local control plane, deletes its kubeconfig Secret, then deletes the
// Addon with the uninstall annotation, as a GitOps tool that removes their
// folder at once does. The uninstall waits, deleting and dropping nothing,
// not Stalled (it is retried with backoff), with a message that names both
// ways on: the Secret restored or the cluster reachable, or the
// annotation removed. A second add-on whose annotation is removed goes,
// and leaves its objects there. The Secret restored while the cluster is
// away, the first still waits and says so; the cluster back, it
// uninstalls there and the Addon goes.
func TestRemoteUninstallWaitsForItsCluster(t *testing.T) {
	ctx := context.Background()
	remote, rc, installer, proxy := startRemote(t)
	ns := newNamespace(t) // the target namespace, created there only
	name := shortName("waits", ns)
	kubeconfig := func() *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name},
			Data: map[string][]byte{"value": remoteKubeconfig(t, remote, "https://"+proxy.addr, installer)}}
	}
	if err := admin.Create(ctx, kubeconfig()); err != nil {
		t.Fatal(err)
	}
	// A second add-on there, of a Secret of its own, shows the other way
	// on: its annotation removed, it goes and leaves its objects there.
	kept := name + "-kept"
	keptKubeconfig := kubeconfig()
	keptKubeconfig.Name = kept
	if err := admin.Create(ctx, keptKubeconfig); err != nil {
		t.Fatal(err)
	}
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := create(t, newAddon(controllerNS, name, url, withTarget(ns), withRemote(name), withUninstall(),
		withSpec(func(s *capstanv1.AddonSpec) { s.CreateNamespace = true })))
	k := create(t, newAddon(controllerNS, kept, url, withTarget(ns), withRemote(kept), withUninstall()))
	waitPhase(t, k, capstanv1.PhaseSynced)
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	applied := len(got.Status.Inventory)
	remoteCMOf := func(release string) bool {
		err := rc.Get(ctx, client.ObjectKey{Namespace: ns, Name: release + "-config"}, &corev1.ConfigMap{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	remoteCM := func() bool { return remoteCMOf(name) }
	if !remoteCM() || !remoteCMOf(kept) {
		t.Fatal("the add-ons' ConfigMaps are not in the remote cluster")
	}

	if err := admin.Delete(ctx, keptKubeconfig); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	waitFor(t, k, 30*time.Second, "the second uninstall to wait, naming the annotation", func(cur *capstanv1.Addon) bool {
		return strings.Contains(readyMessage(cur), "remove the "+capstanv1.UninstallAnnotation+" annotation")
	})
	patchAnnotation(t, k, capstanv1.UninstallAnnotation, "")
	eventually(t, 15*time.Second, "the Addon whose annotation was removed to be gone", func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(k), &capstanv1.Addon{}))
	})
	if !remoteCMOf(kept) {
		t.Error("the Addon let go without the annotation deleted its ConfigMap there")
	}

	if err := admin.Delete(ctx, kubeconfig()); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	waiting := func(says string) *capstanv1.Addon {
		t.Helper()
		got := waitFor(t, a, 30*time.Second, "the uninstall to wait, naming "+says+" and the annotation", func(cur *capstanv1.Addon) bool {
			msg := readyMessage(cur)
			return strings.Contains(msg, says) && strings.Contains(msg, "remove the "+capstanv1.UninstallAnnotation+" annotation")
		})
		t.Logf("waiting: %s: %s", readyReason(got), readyMessage(got))
		if !strings.Contains(readyMessage(got), "restore the kubeconfig Secret "+controllerNS+"/"+name) {
			t.Errorf("the message does not say to restore the Secret: %s", readyMessage(got))
		}
		if c := condition(got, capstanv1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
			t.Errorf("the waiting uninstall is Stalled, retried only at the resync: %s", describeStatus(got))
		}
		if !slices.Contains(got.Finalizers, capstanv1.Finalizer) || len(got.Status.Inventory) != applied {
			t.Errorf("the waiting uninstall dropped its finalizer or inventory: %v, %d of %d objects", got.Finalizers, len(got.Status.Inventory), applied)
		}
		if !remoteCM() {
			t.Error("something was deleted there while the uninstall could not reach it")
		}
		return got
	}
	waiting("does not exist")

	// The Secret back, the cluster away: still waiting, and saying why.
	proxy.down()
	if err := admin.Create(ctx, kubeconfig()); err != nil {
		t.Fatal(err)
	}
	waiting("cannot reach the remote cluster")

	proxy.up(t)
	eventually(t, 120*time.Second, "the uninstall there once the cluster is back", func() bool {
		err := admin.Get(ctx, client.ObjectKeyFromObject(a), &capstanv1.Addon{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return apierrors.IsNotFound(err)
	})
	if remoteCM() {
		t.Error("the Addon went without deleting its ConfigMap there")
	}
}

// TestRemoteUninstallOfARepointedAddon installs an add-on into a second
// local control plane, then edits its kubeconfig Secret to name another
// cluster that does not answer (a loopback port nobody listens on), and
// deletes the Addon with the uninstall annotation. Its inventory is in the
// first cluster, which the kubeconfig no longer names, and the one it
// names holds nothing of the add-on: the uninstall leaves the inventory as
// a repointed add-on's does (running, unmanaged, with a
// LeftOnFormerCluster event), without waiting for the cluster that does not
// answer, and the Addon goes well within the suite's 20 s resync.
func TestRemoteUninstallOfARepointedAddon(t *testing.T) {
	ctx := context.Background()
	remote, rc, installer, proxy := startRemote(t)
	ns := newNamespace(t) // the target namespace, created there only
	name := shortName("repointed", ns)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name},
		Data: map[string][]byte{"value": remoteKubeconfig(t, remote, "https://"+proxy.addr, installer)}}
	if err := admin.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := create(t, newAddon(controllerNS, name, url, withTarget(ns), withRemote(name), withUninstall(),
		withSpec(func(s *capstanv1.AddonSpec) { s.CreateNamespace = true })))
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	if c := got.Status.InventoryCluster; c == nil || c.Server != "https://"+proxy.addr {
		t.Fatalf("the status does not record the remote cluster: %+v", c)
	}
	applied := len(got.Status.Inventory)
	t.Cleanup(func() {
		// NOTE: an uninstall that still waits would keep the Addon for
		// the rest of the suite; without the annotation it goes.
		var cur capstanv1.Addon
		if admin.Get(ctx, client.ObjectKeyFromObject(a), &cur) == nil {
			patchAnnotation(t, a, capstanv1.UninstallAnnotation, "")
		}
	})

	// A loopback port that was just free: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "https://" + ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	secret.Data["value"] = remoteKubeconfig(t, remote, gone, installer)
	if err := admin.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	got = waitFor(t, a, 30*time.Second, "the repointed kubeconfig's cluster reported unreachable", func(cur *capstanv1.Addon) bool {
		return strings.Contains(readyMessage(cur), "cannot reach the remote cluster "+gone)
	})
	if c := got.Status.InventoryCluster; c == nil || c.Server != "https://"+proxy.addr || len(got.Status.Inventory) != applied {
		t.Fatalf("the inventory is no longer recorded in the first cluster: %+v, %d of %d objects", c, len(got.Status.Inventory), applied)
	}

	deleteAndWaitGone(t, a, 15*time.Second, "the repointed Addon to be gone")
	if err := rc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-config"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("the ConfigMap in the cluster the kubeconfig no longer names: %v", err)
	}
	eventually(t, 10*time.Second, "a LeftOnFormerCluster event of the uninstall", func() bool {
		var events eventsv1.EventList
		if err := admin.List(ctx, &events, client.InNamespace(controllerNS)); err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(events.Items, func(e eventsv1.Event) bool {
			return e.Regarding.Name == name && e.Reason == "LeftOnFormerCluster" &&
				strings.Contains(e.Note, "stay in the remote cluster https://"+proxy.addr) &&
				strings.Contains(e.Note, "now names the remote cluster "+gone) &&
				strings.Contains(e.Note, "where the uninstall had nothing to delete")
		})
	})
}
