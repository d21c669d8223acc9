package benchmark_test

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testcluster"
)

// envBookkeeping, set to 1, adds a third turn of the floor to
// BenchmarkConverge, after the other two: the floor that also sends, per
// add-on, the requests Capstan sends beyond the applies. Capstan's ratio to
// it is what the engine costs beyond the writes that carry its guarantees;
// its ratio to the plain floor is what those writes cost.
const envBookkeeping = "CAPSTAN_BENCH_BOOKKEEPING"

// bookkeeping sends, around one add-on's applies, the requests Capstan's
// install sends beyond them, from the same accounts and in the same order,
// but for the Addon's creation, which waits for the namespace it lives in:
//
//   - a GET of the target Namespace, missing (the controller's);
//   - the Addon's creation (the user's, as the cluster's admin);
//   - a metadata patch of the Addon (the controller's finalizer; here a
//     label, which costs the API server the same and leaves the namespace
//     free to be deleted);
//   - the status checkpoint with the inventory and the plan of the
//     add-on's 21 objects, before the applies;
//   - after them, a GET of the Deployment (its health), the status that
//     says Ready, and one event.
//
// The Addon lives in the add-on's own namespace, so that clearing the turn
// deletes it, and no controller runs: only the watch that bookkeeping
// opens, which stands for the controller's watch of every Addon, sees its
// writes.
type bookkeeping struct {
	user, controller client.Client
}

// newBookkeeping returns bookkeeping with the user's (the admin's) and the
// controller's clients of c.
func newBookkeeping(c *testcluster.Cluster) (*bookkeeping, error) {
	user, err := client.New(c.Config, client.Options{Scheme: scheme()})
	if err != nil {
		return nil, err
	}
	controller, err := client.New(c.ConfigFor(install.ControllerUser), client.Options{Scheme: scheme()})
	if err != nil {
		return nil, err
	}
	return &bookkeeping{user: user, controller: controller}, nil
}

// watch opens the watch of every Addon that stands for the controller's,
// until stop is called.
func (k *bookkeeping) watch(ctx context.Context, cfg *rest.Config) (stop func(), err error) {
	_, stop, err = watchFor(ctx, cfg, &capstanv1.Addon{}, "", nil)
	return stop, err
}

// beforeNamespace is what the controller reads before it creates the
// target namespace: that it is missing.
func (k *bookkeeping) beforeNamespace(ctx context.Context, ns string) error {
	err := k.controller.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("bookkeeping: reading namespace %s: %w", ns, err)
	}
	return nil
}

// beforeApply creates the add-on's Addon in ns, marks it, and writes the
// checkpoint of its objects' refs, as an install does before its applies.
func (k *bookkeeping) beforeApply(ctx context.Context, ns string, refs []capstanv1.ObjectRef) (*capstanv1.Addon, error) {
	a := newChartAddon(0, "https://127.0.0.1:1/")
	a.Namespace, a.Name, a.Labels = ns, "bookkept", nil
	if err := k.user.Create(ctx, a); err != nil {
		return nil, fmt.Errorf("bookkeeping: creating the Addon in %s: %w", ns, err)
	}
	base := a.DeepCopy()
	a.Labels = map[string]string{"capstan.dev/bench-bookkept": "true"}
	if err := k.controller.Patch(ctx, a, client.MergeFrom(base)); err != nil {
		return nil, fmt.Errorf("bookkeeping: marking the Addon in %s: %w", ns, err)
	}
	base = a.DeepCopy()
	st := &a.Status
	st.Phase = capstanv1.PhaseProgressing
	st.Inventory = capstanv1.IDsOf(refs)
	st.Plan = &capstanv1.Plan{Hash: "sha256:" + strings.Repeat("0", 64), Generation: a.Generation}
	for _, ref := range refs {
		st.Plan.Objects = append(st.Plan.Objects, capstanv1.PlannedObject{ObjectRef: ref, Action: capstanv1.ActionCreate})
	}
	st.Conditions = []metav1.Condition{{Type: capstanv1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Progressing",
		Message: "Applying.", LastTransitionTime: metav1.Now(), ObservedGeneration: a.Generation}}
	if err := k.controller.Status().Patch(ctx, a, client.MergeFrom(base)); err != nil {
		return nil, fmt.Errorf("bookkeeping: the checkpoint of the Addon in %s: %w", ns, err)
	}
	return a, nil
}

// afterApply reads the Deployment's health, writes the status that says
// Ready and records the event.
func (k *bookkeeping) afterApply(ctx context.Context, a *capstanv1.Addon, deployment string) error {
	if err := k.controller.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: deployment}, &appsv1.Deployment{}); err != nil {
		return fmt.Errorf("bookkeeping: reading Deployment %s/%s: %w", a.Namespace, deployment, err)
	}
	base := a.DeepCopy()
	st := &a.Status
	st.Phase = capstanv1.PhaseSynced
	st.AppliedHash = st.Plan.Hash
	now := metav1.Now()
	st.LastAppliedTime = &now
	st.Conditions = []metav1.Condition{{Type: capstanv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Synced",
		Message: "Applied and healthy.", LastTransitionTime: now, ObservedGeneration: a.Generation}}
	if err := k.controller.Status().Patch(ctx, a, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("bookkeeping: the Ready status of the Addon in %s: %w", a.Namespace, err)
	}
	return k.controller.Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: a.Namespace, GenerateName: a.Name + "."},
		InvolvedObject: corev1.ObjectReference{Kind: "Addon", APIVersion: capstanv1.GroupVersion.String(), Namespace: a.Namespace, Name: a.Name, UID: a.UID},
		Reason:         "Synced",
		Message:        "Applied and healthy.",
		Type:           corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: "capstan"},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
	})
}
