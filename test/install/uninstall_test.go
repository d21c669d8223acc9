package install_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/cli"
)

// TestOrphanAnAddonByHand runs docs/install.md's commands for an Addon
// left Terminating with no controller: it goes, and the object it owns (a
// restricted add-on's objects carry the Addon as their owner) keeps
// running, its owner reference dropped by Kubernetes' garbage collector.
func TestOrphanAnAddonByHand(t *testing.T) {
	ctx := t.Context()
	if out, err := run(t, "kubectl", "apply", "--server-side", "--field-manager=helm", "--force-conflicts", "-f", chart+"/crds"); err != nil {
		t.Fatalf("applying the CRDs: %v\n%s", err, out)
	}
	c, err := client.New(cluster.Config, client.Options{Scheme: cli.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "orphan-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	addon := &capstanv1.Addon{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "demo", Finalizers: []string{capstanv1.Finalizer}},
		Spec:       capstanv1.AddonSpec{Suspend: true, Chart: &capstanv1.ChartSource{URL: "https://charts.example/demo-1.0.0.tgz"}},
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return c.Create(ctx, addon) == nil, nil
	})
	if err != nil {
		t.Fatalf("creating an Addon: %v", err)
	}
	owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "owned", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: capstanv1.GroupVersion.String(), Kind: "Addon", Name: addon.Name, UID: addon.UID},
	}}}
	if err := c.Create(ctx, owned); err != nil {
		t.Fatal(err)
	}
	// Deleted while no controller runs: it stays, Terminating.
	if err := c.Delete(ctx, addon); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"delete", "addon", "demo", "-n", ns.Name, "--cascade=orphan", "--wait=false"},
		{"patch", "addon", "demo", "-n", ns.Name, "--type=json", "-p",
			`[{"op":"test","path":"/metadata/finalizers/0","value":"capstan.dev/finalizer"},{"op":"remove","path":"/metadata/finalizers/0"}]`},
	} {
		if out, err := run(t, "kubectl", args...); err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(addon), &capstanv1.Addon{})), nil
	})
	if err != nil {
		t.Fatalf("the Addon is still there after its finalizer was removed")
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(owned), owned); err != nil {
		t.Fatalf("the Addon's object was deleted with it: %v", err)
	}
	if len(owned.OwnerReferences) != 0 {
		t.Errorf("the Addon's object still names its owner: %v", owned.OwnerReferences)
	}
}
