package cli

import (
	"context"
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/netguard"
)

// TestRemoteClusterAllowFlag: capstan plan takes --remote-cluster-allow,
// the flag its refusals of a remote cluster name, as the controller does.
func TestRemoteClusterAllowFlag(t *testing.T) {
	for _, cmd := range []string{"plan", "controller"} {
		c, _, err := NewRootCommand().Find([]string{cmd})
		if err != nil {
			t.Fatal(err)
		}
		if c.Flags().Lookup("remote-cluster-allow") == nil {
			t.Errorf("capstan %s has no --remote-cluster-allow", cmd)
		}
	}
}

// TestPlanRefusesThisAPIServerAsARemoteCluster: capstan plan of a
// cluster-profile Addon whose kubeconfig names this cluster's own API
// server refuses it, as the controller does, even with
// --remote-cluster-allow covering its address; another loopback server is
// refused with a message that names the flag. The control plane is on
// loopback, and nothing is dialled.
func TestPlanRefusesThisAPIServerAsARemoteCluster(t *testing.T) {
	cluster, c := apiServer(t)
	ctx := t.Context()
	const name = "plan-self-apiserver"
	kc := clientcmdapi.NewConfig()
	kc.Clusters["self"] = &clientcmdapi.Cluster{Server: cluster.Config.Host, CertificateAuthorityData: cluster.Config.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cluster.Config.CertData, ClientKeyData: cluster.Config.KeyData,
		Impersonate: "system:serviceaccount:" + install.Namespace + ":" + install.AddonsServiceAccount}
	kc.Contexts["self"] = &clientcmdapi.Context{Cluster: "self", AuthInfo: "admin"}
	kc.CurrentContext = "self"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: name}, Data: map[string][]byte{"value": data}}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), secret) })
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: name},
		Spec: capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: "https://127.0.0.1:9/" + name + "-1.0.0.tgz"},
			KubeConfig: &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: name}}}}
	if err := c.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), a) })

	out, err := capstan(t, cluster, "plan", name, "-n", install.Namespace, "--remote-cluster-allow", "127.0.0.0/8")
	if err == nil || !strings.Contains(err.Error(), string(netguard.ReasonDenied)) {
		t.Errorf("plan of an Addon whose kubeconfig names this cluster's API server, with --remote-cluster-allow=127.0.0.0/8: %v; want it refused as %s\n%s", err, netguard.ReasonDenied, out)
	}

	// Another loopback server, which no deny entry names, is refused for
	// being loopback, and the message names the flag that opens it.
	kc.Clusters["self"].Server = "https://127.0.0.2:6443"
	if secret.Data["value"], err = clientcmd.Write(*kc); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	out, err = capstan(t, cluster, "plan", name, "-n", install.Namespace)
	if err == nil || !strings.Contains(err.Error(), "--remote-cluster-allow=127.0.0.2/32") {
		t.Errorf("plan of an Addon whose kubeconfig names a loopback server: %v; want it refused, naming --remote-cluster-allow\n%s", err, out)
	}
}

// TestPlanGuards: the guards capstan plan builds refuse this cluster's API
// server at the address its kubeconfig names and at the endpoints of the
// default/kubernetes Service, read once, on every port; the remote one
// takes --fetch-deny-private. A person who may not read the endpoints
// still plans, with the API server's own address refused. Only the
// decisions are checked: nothing is dialled.
func TestPlanGuards(t *testing.T) {
	cluster, c := apiServer(t)
	ctx := t.Context()
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "capstan-test-plan-guards",
			Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes", discoveryv1.LabelManagedBy: "capstan-test"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"192.0.2.20"}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("https"), Port: ptr(int32(6443))}},
	}
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), s) })
	u, err := url.Parse(cluster.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	host := netip.MustParseAddrPort(u.Host)

	reason := func(cfg netguard.Config, ap netip.AddrPort) netguard.Reason {
		t.Helper()
		g, err := netguard.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = g.Allowed(ap.Addr(), int(ap.Port()))
		if err == nil {
			return ""
		}
		var r *netguard.RefusedError
		if !errors.As(err, &r) {
			t.Fatalf("%s: %v is not a refusal", ap, err)
		}
		return r.Reason
	}
	fetch, remote, err := planGuards(ctx, cluster.Config, c, netguard.Config{DenyPrivate: true}, []string{"127.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		guard string
		cfg   netguard.Config
		addr  netip.AddrPort
		want  netguard.Reason
	}{
		{"remote", remote, host, netguard.ReasonDenied},
		{"remote", remote, netip.MustParseAddrPort("192.0.2.20:6443"), netguard.ReasonDenied},
		{"remote", remote, netip.MustParseAddrPort("192.0.2.20:443"), netguard.ReasonDenied},
		{"remote", remote, netip.MustParseAddrPort("10.1.2.3:443"), netguard.ReasonPrivate},
		{"remote", remote, netip.MustParseAddrPort("192.0.2.21:443"), ""},
		{"fetch", fetch, host, netguard.ReasonDenied},
		{"fetch", fetch, netip.MustParseAddrPort("192.0.2.20:443"), netguard.ReasonDenied},
	} {
		if got := reason(tc.cfg, tc.addr); got != tc.want {
			t.Errorf("the %s guard on %s: %q, want %q", tc.guard, tc.addr, got, tc.want)
		}
	}

	nobody, err := client.New(cluster.ConfigFor("capstan-test-nobody"), client.Options{Scheme: Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	_, remote, err = planGuards(ctx, cluster.Config, nobody, netguard.Config{}, []string{"127.0.0.0/8"})
	if err != nil {
		t.Fatalf("a person who may not read the API server's endpoints cannot plan: %v", err)
	}
	if got := reason(remote, host); got != netguard.ReasonDenied {
		t.Errorf("without the endpoints, the API server's own address: %q, want %q", got, netguard.ReasonDenied)
	}
}
