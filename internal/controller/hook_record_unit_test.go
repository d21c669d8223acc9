package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/render"
)

// migrateHook is a pre-upgrade migration Job hook in the namespace apps,
// with Helm's default delete policy, before-hook-creation.
func migrateHook() render.Hook {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("batch/v1")
	u.SetKind("Job")
	u.SetNamespace("apps")
	u.SetName("db-migrate")
	u.SetAnnotations(map[string]string{"helm.sh/hook": "pre-upgrade"})
	_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "migrate", "image": "migrate:2"}},
		"spec", "template", "spec", "containers")
	_ = unstructured.SetNestedField(u.Object, "Never", "spec", "template", "spec", "restartPolicy")
	return render.Hook{Object: u, Events: []string{"pre-upgrade"}}
}

// upgradeScope is the scope of an upgrade of addon, as read when the
// reconcile began, whose render has the migrate hook, applied through c.
func upgradeScope(addon *capstanv1.Addon, c client.Client) *scope {
	return &scope{addon: addon, read: addon.Status.DeepCopy(), profile: capstanv1.ProfileCluster,
		lifecycle: LifecycleUpgrade, render: &render.Result{Hash: "render-2"}, hooks: []render.Hook{migrateHook()},
		applier: &apply.Applier{Client: c, Poll: 10 * time.Millisecond}}
}

func hookTestScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := capstanv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// migrateJob reads the migrate Job through c, or nil when there is none.
func migrateJob(t *testing.T, c client.Client) *unstructured.Unstructured {
	t.Helper()
	j, err := (&apply.Applier{Client: c}).Get(context.Background(), capstanv1.ObjectRef{APIVersion: "batch/v1", Kind: "Job", Namespace: "apps", Name: "db-migrate"})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestNoHookObjectOnceTheAddonLeftTheShard runs the pre-upgrade hooks of a
// sync of shard a whose Addon was relabelled into shard b meanwhile: the
// shard's cache no longer holds it, and the API server has it with b's
// label. The record of the migrate hook (status.hook) finds that, so the
// run stops with errLeftShard and no migrate Job exists. Before, the
// record's error was dropped and the Job was made: shard b, syncing the
// same render under the same run name, would have its own migrate Job
// deleted by this one's before-hook-creation, or delete this one's.
func TestNoHookObjectOnceTheAddonLeftTheShard(t *testing.T) {
	scheme := hookTestScheme(t)
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "wiki", Generation: 2,
		Labels: map[string]string{"capstan.dev/shard": "a"}}}
	addon.Status.Phase = capstanv1.PhaseSynced
	moved := addon.DeepCopy()
	moved.Labels["capstan.dev/shard"] = "b"
	apiServer := fake.NewClientBuilder().WithScheme(scheme).WithObjects(moved).WithStatusSubresource(moved).Build()
	// The shard's cache, which the Addon left; the cluster's Jobs too.
	cache := fake.NewClientBuilder().WithScheme(scheme).
		WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}).Build()
	sel, err := labels.Parse("capstan.dev/shard=a")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Selector: sel, HookWait: 100 * time.Millisecond}.WithDefaults()
	r := &AddonReconciler{Client: cache, APIReader: apiServer, Config: cfg, Hooks: &hooks.Runner{Poll: 10 * time.Millisecond}}
	s := upgradeScope(addon, cache)

	err = r.runHooks(context.Background(), s, "pre-upgrade", nil)
	if !errors.Is(err, errLeftShard) {
		t.Errorf("the pre-upgrade run of an Addon that left the shard returned %v; want errLeftShard", err)
	}
	if j := migrateJob(t, cache); j != nil {
		t.Errorf("the old shard made the migrate Job (run %s) after the Addon left it; want none", j.GetAnnotations()[hooks.RunAnnotation])
	}
}

// TestNoHookObjectWhenStatusHookIsNotWritten runs the pre-upgrade hooks
// while the API server refuses the status write that records the migrate
// hook (status.hook), as when it times out: the run stops with no migrate
// Job made, with an error that says so and is retried with backoff, not
// a hook's failure that stalls the add-on or runs SyncFail hooks; the
// status this reconcile ends with names no hook. Before, the write's
// error was dropped and the Job was made: a controller that died before
// the write at the end of the reconcile left a running Job no status
// named, and the next one deleted it (before-hook-creation) and started
// the migration again.
func TestNoHookObjectWhenStatusHookIsNotWritten(t *testing.T) {
	scheme := hookTestScheme(t)
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "wiki", Generation: 2}}
	addon.Status.Phase = capstanv1.PhaseSynced
	base := fake.NewClientBuilder().WithScheme(scheme).WithObjects(addon.DeepCopy(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}).
		WithStatusSubresource(addon).Build()
	c := interceptor.NewClient(base, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if _, ok := obj.(*capstanv1.Addon); ok && sub == "status" {
				return apierrors.NewServerTimeout(capstanv1.GroupVersion.WithResource("addons").GroupResource(), "patch", 1)
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	r := &AddonReconciler{Client: c, Config: Config{HookWait: 100 * time.Millisecond}.WithDefaults(), Hooks: &hooks.Runner{Poll: 10 * time.Millisecond}}
	s := upgradeScope(addon.DeepCopy(), c)
	seq := apply.Sequence{Applier: s.applier, PreEvent: "pre-upgrade", HasPreHooks: true,
		PreHooks: func(ctx context.Context) error { return r.runHooks(ctx, s, "pre-upgrade", nil) }}

	_, err := seq.Run(context.Background())
	if err == nil || !hooks.IsProgressError(err) || !unrecorded(err) {
		t.Fatalf("the pre-upgrade run whose status.hook write failed returned %v; want a run stopped before the hook", err)
	}
	if classify(err) != classTransient {
		t.Errorf("classify(%v) is terminal; want transient, retried with backoff", err)
	}
	msg := err.Error()
	for _, want := range []string{"db-migrate was not run", "status.hook", "nothing of it was made"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "hook failed") {
		t.Errorf("message %q says a hook failed; none ran", msg)
	}
	if j := migrateJob(t, base); j != nil {
		t.Errorf("the migrate Job (run %s) was made though no status names it; want none", j.GetAnnotations()[hooks.RunAnnotation])
	}
	if h := s.addon.Status.Hook; h != nil {
		t.Errorf("status.hook = %s; want none, as stored", h.Describe())
	}
}

// TestUnrecordedEndIsNoHookFailure: a run whose hooks all succeeded but
// whose end could not be recorded (errUnrecorded) is not worded by the
// apply sequence as a hook that failed: none did, and the next look
// records it.
func TestUnrecordedEndIsNoHookFailure(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(hookTestScheme(t)).Build()
	timeout := apierrors.NewServerTimeout(capstanv1.GroupVersion.WithResource("addons").GroupResource(), "patch", 1)
	seq := apply.Sequence{Applier: &apply.Applier{Client: c}, PreEvent: "pre-upgrade", HasPreHooks: true,
		PreHooks: func(context.Context) error { return errUnrecorded{timeout} }}
	_, err := seq.Run(context.Background())
	if err == nil || !unrecorded(err) || strings.Contains(err.Error(), "hook failed") {
		t.Fatalf("Sequence.Run = %v; want the unrecorded end, not worded as a hook's failure", err)
	}
}
