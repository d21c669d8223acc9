package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/plan"
)

// TestApplyGraceTakesOnlyAMoment: an apply the API server could not take
// for a moment is retried in its grace (Progressing, ApplyRetrying), and
// the failure it is once the grace ends; a refusal (a 4xx, a webhook that
// answered and denied), a hook's failure, a wait of Capstan's own that
// timed out, and a webhook the render registers fail at once, as before.
func TestApplyGraceTakesOnlyAMoment(t *testing.T) {
	cm := schema.GroupResource{Resource: "configmaps"}
	applying := func(err error) error { return fmt.Errorf("applying ConfigMap apps/settings: %w", err) }
	down := applying(apierrors.NewInternalError(errors.New(`failed calling webhook "validate.example.com": service "nobody" not found`)))
	for _, tc := range []struct {
		name   string
		err    error
		moment bool
	}{
		{"webhook not called", down, true},
		{"too many requests", applying(apierrors.NewTooManyRequests("slow down", 1)), true},
		{"server timeout", applying(apierrors.NewServerTimeout(cm, "patch", 1)), true},
		{"service unavailable", applying(apierrors.NewServiceUnavailable("etcd")), true},
		{"connection refused", applying(&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}), true},
		{"webhook denied", applying(apierrors.NewForbidden(cm, "settings", errors.New(`admission webhook "validate.example.com" denied the request: no`))), false},
		{"invalid", applying(apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "settings", nil)), false},
		{"conflict", applying(apierrors.NewConflict(cm, "settings", errors.New("changed"))), false},
		{"a wait of Capstan's", fmt.Errorf("waiting for CustomResourceDefinition foos.example.com: %w", context.DeadlineExceeded), false},
		{"a hook's", &hooks.Error{Event: "pre-upgrade", Err: apierrors.NewTooManyRequests("slow down", 1)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &AddonReconciler{}
			s := &scope{addon: &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "web", UID: "u1"}}}
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			got := r.applyGrace(s, tc.err, now)
			var retry *applyRetry
			if errors.As(got, &retry) != tc.moment {
				t.Fatalf("applyGrace(%v) = %v; want a retry in the grace: %v", tc.err, got, tc.moment)
			}
			o := decide(findings{}, "Apply", got)
			if tc.moment && (o.Phase != capstanv1.PhaseProgressing || o.Reason != ReasonApplyRetrying) {
				t.Fatalf("the outcome in the grace is %s %s; want Progressing %s", o.Phase, o.Reason, ReasonApplyRetrying)
			}
			if !tc.moment && o.Phase != capstanv1.PhaseFailed {
				t.Fatalf("the outcome of a refusal is %s %s; want Failed at once", o.Phase, o.Reason)
			}
			if !tc.moment {
				return
			}
			// Past the grace: the failure it is.
			for i := 1; i < plan.GraceTries; i++ {
				_ = r.applyGrace(s, tc.err, now.Add(time.Duration(i)*time.Second))
			}
			got = r.applyGrace(s, tc.err, now.Add(plan.GraceFor))
			if errors.As(got, &retry) {
				t.Fatalf("an apply failing so for %s on %d looks is still retried: %v", plan.GraceFor, plan.GraceTries+1, got)
			}
			if o := decide(findings{}, "Apply", got); o.Phase != capstanv1.PhaseFailed || o.Reason != "ApplyFailed" || !strings.Contains(o.Message, "failed the apply so since") {
				t.Fatalf("the outcome past the grace is %s %s %q; want Failed ApplyFailed, saying since when", o.Phase, o.Reason, o.Message)
			}
			// An apply that goes through starts the count afresh.
			r.dryRunGrace.Applied(s.addon)
			if !errors.As(r.applyGrace(s, tc.err, now.Add(2*plan.GraceFor)), &retry) {
				t.Fatal("an apply that failed after one that went through had no grace")
			}
		})
	}

	// A webhook the render registers is waited for on its error, as for
	// a dry run: no grace.
	whc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
		"metadata": map[string]any{"name": "own"},
		"webhooks": []any{map[string]any{"name": "validate.example.com"}},
	}}
	s := &scope{addon: &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "web", UID: "u1"}},
		objects: []*unstructured.Unstructured{whc}}
	var retry *applyRetry
	if got := (&AddonReconciler{}).applyGrace(s, down, time.Now()); errors.As(got, &retry) {
		t.Fatalf("the add-on's own webhook had a grace: %v", got)
	}
}

// TestFailedForGood: a sync whose apply the API server refused, or whose
// grace is over, has failed for good, so a fix that changes the plan is
// not held by its approval; one still in its grace, or stopped by the
// reconcile's own deadline, only paused.
func TestFailedForGood(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	refused := apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "settings", nil)
	busy := apierrors.NewServiceUnavailable("try later")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"an object refused", fmt.Errorf("applying ConfigMap apps/settings: %w", refused), true},
		{"forbidden", apierrors.NewForbidden(gr, "settings", errors.New("no")), true},
		{"an apply whose grace is over", &applyLasted{fmt.Errorf("%w (the API server has failed the apply so since then, on 3 looks or more)", busy)}, true},
		{"a terminal failure", terminal{errors.New("the hook failed")}, true},
		{"an apply in its grace", &applyRetry{err: busy}, false},
		{"a moment outside the grace (a hook's create, a status write)", fmt.Errorf("creating the hook: %w", busy), false},
		{"a conflict", apierrors.NewConflict(gr, "web", errors.New("changed")), false},
		{"too many requests", apierrors.NewTooManyRequests("slow down", 1), false},
		{"a timeout", apierrors.NewTimeoutError("slow", 1), false},
		{"an error with no status", errors.New("the next try maps it"), false},
		{"the reconcile's deadline", fmt.Errorf("waiting: %w", context.DeadlineExceeded), false},
		{"a cancelled reconcile", fmt.Errorf("waiting: %w", context.Canceled), false},
	} {
		if got := failedForGood(tc.err); got != tc.want {
			t.Errorf("%s: failedForGood = %v, want %v", tc.name, got, tc.want)
		}
	}
}
