package controller

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/plan"
)

// TestAGoneKubeconfigReleasesTheClusterHeld: once the kubeconfig Secret an
// add-on names is deleted, the pipeline's first step lets go of the watch
// cache and the reader of the cluster it targeted, which the memory of what
// was verified there held; what was verified stays, of that cluster.
func TestAGoneKubeconfigReleasesTheClusterHeld(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := capstanv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "web", UID: "uid-web"}}
	addon.Spec.KubeConfig = &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: "prod"}}
	key := client.ObjectKeyFromObject(addon)
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(addon).Build()
	r := &AddonReconciler{Client: cl, APIReader: cl}
	there := fake.NewClientBuilder().Build()
	r.verified.target(addon, &capstanv1.InventoryCluster{Identity: "i", Endpoint: "https://b.example:6443", Server: "https://b.example:6443"}, there, liveObjects{})
	r.verified.note(addon, "k", plan.Verified{ResourceVersion: "7"})

	s := &scope{addon: addon, cluster: &targetCluster{}, profile: capstanv1.ProfileCluster}
	if _, err := r.selectTarget(context.Background(), s); err == nil || classify(err) != classTerminal {
		t.Fatalf("the step with the kubeconfig Secret gone: %v; want a terminal error", err)
	}
	if r.verified.reader(key) != nil || r.verified.watches(key, there) {
		t.Error("the memory still holds the cluster's reader or its watch cache")
	}
	if _, ok := r.verified.object(key, "k"); !ok {
		t.Error("what was verified there was forgotten")
	}
}
