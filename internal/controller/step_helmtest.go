package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/guard"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/render"
)

// runTests runs the chart's test hooks, as `helm test` does, once every
// object the add-on applied is Current: after each apply of a new render
// when spec.test.enable is set, as Flux's HelmRelease runs them, and once
// for each new value of the capstan.dev/test annotation (`capstan addon
// test`), whatever spec.test says. A render is tested once: a drift
// repair, a resync or a restart runs no test again, and status.lastTest
// keeps the run. A failed run makes the add-on Failed (TestFailed),
// Stalled, until another render or another request passes, unless
// spec.test.ignoreFailures is set; the failure is a warning event either
// way. The tests run within the reconcile, as the other hooks do, bounded
// by the hook timeout; a run the controller was stopped in goes on from
// it (runHooks).
func (r *AddonReconciler) runTests(ctx context.Context, s *scope) (bool, error) {
	st := &s.addon.Status
	policy := s.addon.Spec.Test
	if policy == nil {
		policy = &capstanv1.TestPolicy{}
	}
	req := s.addon.Annotations[capstanv1.TestAnnotation]
	last := st.LastTest
	requested := req != "" && (last == nil || last.Request != req)
	due := requested || policy.Enable && (last == nil || last.AppliedHash != st.AppliedHash)
	if due && st.AppliedHash != "" {
		if len(req) > capstanv1.MaxRefreshLength {
			return false, terminal{fmt.Errorf("the %s annotation is %d characters long; give it at most %d, such as the time (capstan addon test writes one)",
				capstanv1.TestAnnotation, len(req), capstanv1.MaxRefreshLength)}
		}
		run, err := r.testOnce(ctx, s, req)
		if err != nil {
			return false, err
		}
		st.LastTest, last = run, run
		if run.Result == capstanv1.TestFailed && r.Recorder != nil {
			r.Recorder.Eventf(s.addon, nil, "Warning", "TestFailed", "Test", "%s", truncate(s.mask().String(run.Message), 1000))
		}
	}
	if last != nil && last.Result == capstanv1.TestFailed && last.AppliedHash == st.AppliedHash && !policy.IgnoreFailures {
		return false, terminal{fmt.Errorf("the chart's tests failed for the render that runs: %s To run them again: `capstan addon test %s` (a new value of the %s annotation); to keep the add-on Synced when they fail, set spec.test.ignoreFailures",
			last.Message, s.addon.Name, capstanv1.TestAnnotation)}
	}
	return false, nil
}

// testOnce runs the test hooks once and says how it went. An error is one
// to retry, not a test that failed: the controller stops, or the API
// server could not take a hook for a moment.
func (r *AddonReconciler) testOnce(ctx context.Context, s *scope, req string) (*capstanv1.TestRun, error) {
	run := &capstanv1.TestRun{AppliedHash: s.addon.Status.AppliedHash, Request: req, StartedAt: metav1.Now()}
	selected := hooks.Select(s.hooks, render.TestEvent)
	if len(selected) == 0 {
		run.Result, run.Message = capstanv1.TestNone, "the chart has no test hooks (helm.sh/hook: test)"
		run.FinishedAt = metav1.Now()
		return run, nil
	}
	if s.profile == capstanv1.ProfileRestricted {
		// NOTE: the sync's guardrails leave out what only tests (see
		// checkGuardrails); they run now, before any test does.
		objs := make([]*unstructured.Unstructured, 0, len(selected))
		for _, h := range selected {
			objs = append(objs, h.Object)
		}
		if vs := guard.Check(ctx, objs, r.guardContext(s)); len(vs) > 0 {
			v := vs[0]
			run.Result, run.FinishedAt = capstanv1.TestFailed, metav1.Now()
			run.Message = truncate(s.mask().String(fmt.Sprintf("the tests break %d of the platform's guardrails, so none ran; the first: %s %s: %s (%s). Fix the chart's tests",
				len(vs), v.Object.Describe(), v.Path, v.Message, v.Rule)), 2000)
			return run, nil
		}
	}
	logf.FromContext(ctx).Info("Running the chart's tests", "hooks", len(selected), "request", req)
	err := r.runHooks(ctx, s, render.TestEvent)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil && (!hooks.IsHookError(err) || transientHookError(err)):
		return nil, err
	}
	run.FinishedAt = metav1.Now()
	if err != nil {
		run.Result, run.Message = capstanv1.TestFailed, truncate(s.mask().String(err.Error()), 2000)
		return run, nil
	}
	names := make([]string, 0, len(selected))
	for _, h := range selected {
		names = append(names, capstanv1.RefOf(h.Object).Describe())
	}
	run.Result = capstanv1.TestSucceeded
	run.Message = truncate(fmt.Sprintf("%d test(s) passed: %s", len(selected), strings.Join(names, ", ")), 2000)
	return run, nil
}

// testOnly reports whether h runs only as a test: a hook of a sync's
// events too (pre-install,test) runs with the sync, and is checked so.
func testOnly(h render.Hook) bool {
	return !slices.ContainsFunc(h.Events, func(e string) bool { return e != render.TestEvent })
}
