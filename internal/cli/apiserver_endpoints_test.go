package cli

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/netguard"
)

func TestAPIServerDenyEntriesFromSlices(t *testing.T) {
	slice := func(t discoveryv1.AddressType, addrs ...string) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{AddressType: t}
		for _, a := range addrs {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}})
		}
		return s
	}
	notReady := slice(discoveryv1.AddressTypeIPv4, "10.0.0.3")
	ready := false
	notReady.Endpoints[0].Conditions.Ready = &ready
	for _, tc := range []struct {
		name   string
		slices []*discoveryv1.EndpointSlice
		want   []string
	}{
		{"none", nil, nil},
		{"one server", []*discoveryv1.EndpointSlice{slice(discoveryv1.AddressTypeIPv4, "172.18.0.2")}, []string{"172.18.0.2"}},
		{"several, sorted and once each", []*discoveryv1.EndpointSlice{
			slice(discoveryv1.AddressTypeIPv4, "10.0.0.2", "10.0.0.1"), slice(discoveryv1.AddressTypeIPv4, "10.0.0.1"),
		}, []string{"10.0.0.1", "10.0.0.2"}},
		{"dual stack", []*discoveryv1.EndpointSlice{
			slice(discoveryv1.AddressTypeIPv4, "10.0.0.1"), slice(discoveryv1.AddressTypeIPv6, "fd00::1"),
		}, []string{"10.0.0.1", "fd00::1"}},
		{"a server not ready is still the API server", []*discoveryv1.EndpointSlice{notReady}, []string{"10.0.0.3"}},
		{"FQDN slices and bad addresses are skipped", []*discoveryv1.EndpointSlice{
			slice(discoveryv1.AddressTypeFQDN, "api.example.com"), slice(discoveryv1.AddressTypeIPv4, "not-an-ip"),
		}, nil},
	} {
		if got := apiServerDenyEntries(tc.slices); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestAPIServerEndpointsAreRefused reads the default/kubernetes
// EndpointSlices of the local control plane as the controller does at
// start, and checks the fetch guard then refuses each address on every
// port, even allow-listed; a slice added while the watch runs is refused
// too, and the last addresses stay refused when the slices hold none.
// It reads them as the controller's user, with its role's rights. Nothing
// is dialled: the guard's decision is asked.
//
// The local API server publishes no endpoint of its own (it listens on
// loopback, which an EndpointSlice may not hold), so the test publishes
// them as the API server's endpoint reconciler would, at documentation
// addresses (192.0.2.0/24).
func TestAPIServerEndpointsAreRefused(t *testing.T) {
	_, c := apiServer(t)
	ctx := t.Context()
	publish := func(name, addr string) {
		t.Helper()
		s := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name,
				Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes", discoveryv1.LabelManagedBy: "capstan-test"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}}},
			Ports:       []discoveryv1.EndpointPort{{Name: ptr("https"), Port: ptr(int32(6443))}},
		}
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), s) })
	}
	// Another Service's slice in the namespace is not the API server.
	other := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "capstan-test-other", Labels: map[string]string{discoveryv1.LabelServiceName: "other"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"192.0.2.99"}}},
	}
	if err := c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), other) })
	publish("capstan-test-kubernetes-a", "192.0.2.10")

	deny := &netguard.DenyList{}
	g, err := netguard.New(netguard.Config{Allow: []string{"0.0.0.0/0", "::/0"}, DenyLive: deny})
	if err != nil {
		t.Fatal(err)
	}
	refused := func(addr string) bool {
		for _, port := range []int{443, 6443, 10250} {
			if err := g.Allowed(netip.MustParseAddr(addr), port); !netguard.IsRefused(err) {
				return false
			}
		}
		return true
	}
	if refused("192.0.2.10") {
		t.Fatal("192.0.2.10 is refused before the endpoints were read")
	}
	// As the controller's own user, with the rights its role gives it.
	asController := shared.cluster.ConfigFor(install.ControllerUser)
	reader, err := client.New(asController, client.Options{Scheme: Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(asController)
	if err != nil {
		t.Fatal(err)
	}
	e := &apiServerEndpoints{Reader: reader, Clientset: cs, Deny: deny, Log: logr.Discard()}
	if err := e.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if !refused("192.0.2.10") {
		t.Error("the API server's endpoint 192.0.2.10 is not refused on every port")
	}
	if refused("192.0.2.99") {
		t.Error("another Service's endpoint is refused")
	}

	go func() { _ = e.Start(ctx) }()
	publish("capstan-test-kubernetes-b", "192.0.2.11")
	deadline := time.Now().Add(30 * time.Second)
	for !refused("192.0.2.11") {
		if time.Now().After(deadline) {
			t.Fatal("an endpoint added while the watch runs is not refused")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !refused("192.0.2.10") {
		t.Error("192.0.2.10 is no longer refused")
	}
	if err := e.set(nil); err != nil || !refused("192.0.2.11") {
		t.Errorf("slices with no address let the last addresses through (%v)", err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestAPIServerEndpointsFirstRead checks the read before the first fetch:
// a user the API server refuses the read to stops the controller at once,
// with what to fix; an API server that fails is read again until it
// answers.
func TestAPIServerEndpointsFirstRead(t *testing.T) {
	_, _ = apiServer(t)
	nobody, err := client.New(shared.cluster.ConfigFor("capstan-test-nobody"), client.Options{Scheme: Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	e := &apiServerEndpoints{Reader: nobody, Deny: &netguard.DenyList{}, Log: logr.Discard()}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := e.First(ctx); err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "must allow list and watch on endpointslices") {
		t.Fatalf("want a refusal at once that says what to fix, got %v", err)
	}

	flaky := &failingReader{Reader: shared.client, failures: 2}
	e = &apiServerEndpoints{Reader: flaky, Deny: &netguard.DenyList{}, Log: logr.Discard()}
	if err := e.First(t.Context()); err != nil || flaky.calls != 3 {
		t.Fatalf("want a read after two failures, got %v after %d calls", err, flaky.calls)
	}
}

// failingReader fails its first lists as an API server that does not
// answer yet.
type failingReader struct {
	client.Reader
	failures, calls int
}

func (r *failingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.calls++
	if r.calls <= r.failures {
		return errors.New("connection refused")
	}
	return r.Reader.List(ctx, list, opts...)
}
