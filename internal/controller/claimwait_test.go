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
	// read as the applying identity (TestATenantsClaimIsJudgedByItsStorageClass
	// has a tenant's).
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

// TestATenantsClaimIsJudgedByItsStorageClass: a tenant's add-on is judged
// as the controller's own account, which may get StorageClasses: its
// claim of a class that binds for its first consumer is Current while it
// waits, and a claim of a class that does not exist is waited for until
// Bound, with a Healthy condition that names the class and what to do,
// rather than only that the claim is not Bound.
func TestATenantsClaimIsJudgedByItsStorageClass(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "tenant-" + ns}, Provisioner: "example.com/none", VolumeBindingMode: &mode}
	if err := admin.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), class) })
	claim := func(class string) string {
		return "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n" +
			"spec:\n  storageClassName: " + class + "\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n"
	}
	waits, _ := charts.publish(t, chart{name: "tenantclaim", version: "1.0.0", files: map[string]string{"templates/pvc.yaml": claim("tenant-" + ns)}})
	a := create(t, newAddon(ns, "tc", waits))
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	if c := condition(got, capstanv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("a tenant's claim that waits for its first consumer is not Ready: %s", describeStatus(got))
	}

	other := newNamespace(t)
	missing, _ := charts.publish(t, chart{name: "missingclass", version: "1.0.0", files: map[string]string{"templates/pvc.yaml": claim("missing-" + other)}})
	b := create(t, newAddon(other, "mc", missing))
	want := []string{`StorageClass "missing-` + other + `" does not exist`, "waited for until Bound", "create that StorageClass"}
	waitFor(t, b, 90*time.Second, "a Healthy condition that names the StorageClass that does not exist", func(cur *capstanv1.Addon) bool {
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
