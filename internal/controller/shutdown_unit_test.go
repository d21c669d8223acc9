package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/render"
)

// endedRunner is a hook runner whose run ends as end says, given the
// run's context.
type endedRunner func(ctx context.Context, req hooks.Request) error

func (f endedRunner) Run(ctx context.Context, req hooks.Request) error { return f(ctx, req) }

func (f endedRunner) CleanUp(context.Context, hooks.Request, []capstanv1.HookObject) ([]capstanv1.HookObject, error) {
	return nil, nil
}

// TestRunEventKeepsTheHookItStillWaitsFor: a run that a stop of the
// controller cut short leaves status.hook naming the hook it waited for,
// as a run that yields while the hook runs does: the hook still runs, and
// the next controller waits for it rather than start it anew. A run that
// ended (the hook failed) clears it.
func TestRunEventKeepsTheHookItStillWaitsFor(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := capstanv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ref := capstanv1.ObjectRef{APIVersion: "batch/v1", Kind: "Job", Namespace: "apps", Name: "migrate"}
	job := &unstructured.Unstructured{}
	job.SetAPIVersion(ref.APIVersion)
	job.SetKind(ref.Kind)
	job.SetNamespace(ref.Namespace)
	job.SetName(ref.Name)
	for _, tc := range []struct {
		name     string
		stopped  bool
		end      func(ctx context.Context) error
		wantHook bool
	}{
		{"the controller stops while the hook runs", true, func(ctx context.Context) error {
			return fmt.Errorf("waiting for pre-upgrade hook %s: %w", ref.Describe(), ctx.Err())
		}, true},
		{"the hook still runs after the wait", false, func(context.Context) error {
			return &hooks.Running{Event: "pre-upgrade", Hook: ref, Since: time.Now()}
		}, true},
		{"the hook failed", false, func(context.Context) error {
			return &hooks.Error{Event: "pre-upgrade", Hook: ref, Reason: hooks.ReasonTimeout, Message: "the Job has 1 active pod"}
		}, false},
	} {
		addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "db", Generation: 2},
			Status: capstanv1.AddonStatus{Hook: &capstanv1.HookProgress{ObjectRef: ref, Event: "pre-upgrade", Run: "pre-upgrade/0123456789abcdef",
				Since: metav1.Now(), Generation: 2}}}
		c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&capstanv1.Addon{}).WithObjects(addon.DeepCopy()).Build()
		r := &AddonReconciler{Client: c, Config: Config{}.WithDefaults(),
			Hooks: endedRunner(func(ctx context.Context, _ hooks.Request) error { return tc.end(ctx) })}
		s := &scope{addon: addon, read: addon.Status.DeepCopy(), profile: capstanv1.ProfileCluster,
			hooks: []render.Hook{{Object: job, Events: []string{"pre-upgrade"}}}}
		ctx, stop := context.WithCancel(context.Background())
		if tc.stopped {
			stop()
		}
		err := r.runEvent(ctx, s, "pre-upgrade", true, nil)
		stop()
		if err == nil {
			t.Errorf("%s: runEvent = nil; want the run's error", tc.name)
		}
		if got := s.addon.Status.Hook != nil && s.addon.Status.Hook.ObjectRef == ref; got != tc.wantHook {
			t.Errorf("%s: status.hook = %+v; want it to name the Job: %v", tc.name, s.addon.Status.Hook, tc.wantHook)
		}
	}
}
