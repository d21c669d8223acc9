package controller

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestStatusWritesStopWhenTheAddonLeavesTheShard relabels an Addon into
// another shard while a reconcile of shard a holds it: neither a
// checkpoint nor the status patch at the end writes to it any more, and
// the checkpoint ends the reconcile with errLeftShard.
func TestStatusWritesStopWhenTheAddonLeavesTheShard(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := capstanv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "wiki",
		Labels: map[string]string{"capstan.dev/shard": "a"}}}
	addon.Status.Phase = capstanv1.PhaseSynced
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(addon).WithStatusSubresource(addon).Build()
	sel, err := labels.Parse("capstan.dev/shard=a")
	if err != nil {
		t.Fatal(err)
	}
	r := &AddonReconciler{Client: c, APIReader: c, Config: Config{Selector: sel}}
	ctx := context.Background()
	read := &capstanv1.Addon{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(addon), read); err != nil {
		t.Fatal(err)
	}
	s := &scope{addon: read, read: read.Status.DeepCopy()}

	// Still the shard's: a checkpoint writes.
	s.addon.Status.AppliedHash = "h1"
	if err := r.checkpointStatus(ctx, s); err != nil {
		t.Fatal(err)
	}
	// Relabelled into shard b meanwhile.
	moved := &capstanv1.Addon{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(addon), moved); err != nil {
		t.Fatal(err)
	}
	moved.Labels["capstan.dev/shard"] = "b"
	if err := c.Update(ctx, moved); err != nil {
		t.Fatal(err)
	}
	s.addon.Status.AppliedHash = "h2"
	if err := r.checkpointStatus(ctx, s); !errors.Is(err, errLeftShard) {
		t.Errorf("a checkpoint after the Addon left the shard returned %v, want errLeftShard", err)
	}
	s.outcome = outcome{Phase: capstanv1.PhaseFailed, Reason: "ApplyFailed", Message: "stopped"}
	if err := r.patchStatus(ctx, read.DeepCopy(), s); err != nil {
		t.Errorf("patchStatus: %v", err)
	}
	got := &capstanv1.Addon{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(addon), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.AppliedHash != "h1" || got.Status.Phase != capstanv1.PhaseSynced {
		t.Errorf("the old shard wrote an Addon it no longer selects: appliedHash %q, phase %s; want h1, Synced",
			got.Status.AppliedHash, got.Status.Phase)
	}
}
