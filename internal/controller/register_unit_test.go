package controller

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/source"
)

// primarySvc builds the live primary Service as Capstan applies it for the
// Addon platform/wiki, changed by each of opts.
func primarySvc(opts ...func(*corev1.Service)) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "wiki", Name: "wiki",
			Labels: map[string]string{capstanv1.AddonLabel: "wiki", capstanv1.AddonNamespaceLabel: "platform"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.20",
			Selector: map[string]string{"app": "wiki"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 8080}}},
	}
	for _, o := range opts {
		o(svc)
	}
	return svc
}

// TestPrimaryAddressDecides checks which live primary Services the
// controller reads a manifest from: only the one Capstan applied, with a
// selector and a cluster IP, at that cluster IP; a Service a tenant
// changed to name another address is refused with what to fix.
func TestPrimaryAddressDecides(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "wiki"}}
	addon.Status.Inventory = []capstanv1.ObjectID{
		{ObjectRef: capstanv1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "wiki", Name: "wiki"}},
		{ObjectRef: capstanv1.ObjectRef{APIVersion: "v1", Kind: "Service", Namespace: "wiki", Name: "wiki"}},
	}
	slice := func(name, managedBy string) discoveryv1.EndpointSlice {
		es := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "wiki", Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: "wiki"}}}
		if managedBy != "" {
			es.Labels[discoveryv1.LabelManagedBy] = managedBy
		}
		return es
	}
	for _, tc := range []struct {
		name      string
		svc       *corev1.Service
		endpoints []discoveryv1.EndpointSlice
		port      string
		want      string // the address, or a part of the refusal
	}{
		{name: "applied ClusterIP Service", svc: primarySvc(), port: "http",
			want: "http://10.96.0.20:8080/.well-known/capstan/addon.json"},
		{name: "first port when none named", svc: primarySvc(), want: "http://10.96.0.20:8080/.well-known/capstan/addon.json"},
		{name: "the endpointslice controller's endpoints", svc: primarySvc(),
			endpoints: []discoveryv1.EndpointSlice{slice("wiki-abcde", endpointSliceController), slice("wiki-fghij", endpointSliceController)},
			want:      "http://10.96.0.20:8080/.well-known/capstan/addon.json"},
		{name: "endpoints written by hand", svc: primarySvc(),
			endpoints: []discoveryv1.EndpointSlice{slice("wiki-abcde", endpointSliceController), slice("elsewhere", "")},
			want:      `has the EndpointSlice elsewhere, which the endpointslice controller did not write`},
		{name: "endpoints of another controller", svc: primarySvc(),
			endpoints: []discoveryv1.EndpointSlice{slice("mirrored", "endpointslicemirroring-controller.k8s.io")},
			want:      `"endpointslicemirroring-controller.k8s.io"`},
		{name: "IPv6 cluster IP", svc: primarySvc(func(s *corev1.Service) { s.Spec.ClusterIP = "fd00:10:96::20" }), port: "8080",
			want: "http://[fd00:10:96::20]:8080/.well-known/capstan/addon.json"},
		{name: "not in the inventory", svc: primarySvc(func(s *corev1.Service) { s.Name = "tenant-made" }),
			want: "not in status.inventory"},
		{name: "owner labels missing", svc: primarySvc(func(s *corev1.Service) { s.Labels = nil }),
			want: "does not carry this Addon's labels"},
		{name: "another Addon's labels", svc: primarySvc(func(s *corev1.Service) { s.Labels[capstanv1.AddonNamespaceLabel] = "tenant" }),
			want: "does not carry this Addon's labels"},
		{name: "ExternalName", svc: primarySvc(func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalName, s.Spec.ClusterIP = corev1.ServiceTypeExternalName, "metadata.example", ""
		}), want: "ExternalName"},
		{name: "externalName on a ClusterIP Service", svc: primarySvc(func(s *corev1.Service) { s.Spec.ExternalName = "metadata.example" }),
			want: "ExternalName"},
		{name: "selector-less, endpoints by hand", svc: primarySvc(func(s *corev1.Service) { s.Spec.Selector = nil }),
			want: "has no selector"},
		{name: "headless", svc: primarySvc(func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }),
			want: "has no cluster IP"},
		{name: "no cluster IP yet", svc: primarySvc(func(s *corev1.Service) { s.Spec.ClusterIP = "" }),
			want: "has no cluster IP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := primaryAddress(addon, tc.svc, tc.endpoints, tc.port)
			if strings.HasPrefix(tc.want, "http://") {
				if err != nil || got != tc.want {
					t.Fatalf("primaryAddress = %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if err == nil || got != "" {
				t.Fatalf("primaryAddress = %q, nil; want a refusal that says %q", got, tc.want)
			}
			if !errors.As(err, new(primaryRefused)) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "; ") {
				t.Errorf("refusal %q; want a PrimaryRefused that says %q and what to fix", err, tc.want)
			}
		})
	}
}

// holding builds an Addon that registered the name wiki.
func holding(ns, name string) capstanv1.Addon {
	return capstanv1.Addon{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)},
		Status:     capstanv1.AddonStatus{Registration: &capstanv1.Registration{Name: "wiki"}},
	}
}

// TestHolderOfDecides checks who holds a registered name: another Addon
// whose status holds it; never the Addon itself, nor one that holds
// another name or none.
func TestHolderOfDecides(t *testing.T) {
	self := holding("platform", "wiki")
	self.Status.Registration = nil
	blog := holding("tenant", "blog")
	blog.Status.Registration.Name = "blog"
	none := holding("tenant", "wiki")
	none.Status.Registration = nil
	for _, tc := range []struct {
		name   string
		others []capstanv1.Addon
		want   string
	}{
		{"free", nil, ""},
		{"held by another", []capstanv1.Addon{blog, holding("tenant", "wiki")}, "tenant/wiki"},
		{"another name held", []capstanv1.Addon{blog}, ""},
		{"no registration", []capstanv1.Addon{none}, ""},
		{"its own entry in the list", []capstanv1.Addon{holding("platform", "wiki")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := holderOf(&self, tc.others, "wiki"); got != tc.want {
				t.Errorf("holderOf = %q; want %q", got, tc.want)
			}
		})
	}
}

// TestRegisteredByReadsTheAPIServer checks that the name is checked against
// every Addon the API server holds, not the cache: a controller started for
// a shard caches only the shard's Addons, and would find free a name an
// Addon of another shard registered.
func TestRegisteredByReadsTheAPIServer(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := capstanv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	rival := holding("other-shard", "wiki")
	shardCache := fake.NewClientBuilder().WithScheme(scheme).Build()
	apiServer := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&capstanv1.Addon{}).WithObjects(&rival).Build()
	self := holding("platform", "wiki")
	self.Status.Registration = nil
	r := &AddonReconciler{Client: shardCache, APIReader: apiServer}
	got, err := r.registeredBy(context.Background(), &self, "wiki")
	if err != nil || got != "other-shard/wiki" {
		t.Errorf("registeredBy = %q, %v; want the Addon of the other shard named", got, err)
	}
}

// TestRegisterRefusesARemotePrimary registers an add-on whose marked chart
// names a primary and no spec.registration: installed into this cluster,
// its manifest is read at the primary's cluster IP; installed into a remote
// cluster, the primary is refused, saying to set spec.registration.url,
// with no read of the Service or the manifest and no retry, since the
// remote cluster IP is no address of the controller's.
func TestRegisterRefusesARemotePrimary(t *testing.T) {
	var reads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reads.Add(1)
		_, _ = w.Write([]byte(`{"name":"wiki"}`))
	}))
	defer srv.Close()
	fetcher, err := source.NewFetcher(source.Options{Guard: netguard.Config{LoopbackOnly: true, Allow: []string{srv.Listener.Addr().String()}}})
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	number, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := capstanv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := discoveryv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	// The primary as it stands in the cluster the add-on is installed
	// into, passing every check of primaryAddress; its cluster IP and
	// port are the test server's, so a read of it is counted.
	svc := primarySvc(func(s *corev1.Service) {
		s.Spec.ClusterIP = host
		s.Spec.Ports[0].Port = int32(number)
	})
	var gets atomic.Int32
	target := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme).WithObjects(svc).Build(),
		interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets.Add(1)
			return c.Get(ctx, key, obj, opts...)
		}})
	r := &AddonReconciler{APIReader: fake.NewClientBuilder().WithScheme(scheme).Build(), Fetcher: fetcher}
	artifact := &source.Artifact{Chart: &source.Chart{Chart: &chartv2.Chart{Metadata: &chartv2.Metadata{
		Name: "wiki", Annotations: map[string]string{capstanv1.ChartAddonAnnotation: "true", capstanv1.ChartPrimaryAnnotation: "wiki:http"}}}}}

	for _, tc := range []struct {
		name       string
		server     string // the remote API server; "" for this cluster
		wantReason string
		wantReads  int32
	}{
		{name: "this cluster", wantReason: "Registered", wantReads: 1},
		{name: "a remote cluster", server: "https://remote.example:6443", wantReason: "PrimaryRefused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reads.Store(0)
			gets.Store(0)
			addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "wiki", UID: "self"}}
			addon.Status.AppliedHash = "h1"
			addon.Status.Inventory = []capstanv1.ObjectID{{ObjectRef: capstanv1.ObjectRef{APIVersion: "v1", Kind: "Service", Namespace: "wiki", Name: "wiki"}}}
			s := &scope{addon: addon, artifact: artifact, profile: capstanv1.ProfileCluster, namespace: "wiki",
				applier: &apply.Applier{Client: target}, cluster: &targetCluster{server: tc.server}}
			if _, err := r.register(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			c := apimeta.FindStatusCondition(addon.Status.Conditions, capstanv1.ConditionRegistered)
			if c == nil || c.Reason != tc.wantReason {
				t.Fatalf("condition %+v, want the reason %s", c, tc.wantReason)
			}
			if reads.Load() != tc.wantReads {
				t.Errorf("the manifest was read %d times, want %d", reads.Load(), tc.wantReads)
			}
			if tc.server == "" {
				return
			}
			if !strings.Contains(c.Message, "spec.registration.url") || !strings.Contains(c.Message, tc.server) {
				t.Errorf("the refusal %q does not name the remote cluster and spec.registration.url", c.Message)
			}
			if gets.Load() != 0 {
				t.Errorf("the remote primary Service was read %d times, want none", gets.Load())
			}
			if s.requeueAfter != 0 || addon.Status.Registration != nil {
				t.Errorf("requeued after %v with the registration %+v; want no retry and none", s.requeueAfter, addon.Status.Registration)
			}
		})
	}
}

// TestRegisterClearsARefusedRemotePrimary moves an add-on registered while
// installed into this cluster to a remote cluster with no
// spec.registration.url: its primary is refused, and its registration is
// cleared, as after any refusal, so the page shows none of its tiles and
// the name is free for another add-on.
func TestRegisterClearsARefusedRemotePrimary(t *testing.T) {
	artifact := &source.Artifact{Chart: &source.Chart{Chart: &chartv2.Chart{Metadata: &chartv2.Metadata{
		Name: "wiki", Annotations: map[string]string{capstanv1.ChartAddonAnnotation: "true", capstanv1.ChartPrimaryAnnotation: "wiki:http"}}}}}
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "wiki", UID: "self"}}
	addon.Status.AppliedHash = "h1"
	addon.Status.Registration = &capstanv1.Registration{Name: "wiki", Source: "http://10.96.0.20:8080/.well-known/capstan/addon.json", AppliedHash: "h1"}
	apimeta.SetStatusCondition(&addon.Status.Conditions, metav1.Condition{Type: capstanv1.ConditionRegistered, Status: metav1.ConditionTrue, Reason: "Registered"})
	s := &scope{addon: addon, artifact: artifact, profile: capstanv1.ProfileCluster, namespace: "wiki",
		cluster: &targetCluster{server: "https://remote.example:6443"}}
	if _, err := (&AddonReconciler{}).register(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if c := apimeta.FindStatusCondition(addon.Status.Conditions, capstanv1.ConditionRegistered); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "PrimaryRefused" {
		t.Fatalf("condition %+v, want Registered=False, reason PrimaryRefused", c)
	}
	if addon.Status.Registration != nil {
		t.Errorf("the registration %+v stays after its primary was refused", addon.Status.Registration)
	}
	other := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "wiki", UID: "other"}}
	if holder := holderOf(other, []capstanv1.Addon{*addon}, "wiki"); holder != "" {
		t.Errorf("the name is still held by %s", holder)
	}
}

// TestRegisterFollowsNoRedirectFromThePrimary reads the manifest from a
// primary Service whose server (a loopback test server at its cluster IP)
// redirects to another one serving a valid manifest: the read stops at the
// redirect (ManifestUnreadable, saying where it pointed, without user
// information), and the other server is never asked.
func TestRegisterFollowsNoRedirectFromThePrimary(t *testing.T) {
	target, hits := counting(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"name":"wiki"}`))
	})
	defer target.Close()
	withUser := strings.Replace(target.URL, "http://", "http://admin:s3cret@", 1)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, withUser+"/admin/drop", http.StatusFound)
	}))
	defer redirector.Close()
	fetcher, err := source.NewFetcher(source.Options{Guard: netguard.Config{LoopbackOnly: true, Allow: []string{"127.0.0.0/8"}}})
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(redirector.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	number, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{capstanv1.AddToScheme, corev1.AddToScheme, discoveryv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	svc := primarySvc(func(s *corev1.Service) {
		s.Spec.ClusterIP = host
		s.Spec.Ports[0].Port = int32(number)
	})
	r := &AddonReconciler{APIReader: fake.NewClientBuilder().WithScheme(scheme).Build(), Fetcher: fetcher}
	artifact := &source.Artifact{Chart: &source.Chart{Chart: &chartv2.Chart{Metadata: &chartv2.Metadata{
		Name: "wiki", Annotations: map[string]string{capstanv1.ChartAddonAnnotation: "true", capstanv1.ChartPrimaryAnnotation: "wiki:http"}}}}}
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "wiki", UID: "self"}}
	addon.Status.AppliedHash = "h1"
	addon.Status.Inventory = []capstanv1.ObjectID{{ObjectRef: capstanv1.ObjectRef{APIVersion: "v1", Kind: "Service", Namespace: "wiki", Name: "wiki"}}}
	s := &scope{addon: addon, artifact: artifact, profile: capstanv1.ProfileCluster, namespace: "wiki",
		applier: &apply.Applier{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(svc).Build()}, cluster: &targetCluster{}}
	if _, err := r.register(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	c := apimeta.FindStatusCondition(addon.Status.Conditions, capstanv1.ConditionRegistered)
	if c == nil || c.Reason != "ManifestUnreadable" || !strings.Contains(c.Message, "not redirected") {
		t.Fatalf("condition %+v, want ManifestUnreadable saying a manifest is not redirected", c)
	}
	if !strings.Contains(c.Message, "redirect to "+target.URL+"/admin/drop") || strings.Contains(c.Message, "s3cret") {
		t.Errorf("condition %q; want where the redirect pointed, without its user information", c.Message)
	}
	if hits.Load() != 0 || addon.Status.Registration != nil {
		t.Errorf("the redirect's target was asked %d times, registration %+v; want no request and nothing recorded", hits.Load(), addon.Status.Registration)
	}
}
