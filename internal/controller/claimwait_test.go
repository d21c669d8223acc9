package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestAClaimThatWaitsForItsConsumerDoesNotHoldTheWaves: a claim of a
// StorageClass that binds only for its first consumer stays Pending until
// a Pod that mounts it is scheduled; in wave -1 it lets wave 0, where
// that Pod's workload would be, go, and the add-on is Synced.
func TestAClaimThatWaitsForItsConsumerDoesNotHoldTheWaves(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "late-" + ns}, Provisioner: "example.com/none", VolumeBindingMode: &mode}
	if err := admin.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), class) })
	url, _ := charts.publish(t, chart{name: "lateclaim", version: "1.0.0", files: map[string]string{
		"templates/pvc.yaml": "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  annotations: {capstan.dev/sync-wave: \"-1\"}\n" +
			"spec:\n  storageClassName: late-" + ns + "\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: after\ndata: {k: v}\n",
	}})
	// NOTE: an add-on of the controller's namespace: the StorageClass is
	// read as the applying identity, and a tenant's may not read it.
	a := create(t, newAddon(controllerNS, "lc-"+ns[len(ns)-5:], url, withTarget(ns)))
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	if live(t, "v1", "ConfigMap", ns, "after") == nil {
		t.Fatalf("wave 0 was not applied: %s", describeStatus(got))
	}
	claim := live(t, "v1", "PersistentVolumeClaim", ns, "data")
	if phase, _, _ := unstructured.NestedString(claim.Object, "status", "phase"); phase != "Pending" {
		t.Fatalf("the claim is %q: the test needs one that waits, Pending", phase)
	}
}

// TestAnUnreadStorageClassIsNamedInHealth: a tenant's add-on applies as
// the controller's own account, which may not read StorageClasses; its
// Pending claim is waited for until Bound, and the Healthy condition
// names the StorageClass, what failed and what to grant, rather than
// only that the claim is not Bound.
func TestAnUnreadStorageClassIsNamedInHealth(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "unread-" + ns}, Provisioner: "example.com/none", VolumeBindingMode: &mode}
	if err := admin.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), class) })
	url, _ := charts.publish(t, chart{name: "unreadclass", version: "1.0.0", files: map[string]string{
		"templates/pvc.yaml": "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n" +
			"spec:\n  storageClassName: unread-" + ns + "\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n",
	}})
	a := create(t, newAddon(ns, "uc", url))
	want := []string{`StorageClass "unread-` + ns + `" could not be read`, "the controller's account may not get storageclasses (storage.k8s.io)", "grant it get on storageclasses"}
	waitFor(t, a, 90*time.Second, "a Healthy condition that names the StorageClass it could not read", func(cur *capstanv1.Addon) bool {
		c := condition(cur, capstanv1.ConditionHealthy)
		if c == nil {
			return false
		}
		for _, w := range want {
			if !strings.Contains(c.Message, w) {
				return false
			}
		}
		return true
	})
}
