package controller

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/render"
)

// lookupReader answers the ownership rule's reads: NotFound, or err.
type lookupReader struct{ err error }

func (l lookupReader) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	if l.err != nil {
		return l.err
	}
	return apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, key.Name)
}

func (l lookupReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return l.err
}

// TestOwnershipReadErrorIsRetried: a read of the ownership rule that
// fails for a moment (an API server under load) is an error to retry with
// backoff, not a guardrail violation that Blocks and Stalls the add-on
// until the next resync; a render that breaks a rule besides is Blocked
// by it as ever.
func TestOwnershipReadErrorIsRetried(t *testing.T) {
	busy := apierrors.NewTooManyRequests("the API server is busy", 1)
	settings := func(name string, hostNetwork bool) *unstructured.Unstructured {
		if hostNetwork {
			return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service",
				"metadata": map[string]any{"name": name, "namespace": "team-a"},
				"spec":     map[string]any{"type": "NodePort", "ports": []any{map[string]any{"port": int64(80)}}}}}
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "team-a"}, "data": map[string]any{"v": "1"}}}
	}
	for _, tc := range []struct {
		name       string
		err        error
		objects    []*unstructured.Unstructured
		retried    bool
		violations int
	}{
		{"read", nil, []*unstructured.Unstructured{settings("settings", false)}, false, 0},
		{"a read that fails", busy, []*unstructured.Unstructured{settings("settings", false)}, true, 0},
		{"a read that fails, and another rule broken", busy, []*unstructured.Unstructured{settings("settings", false), settings("web", true)}, false, 3},
	} {
		a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "wiki", UID: "uid-1"}}
		s := &scope{addon: a, profile: capstanv1.ProfileRestricted, render: &render.Result{}, namespace: "team-a", objects: tc.objects}
		_, err := (&AddonReconciler{APIReader: lookupReader{err: tc.err}}).checkGuardrails(context.Background(), s)
		if (err != nil) != tc.retried || len(s.violations) != tc.violations {
			t.Errorf("%s: error %v, violations %+v; want an error %v and %d violations", tc.name, err, s.violations, tc.retried, tc.violations)
		}
		if err != nil && classify(err) != classTransient {
			t.Errorf("%s: the error %v is not retried with backoff", tc.name, err)
		}
	}
}

// TestTestRunOwnershipReadErrorIsRetried: a test run whose ownership read
// of a test fails for a moment (a 429 from an API server under load) is
// retried with backoff, not a failed run that, with spec.test.enable,
// leaves the add-on Failed and Stalled with advice to fix the chart.
func TestTestRunOwnershipReadErrorIsRetried(t *testing.T) {
	test := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"name": "check", "namespace": "team-a", "annotations": map[string]any{"helm.sh/hook": "test"}},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"restartPolicy": "Never",
			"containers": []any{map[string]any{"name": "check", "image": "check:1"}}}}}}}
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "wiki", UID: "uid-1"}}
	s := &scope{addon: a, profile: capstanv1.ProfileRestricted, render: &render.Result{}, namespace: "team-a",
		hooks: []render.Hook{{Object: test, Events: []string{render.TestEvent}}}}
	r := &AddonReconciler{APIReader: lookupReader{err: apierrors.NewTooManyRequests("the API server is busy", 1)}}
	run, err := r.testOnce(context.Background(), s, "1")
	if err == nil || classify(err) != classTransient {
		t.Fatalf("the run is %+v, error %v; want an error retried with backoff", run, err)
	}
}

// TestUninstallGuardKeepsReadsFailedForTheHooks: the uninstall's guard
// records a failed read of a plain object of the render as a violation,
// with no error, so that refusedDeleteHooks, which keeps only those of
// the delete hooks, decides: an add-on with no delete hooks is not held
// by a read that concerns none.
func TestUninstallGuardKeepsReadsFailedForTheHooks(t *testing.T) {
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings", "namespace": "team-a"}, "data": map[string]any{"v": "1"}}}
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "wiki", UID: "uid-1"}}
	s := &scope{addon: a, profile: capstanv1.ProfileRestricted, render: &render.Result{}, namespace: "team-a", objects: []*unstructured.Unstructured{cm}}
	r := &AddonReconciler{APIReader: lookupReader{err: apierrors.NewTooManyRequests("the API server is busy", 1)}}
	found := r.renderViolations(context.Background(), s)
	if len(found) != 1 || found[0].Rule != "ownership-unknown" {
		t.Fatalf("found %+v; want the failed read of the ConfigMap", found)
	}
	if refused := refusedDeleteHooks(a, s.hooks, found); len(refused) != 0 {
		t.Errorf("the read of a ConfigMap no delete hook uses refuses %+v", refused)
	}
}
