package controller

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/remote"
)

// TestHeldByDecides is heldBy's decision, with the Addons read from a fake
// client: another Addon of the same cluster that holds the object holds it;
// one that is gone, of another cluster, or that let it go does not; a
// never-delete kind is held by no one; and an Addon that cannot be read is
// an error, never an Addon that is gone.
func TestHeldByDecides(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := capstanv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cm := capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: "same-cm"}
	ns := capstanv1.ObjectRef{APIVersion: "v1", Kind: "Namespace", Name: "apps"}
	holder := func(name string, kubeConfig *capstanv1.KubeConfigReference, inventory ...capstanv1.ObjectRef) *capstanv1.Addon {
		return &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: name},
			Spec:   capstanv1.AddonSpec{KubeConfig: kubeConfig},
			Status: capstanv1.AddonStatus{Inventory: capstanv1.IDsOf(inventory)}}
	}
	remote := &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: "remote"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&capstanv1.Addon{}).WithObjects(
		holder("holds", nil, cm), holder("let-go", nil), holder("remote", remote, cm),
	).Build()
	self := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "self"}}
	labelled := func(name string) metav1.Object {
		return &metav1.ObjectMeta{Labels: map[string]string{capstanv1.AddonLabel: name, capstanv1.AddonNamespaceLabel: "capstan-system"}}
	}
	for _, tc := range []struct {
		name string
		ref  capstanv1.ObjectRef
		obj  metav1.Object
		want string
	}{
		{"another Addon holds it", cm, labelled("holds"), "capstan-system/holds"},
		{"its own", cm, labelled("self"), ""},
		{"the other let it go", cm, labelled("let-go"), ""},
		{"the other is gone", cm, labelled("gone"), ""},
		{"the other targets another cluster", cm, labelled("remote"), ""},
		{"no labels", cm, &metav1.ObjectMeta{}, ""},
		{"a never-delete kind", ns, labelled("holds"), ""},
	} {
		r := &AddonReconciler{Client: c}
		got, err := r.heldBy(context.Background(), &scope{addon: self}, tc.ref, tc.obj)
		if err != nil || got != tc.want {
			t.Errorf("%s: heldBy = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}

	// The cache cannot answer: not gone, an error.
	failing := interceptor.NewClient(c, interceptor.Funcs{Get: func(ctx context.Context, _ client.WithWatch, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
		return apierrors.NewServiceUnavailable("the cache is not ready")
	}})
	r := &AddonReconciler{Client: failing}
	got, err := r.heldBy(context.Background(), &scope{addon: self}, cm, labelled("holds"))
	var status apierrors.APIStatus
	if err == nil || got != "" || !errors.As(err, &status) || !strings.Contains(err.Error(), "reading Addon capstan-system/holds") {
		t.Errorf("heldBy with a failing read = %q, %v; want an error that names the Addon", got, err)
	}
}

// TestHeldByInTheSameRemoteCluster: another Addon whose inventory is in
// the cluster this one targets holds the object, however its
// spec.kubeConfig spells the way there: the default key left out or
// written ("" and "value"), or another Secret with that cluster's
// kubeconfig (its recorded inventory cluster says so, whatever account it
// acts as). One whose inventory is in another cluster does not, even
// where its reference reads the same Secret.
func TestHeldByInTheSameRemoteCluster(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := capstanv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	const server = "https://10.0.0.1:6443"
	edge := &targetCluster{server: server, identity: "sha256:installer", endpoint: remote.Endpoint(server, "")}
	cm := capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: "same-cm"}
	ref := func(secret, key string) *capstanv1.KubeConfigReference {
		return &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: secret}, Key: key}
	}
	holder := func(name string, kubeConfig *capstanv1.KubeConfigReference, cluster *capstanv1.InventoryCluster) *capstanv1.Addon {
		return &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: name},
			Spec:   capstanv1.AddonSpec{KubeConfig: kubeConfig},
			Status: capstanv1.AddonStatus{Inventory: capstanv1.IDsOf([]capstanv1.ObjectRef{cm}), InventoryCluster: cluster}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&capstanv1.Addon{}).WithObjects(
		holder("default-key-written", ref("edge-1", "value"), nil),
		holder("another-key", ref("edge-1", "prod"), nil),
		holder("another-secret", ref("edge-copy", ""), &capstanv1.InventoryCluster{Identity: "sha256:admin", Endpoint: edge.endpoint, Server: server}),
		holder("recorded-before-endpoints", ref("edge-copy", ""), &capstanv1.InventoryCluster{Identity: "sha256:old", Server: server}),
		holder("elsewhere", ref("edge-1", ""), &capstanv1.InventoryCluster{Identity: "sha256:prod", Endpoint: remote.Endpoint("https://10.0.0.2:6443", ""), Server: "https://10.0.0.2:6443"}),
		holder("here", nil, &capstanv1.InventoryCluster{}),
	).Build()
	for _, self := range []*capstanv1.KubeConfigReference{ref("edge-1", ""), ref("edge-1", "value")} {
		s := &scope{addon: &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "self"},
			Spec: capstanv1.AddonSpec{KubeConfig: self}}, cluster: edge}
		for _, tc := range []struct {
			other string
			held  bool
		}{
			{"default-key-written", true},
			{"another-secret", true},
			{"recorded-before-endpoints", true},
			{"another-key", false},
			{"elsewhere", false},
			{"here", false},
		} {
			obj := &metav1.ObjectMeta{Labels: map[string]string{capstanv1.AddonLabel: tc.other, capstanv1.AddonNamespaceLabel: "capstan-system"}}
			r := &AddonReconciler{Client: c}
			got, err := r.heldBy(context.Background(), s, cm, obj)
			want := ""
			if tc.held {
				want = "capstan-system/" + tc.other
			}
			if err != nil || got != want {
				t.Errorf("key %q, %s: heldBy = %q, %v; want %q", self.Key, tc.other, got, err, want)
			}
		}
	}
}

// TestReadyOrGoneWakesOnAnObjectLetGo: an Addon whose inventory drops an
// object wakes the add-ons that object blocked, though it stays Ready (an
// upgrade that drops a ConfigMap has no workload to wait for); an
// inventory that only grows, or a write that changes neither, wakes no one.
func TestReadyOrGoneWakesOnAnObjectLetGo(t *testing.T) {
	id := func(name string) capstanv1.ObjectID {
		return capstanv1.ObjectID{ObjectRef: capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: name}}
	}
	ready := []metav1.Condition{{Type: capstanv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Synced", ObservedGeneration: 1}}
	addon := func(inv ...capstanv1.ObjectID) *capstanv1.Addon {
		return &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", Generation: 1},
			Status: capstanv1.AddonStatus{Conditions: ready, Inventory: inv}}
	}
	tests := []struct {
		name     string
		old, new *capstanv1.Addon
		want     bool
	}{
		{"an object let go", addon(id("a"), id("shared")), addon(id("a")), true},
		{"an object added", addon(id("a")), addon(id("a"), id("b")), false},
		{"nothing changed", addon(id("a")), addon(id("a")), false},
		{"the first inventory", addon(), addon(id("a")), false},
	}
	for _, tt := range tests {
		if got := (readyOrGone{}).Update(event.UpdateEvent{ObjectOld: tt.old, ObjectNew: tt.new}); got != tt.want {
			t.Errorf("%s: woke %v, want %v", tt.name, got, tt.want)
		}
	}
}
