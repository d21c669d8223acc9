package controller_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/testcluster"
)

// tcpProxy forwards a loopback port to another, and can be cut and
// restored on the same port: a remote cluster that goes away and comes back.
type tcpProxy struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]bool
}

func (p *tcpProxy) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	if p.conns == nil {
		p.conns = map[net.Conn]bool{}
	}
	p.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", p.target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns[in], p.conns[out] = true, true
			p.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
}

// down closes the listener and every open connection.
func (p *tcpProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

// remoteKubeconfig is a kubeconfig for server with the remote cluster's
// admin credentials, acting as the account as; everything is embedded.
func remoteKubeconfig(t *testing.T, remote *testcluster.Cluster, server, as string) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["edge"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: remote.Config.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: remote.Config.CertData, ClientKeyData: remote.Config.KeyData, Impersonate: as}
	kc.Contexts["edge"] = &clientcmdapi.Context{Cluster: "edge", AuthInfo: "admin"}
	kc.CurrentContext = "edge"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// startRemote runs a second local control plane, a remote cluster, with
// the account Capstan acts as there (installer, bound to cluster-admin)
// and a loopback proxy to its API server; both stop when the test ends.
func startRemote(t *testing.T) (remote *testcluster.Cluster, rc client.Client, installer string, proxy *tcpProxy) {
	t.Helper()
	ctx := context.Background()
	remote, err := testcluster.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remote.Stop)
	rc, err = client.New(remote.Config, client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	installer = "system:serviceaccount:capstan-remote:installer"
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "capstan-remote"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-remote", Name: "installer"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "capstan-installer"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "capstan-remote", Name: "installer"}}},
	} {
		if err := rc.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	proxy = &tcpProxy{addr: "127.0.0.1:0", target: strings.TrimPrefix(remote.Config.Host, "https://")}
	proxy.up(t)
	t.Cleanup(proxy.down)
	return remote, rc, installer, proxy
}

// TestRemoteCluster runs a second local control plane and installs an
// add-on into it from the first, through a kubeconfig Secret: the objects,
// a hook, drift, pruning and the impersonated account all happen there and
// nothing here, and uninstalling deletes them there. Cutting the connection leaves the remote software as it
// runs, with a condition that says the cluster cannot be reached, and the
// add-on recovers by itself once it is back. Bad kubeconfigs and a
// restricted add-on that names one are refused clearly.
func TestRemoteCluster(t *testing.T) {
	ctx := context.Background()
	remote, rc, installer, proxy := startRemote(t)

	ns := newNamespace(t) // the target namespace, created there only
	name := "remote-" + ns
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name},
		Data: map[string][]byte{"value": remoteKubeconfig(t, remote, "https://"+proxy.addr, installer)}}
	if err := admin.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	hook := `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-hook
  annotations: {"helm.sh/hook": post-install}
data: {ran: "yes"}
`
	extra := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-extra\n"
	url1, _ := charts.publish(t, webChart("1.0.0", map[string]string{"templates/hook.yaml": hook, "templates/extra.yaml": extra}))
	a := create(t, newAddon(controllerNS, name, url1, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.CreateNamespace, s.Prune = true, true
		s.KubeConfig = &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: name}}
	})))
	// Synced is applied and healthy: the Deployment is Available there.
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	if p := got.Status.Plan; p == nil || !hasNotice(p, "spec.kubeConfig") {
		t.Errorf("the plan does not say which cluster it installs into: %+v", p)
	}
	remoteCM := func(suffix string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{}
		err := rc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + suffix}, cm)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return cm
	}
	for _, suffix := range []string{"-config", "-extra", "-hook"} {
		if remoteCM(suffix) == nil {
			t.Fatalf("ConfigMap %s%s is not in the remote cluster", name, suffix)
		}
	}
	if live(t, "v1", "ConfigMap", ns, name+"-config") != nil {
		t.Error("the add-on's ConfigMap was applied in the controller's own cluster")
	}

	// The remote API server attributes the writes to the account the
	// kubeconfig names.
	eventually(t, 20*time.Second, "the remote audit log to name the installer", func() bool {
		events, err := remote.AuditEvents()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			if e.ObjectRef != nil && e.ObjectRef.Resource == "configmaps" && e.ObjectRef.Name == name+"-config" &&
				e.ImpersonatedUser != nil && e.ImpersonatedUser.Username == installer && e.ResponseStatus != nil && e.ResponseStatus.Code < 300 {
				return true
			}
		}
		return false
	})

	// Drift there is undone.
	if err := rc.Delete(ctx, remoteCM("-config")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the deleted remote ConfigMap to come back", func() bool { return remoteCM("-config") != nil })

	// An upgrade without the extra ConfigMap prunes it there.
	url2, _ := charts.publish(t, webChart("1.0.1", map[string]string{"templates/hook.yaml": hook}))
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url2 })
	eventually(t, 60*time.Second, "the extra ConfigMap to be pruned there", func() bool { return remoteCM("-extra") == nil })
	waitPhase(t, a, capstanv1.PhaseSynced)

	// The remote cluster goes away: a change waits, with a condition that
	// says so, and what runs there is left as it is.
	proxy.down()
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("greeting: hi") })
	got = waitFor(t, a, 90*time.Second, "a condition for the unreachable cluster", func(cur *capstanv1.Addon) bool {
		return strings.Contains(readyMessage(cur), "cannot reach the remote cluster")
	})
	t.Logf("unreachable: %s: %s", readyReason(got), readyMessage(got))
	if cm := remoteCM("-config"); cm == nil || cm.Data["greeting"] != "hello" {
		t.Errorf("the remote ConfigMap changed while the cluster was away: %+v", cm)
	}
	proxy.up(t)
	waitFor(t, a, 120*time.Second, "the add-on to recover by itself", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.ObservedGeneration == cur.Generation
	})
	if cm := remoteCM("-config"); cm == nil || cm.Data["greeting"] != "hi" {
		t.Errorf("the change was not applied once the cluster came back: %+v", cm)
	}

	// Uninstalling deletes the inventory there.
	update(t, a, func(cur *capstanv1.Addon) {
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[capstanv1.UninstallAnnotation] = "true"
	})
	if err := admin.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the uninstall to delete the remote objects", func() bool { return remoteCM("-config") == nil })

	// An approval binds the cluster: one given for the cluster the Secret
	// named then applies nothing once the Secret is repointed to another,
	// although the plan there is the same (here the same cluster through
	// another address, which is all a plan's hash can tell apart).
	other := &tcpProxy{addr: "127.0.0.1:0", target: proxy.target}
	other.up(t)
	defer other.down()
	bound := name + "-bound"
	if err := admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: bound},
		Data: map[string][]byte{"value": remoteKubeconfig(t, remote, "https://"+proxy.addr, installer)}}); err != nil {
		t.Fatal(err)
	}
	b := create(t, newAddon(controllerNS, bound, url2, withTarget(ns+"-bound"), withSpec(func(s *capstanv1.AddonSpec) {
		s.CreateNamespace, s.Suspend = true, true
		s.KubeConfig = &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: bound}}
	})))
	approved := waitPhase(t, b, capstanv1.PhaseSuspended).Status.Plan
	repointed := &corev1.Secret{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: controllerNS, Name: bound}, repointed); err != nil {
		t.Fatal(err)
	}
	repointed.Data["value"] = remoteKubeconfig(t, remote, "https://"+other.addr, installer)
	if err := admin.Update(ctx, repointed); err != nil {
		t.Fatal(err)
	}
	// The install approved before the Secret changed, as `capstan addon
	// install` writes it.
	update(t, b, func(cur *capstanv1.Addon) {
		cur.Spec.Suspend, cur.Spec.ApprovedPlan = false, approved.Hash
		cur.Spec.SyncRequest = max(cur.Spec.SyncRequest, cur.Status.LastSyncRequest) + 1
	})
	got = waitFor(t, b, 60*time.Second, "the approval for the other address to be refused or applied", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == cur.Generation && cur.Status.Phase != capstanv1.PhaseSuspended &&
			(readyReason(cur) == "ApprovalStale" || cur.Status.LastSyncRequest == cur.Spec.SyncRequest)
	})
	if readyReason(got) != "ApprovalStale" || got.Status.Plan.Hash == approved.Hash {
		t.Errorf("an approval given for %s applied to %s: %s", proxy.addr, other.addr, describeStatus(got))
	}
	if s := got.Status.Plan.Summary; s != approved.Summary {
		t.Errorf("the plan for the other address is not the same plan: %+v, approved %+v", s, approved.Summary)
	}
	if err := rc.Get(ctx, client.ObjectKey{Name: ns + "-bound"}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("the stale approval applied the plan there: %v", err)
	}

	// Bad kubeconfigs say what to fix and apply nothing.
	bad := map[string][]byte{
		"exec": []byte(strings.Replace(string(secret.Data["value"]), "    as: "+installer, "    as: "+installer+"\n    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh}", 1)),
		"here": remoteKubeconfig(t, remote, cluster.Config.Host, installer), // this cluster's own API server
	}
	for what, data := range bad {
		sname := name + "-" + what
		if err := admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: sname}, Data: map[string][]byte{"value": data}}); err != nil {
			t.Fatal(err)
		}
		b := create(t, newAddon(controllerNS, sname, url2, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
			s.KubeConfig = &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: sname}}
		})))
		says := map[string]string{"exec": "exec credential plugin", "here": "cannot reach the remote cluster"}[what]
		got := waitFor(t, b, 60*time.Second, what+" refused", func(cur *capstanv1.Addon) bool { return strings.Contains(readyMessage(cur), says) })
		if what == "here" && !strings.Contains(readyMessage(got), "fetch guard") {
			t.Errorf("a kubeconfig for this cluster's own API server was not refused by the guard: %s", readyMessage(got))
		}
	}

	// A restricted add-on installs into its own cluster only.
	if err := admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kc"}, Data: secret.Data}); err != nil {
		t.Fatal(err)
	}
	r := create(t, newAddon(ns, "tenant", url2, withSpec(func(s *capstanv1.AddonSpec) {
		s.KubeConfig = &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: "kc"}}
	})))
	waitFor(t, r, 90*time.Second, "the restricted add-on Blocked", violationRule("remote-cluster"))
}

// TestRestrictedKubeConfigIsNeverRead: a restricted add-on whose
// spec.kubeConfig names a Secret of its namespace is Blocked by the
// remote-cluster guardrail, and the controller neither reads that Secret
// nor dials the server it names: not when the Secret is unlabelled, not
// when it is labelled for the add-on (the label consents to a read, and
// the guardrail still refuses the field), and a Secret that does not
// exist is not reported missing.
func TestRestrictedKubeConfigIsNeverRead(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	// The server the kubeconfigs name: a loopback port, which the suite's
	// remote guard lets the controller dial, that counts who connects.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var dialled atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dialled.Add(1)
			c.Close()
		}
	}()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["edge"] = &clientcmdapi.Cluster{Server: "https://" + ln.Addr().String(), CertificateAuthorityData: charts.caPEM}
	kc.AuthInfos["tenant"] = &clientcmdapi.AuthInfo{Token: "a token of the platform's", Impersonate: "system:serviceaccount:edge:installer"}
	kc.Contexts["edge"] = &clientcmdapi.Context{Cluster: "edge", AuthInfo: "tenant"}
	kc.CurrentContext = "edge"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	for _, tc := range []struct {
		addon  string
		labels map[string]string // nil: the Secret does not exist
	}{
		{"labelled", map[string]string{capstanv1.AddonLabel: "labelled"}},
		{"unlabelled", map[string]string{}},
		{"missing", nil},
	} {
		secret := "kc-" + tc.addon
		if tc.labels != nil {
			if err := admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret, Labels: tc.labels},
				Data: map[string][]byte{"value": data}}); err != nil {
				t.Fatal(err)
			}
		}
		a := create(t, newAddon(ns, tc.addon, url, withSpec(func(s *capstanv1.AddonSpec) {
			s.KubeConfig = &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: secret}}
		})))
		got := waitFor(t, a, 90*time.Second, tc.addon+": Blocked by remote-cluster", violationRule("remote-cluster"))
		if msg := readyMessage(got); strings.Contains(msg, secret) {
			t.Errorf("%s: the message speaks of the kubeconfig Secret, which a restricted add-on never reads: %s", tc.addon, msg)
		}
		if got.Status.InventoryCluster != nil && got.Status.InventoryCluster.Server != "" {
			t.Errorf("%s: the status records a remote cluster: %+v", tc.addon, got.Status.InventoryCluster)
		}
	}
	if n := dialled.Load(); n != 0 {
		t.Errorf("the server a restricted add-on's kubeconfig names was dialled %d time(s)", n)
	}
}

// TestRemoteClusterLifecycle: a change to the kubeconfig Secret reconciles
// its add-on at once, not at the resync, and the clients and watch cache of
// a remote cluster are released once no add-on uses its kubeconfig: when
// the last one is repointed to another Secret, paused, or deleted.
func TestRemoteClusterLifecycle(t *testing.T) {
	ctx := context.Background()
	remote, _, installer, proxy := startRemote(t)
	ns := newNamespace(t) // the target namespace, created there only
	name := "lifecycle-" + ns

	// A kubeconfig refused for what it holds (no account to act as) stalls
	// the add-on until the next resync, unless the Secret's change wakes it.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name},
		Data: map[string][]byte{"value": remoteKubeconfig(t, remote, "https://"+proxy.addr, "")}}
	if err := admin.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := create(t, newAddon(controllerNS, name, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.CreateNamespace = true
		s.KubeConfig = &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: name}}
	})))
	const refused = "names no account to act as"
	waitFor(t, a, 60*time.Second, "the kubeconfig refused", func(cur *capstanv1.Addon) bool { return strings.Contains(readyMessage(cur), refused) })
	secret.Data["value"] = remoteKubeconfig(t, remote, "https://"+proxy.addr, installer)
	if err := admin.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	fixed := time.Now()
	got := waitFor(t, a, 60*time.Second, "the fixed kubeconfig to be read", func(cur *capstanv1.Addon) bool { return !strings.Contains(readyMessage(cur), refused) })
	// The suite's resync is 20 s; the Secret's change is seen in well
	// under a second.
	if took := time.Since(fixed); took > 12*time.Second {
		t.Errorf("the add-on read its fixed kubeconfig %s after the Secret changed, as the resync would: %s", took.Round(time.Second), describeStatus(got))
	}
	waitPhase(t, a, capstanv1.PhaseSynced)
	if !reconciler.HoldsRemoteCluster(controllerNS, name, "") {
		t.Fatal("the controller holds no remote cluster for the add-on it just synced there")
	}

	// Repointed to another Secret (another key of it), the add-on leaves
	// the first kubeconfig, which no other add-on names: it is released.
	other := name + "-fleet"
	if err := admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: other},
		Data: map[string][]byte{"edge": secret.Data["value"]}}); err != nil {
		t.Fatal(err)
	}
	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.KubeConfig = &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: other}, Key: "edge"}
	})
	eventually(t, 30*time.Second, "the repointed add-on to use the other kubeconfig", func() bool {
		return reconciler.HoldsRemoteCluster(controllerNS, other, "edge")
	})
	if reconciler.HoldsRemoteCluster(controllerNS, name, "") {
		t.Error("the kubeconfig the add-on left is still held, with its watch cache")
	}
	waitPhase(t, a, capstanv1.PhaseSynced)

	// Paused, it reads nothing there and holds nothing; resumed, it builds
	// the cluster anew.
	patchAnnotation(t, a, capstanv1.PausedAnnotation, "true")
	eventually(t, 30*time.Second, "the paused add-on's remote cluster to be released", func() bool {
		return !reconciler.HoldsRemoteCluster(controllerNS, other, "edge")
	})
	patchAnnotation(t, a, capstanv1.PausedAnnotation, "")
	eventually(t, 30*time.Second, "the resumed add-on to use its remote cluster again", func() bool {
		return reconciler.HoldsRemoteCluster(controllerNS, other, "edge")
	})
	waitPhase(t, a, capstanv1.PhaseSynced)

	// Deleted (the default policy leaves its software running there), the
	// add-on releases the other kubeconfig too.
	if err := admin.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the Addon to be gone", func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(a), &capstanv1.Addon{}))
	})
	eventually(t, 10*time.Second, "the deleted add-on's remote cluster to be released", func() bool {
		return !reconciler.HoldsRemoteCluster(controllerNS, other, "edge")
	})
}

// TestRemoteClusterDroppedWithItsSecret: an admin who breaks a kubeconfig
// (here with an exec plugin, which is refused) or deletes its Secret, to
// cut Capstan off from that cluster, gets the clients and watch cache built
// from it released; the kubeconfig restored builds them again. An add-on
// repointed from it to a Secret that does not exist releases them too.
// The remote API server is a loopback port that answers nothing, which is
// enough for the controller to build and hold the cluster.
func TestRemoteClusterDroppedWithItsSecret(t *testing.T) {
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	name := fmt.Sprintf("dropped-%d", time.Now().UnixNano()%100000)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["edge"] = &clientcmdapi.Cluster{Server: "https://" + ln.Addr().String()}
	kc.AuthInfos["installer"] = &clientcmdapi.AuthInfo{Token: "abc", Impersonate: "system:serviceaccount:capstan:installer"}
	kc.Contexts["edge"] = &clientcmdapi.Context{Cluster: "edge", AuthInfo: "installer"}
	kc.CurrentContext = "edge"
	good, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	kc.AuthInfos["installer"].Exec = &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: "/bin/sh"}
	withExec, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name},
		Data: map[string][]byte{"value": good}}
	if err := admin.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := create(t, newAddon(controllerNS, name, url, withSpec(func(s *capstanv1.AddonSpec) {
		s.KubeConfig = &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: name}}
	})))
	t.Cleanup(func() { _ = admin.Delete(context.Background(), a) })
	held := func() bool { return reconciler.HoldsRemoteCluster(controllerNS, name, "") }
	eventually(t, 30*time.Second, "the controller to build the remote cluster", held)

	secret.Data["value"] = withExec
	if err := admin.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the cluster of the refused kubeconfig to be released", func() bool { return !held() })
	waitFor(t, a, 30*time.Second, "the refusal", func(cur *capstanv1.Addon) bool {
		return strings.Contains(readyMessage(cur), "exec credential plugin")
	})

	secret.Data["value"] = good
	if err := admin.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the restored kubeconfig's cluster to be built again", held)

	if err := admin.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the cluster of the deleted Secret to be released", func() bool { return !held() })
	waitFor(t, a, 30*time.Second, "the missing Secret to be named", func(cur *capstanv1.Addon) bool {
		return strings.Contains(readyMessage(cur), "does not exist")
	})

	// Restored, then left for a Secret that does not exist: the cluster
	// of the Secret the add-on left, which is still there, is released.
	secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name},
		Data: map[string][]byte{"value": good}}
	if err := admin.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), secret) })
	eventually(t, 30*time.Second, "the recreated Secret's cluster to be built again", held)
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.KubeConfig.SecretRef.Name = name + "-missing" })
	eventually(t, 30*time.Second, "the cluster of the Secret the add-on left to be released", func() bool { return !held() })
	waitFor(t, a, 30*time.Second, "the missing Secret to be named", func(cur *capstanv1.Addon) bool {
		return strings.Contains(readyMessage(cur), name+"-missing that spec.kubeConfig names does not exist")
	})
}

// TestRemoteAccountWithoutClusterWatch installs into a second local control
// plane as an account with the admin role in the target namespace only,
// as a least-privilege remote account often is. The install works; the
// watch cache there, whose informers list and watch cluster-wide, is
// refused, and the plan says which resources, in which cluster, and the
// verbs to grant, so that drift there waiting for the resync is not a
// silent surprise.
func TestRemoteAccountWithoutClusterWatch(t *testing.T) {
	ctx := context.Background()
	remote, rc, _, proxy := startRemote(t)
	ns := newNamespace(t)
	name := "scoped-" + ns
	scoped := "system:serviceaccount:capstan-remote:scoped"
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-remote", Name: "scoped"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "capstan-scoped"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "admin"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "capstan-remote", Name: "scoped"}}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "capstan-scoped-namespaces"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "capstan-scoped-namespaces"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "capstan-scoped-namespaces"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "capstan-remote", Name: "scoped"}}},
	} {
		if err := rc.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name},
		Data: map[string][]byte{"value": remoteKubeconfig(t, remote, "https://"+proxy.addr, scoped)}}); err != nil {
		t.Fatal(err)
	}
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := create(t, newAddon(controllerNS, name, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.KubeConfig = &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: name}}
	})))
	waitPhase(t, a, capstanv1.PhaseSynced)
	if err := rc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-config"}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("the install as the namespaced account: %v", err)
	}
	var notice string
	for i := int64(1); notice == ""; i++ {
		if i > 6 {
			t.Fatal("no plan says that drift there is not watched")
		}
		update(t, a, func(cur *capstanv1.Addon) { cur.Spec.SyncRequest = i })
		got := waitFor(t, a, 60*time.Second, "the sync request", func(cur *capstanv1.Addon) bool {
			return cur.Status.LastSyncRequest == i && cur.Status.Plan != nil
		})
		for _, n := range got.Status.Plan.Notices {
			if strings.Contains(n.Message, "is not watched") {
				notice = n.Message
			}
		}
		if notice == "" {
			time.Sleep(2 * time.Second)
		}
	}
	for _, want := range []string{"configmaps", "deployments.apps", "the remote cluster https://" + proxy.addr, scoped, "list and watch", "ClusterRole"} {
		if !strings.Contains(notice, want) {
			t.Errorf("the notice does not say %q: %s", want, notice)
		}
	}
}

// TestAnotherClustersTwinIsNotTheAddons: a remote add-on installs
// Deployment NS/NAME into a second local control plane; a tenant creates
// a Deployment of the same namespace and name in the controller's own
// cluster, with the add-on's labels, and patches another label on it every
// 500 ms for 20 s, while an add-on here has the watch cache here watch
// Deployments. That is not the remote add-on's object: the controller's
// reconcile count shows no look at it.
func TestAnotherClustersTwinIsNotTheAddons(t *testing.T) {
	ctx := context.Background()
	remote, rc, installer, proxy := startRemote(t)
	ns := newNamespace(t) // here, and created there below
	name := "twin-" + ns
	if err := rc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name},
		Data: map[string][]byte{"value": remoteKubeconfig(t, remote, "https://"+proxy.addr, installer)}}); err != nil {
		t.Fatal(err)
	}
	// A shard of its own, whose controller resyncs every 10 minutes: what
	// reconciles in the window is the watch.
	shard := startShard(t, "twin-"+ns[len(ns)-5:], func(c *controller.Config) { c.ResyncInterval = 10 * time.Minute })
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := create(t, newAddon(controllerNS, name, url, withTarget(ns), shard, withSpec(func(s *capstanv1.AddonSpec) {
		s.KubeConfig = &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: name}}
	})))
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	// An add-on here, so that the watch cache here watches Deployments.
	here := newNamespace(t)
	waitPhase(t, create(t, newAddon(controllerNS, "here-"+here, url, withTarget(here), shard)), capstanv1.PhaseSynced)
	time.Sleep(5 * time.Second) // the prompt looks after the installs

	labels := got.AppliedLabels()
	twin := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "twin"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "twin"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}},
		}}
	if err := admin.Create(ctx, twin); err != nil {
		t.Fatal(err)
	}
	tick := func(i int) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"labels":{"tick":"%d"}}}`, i)
		if err := admin.Patch(ctx, twin, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	before := reconcilesOf(a)
	for i := range 40 {
		tick(i)
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	if n := reconcilesOf(a) - before; n > 1 {
		t.Errorf("a tenant's Deployment of the same name here, patched in a loop, reconciled the remote add-on %d times in 20 s; want none", n)
	}

	// The add-on's own Deployment there is deleted while the twin here is
	// edited, its spec each time (a new generation: an update the drift
	// check weighs, where a label outside Capstan's is not even seen),
	// right after and for a while: the twin's changes do not take the
	// place of the deletion, which is undone before the resync.
	own := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	deleted, beforeDelete := time.Now(), reconcilesOf(a)
	if err := rc.Delete(ctx, own); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		edit := fmt.Sprintf(`{"spec":{"minReadySeconds":%d}}`, i+1)
		if err := admin.Patch(ctx, twin, client.RawPatch(types.MergePatchType, []byte(edit))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	eventually(t, soon, "the remote Deployment created again", func() bool {
		got := &appsv1.Deployment{}
		return rc.Get(ctx, client.ObjectKeyFromObject(own), got) == nil && got.DeletionTimestamp == nil
	})
	t.Logf("the remote Deployment was back %s after its deletion, after %d reconciles", time.Since(deleted).Round(100*time.Millisecond), reconcilesOf(a)-beforeDelete)
}
