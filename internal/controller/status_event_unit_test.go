package controller

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestTransitionEventFollowsTheStatusWrite: the event of a transition is
// emitted once the status that says so is written. A status write the API
// server could not take emits none, so no event says what status does not,
// and the retry, which finds the old phase again, emits it once.
func TestTransitionEventFollowsTheStatusWrite(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := capstanv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "wiki"}}
	addon.Status.Phase = capstanv1.PhaseProgressing
	setConditions(&addon.Status, 1, outcome{Phase: capstanv1.PhaseProgressing, Reason: reasonWaitingForWorkloads})
	failures := 1
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(addon).WithStatusSubresource(addon).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if failures > 0 {
				failures--
				return apierrors.NewServiceUnavailable("the control plane rolls")
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		}}).Build()
	rec := events.NewFakeRecorder(10)
	r := &AddonReconciler{Client: c, APIReader: c, Recorder: rec}
	ctx := context.Background()
	look := func() error {
		read := &capstanv1.Addon{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(addon), read); err != nil {
			t.Fatal(err)
		}
		s := &scope{addon: read.DeepCopy(), read: read.Status.DeepCopy(),
			outcome: outcome{Phase: capstanv1.PhaseSynced, Reason: "Synced", Message: "Applied and healthy."}}
		return r.patchStatus(ctx, read, s)
	}
	if err := look(); !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("the first write: %v; want the API server's 503", err)
	}
	if n := len(rec.Events); n != 0 {
		t.Fatalf("%d event(s) for a status that was not written: %s", n, <-rec.Events)
	}
	if err := look(); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if n := len(rec.Events); n != 1 {
		t.Fatalf("%d event(s) once the status was written; want one", n)
	}
	got := &capstanv1.Addon{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(addon), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != capstanv1.PhaseSynced {
		t.Fatalf("phase %s; want Synced", got.Status.Phase)
	}
}
