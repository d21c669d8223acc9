package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// keeps the run. With spec.test.enable, a failed run makes the add-on
// Failed (TestFailed), Stalled, until another render or another request
// passes, unless spec.test.ignoreFailures is set; a run only asked for
// changes no phase, as `helm test` leaves a release deployed, and says
// its failure in status.lastTest and a warning event. The tests run as
// the other hooks do, bounded by the hook timeout: a test still running
// after the hook wait ends the reconcile (awaitHook), and the look that
// finds it ended goes on from the run, as does a run the controller was
// stopped in (runHooks).
func (r *AddonReconciler) runTests(ctx context.Context, s *scope) (bool, error) {
	st := &s.addon.Status
	policy := s.addon.Spec.Test
	if policy == nil {
		policy = &capstanv1.TestPolicy{}
	}
	holds := policy.Enable && !policy.IgnoreFailures
	req := s.addon.Annotations[capstanv1.TestAnnotation]
	last := st.LastTest
	requested := req != "" && (last == nil || last.Request != req)
	// NOTE: filters changed after a failed run may leave out the test
	// that failed, or mend a filter that named no test.
	refiltered := last != nil && last.Result == capstanv1.TestFailed && last.Filters != testFiltersKey(policy.Filters)
	due := requested || policy.Enable && (last == nil || last.AppliedHash != st.AppliedHash || refiltered)
	if h := st.Hook; !due && h != nil && h.Event == render.TestEvent {
		// NOTE: a run no longer due (spec.test turned off while it ran)
		// that nothing will go on from.
		st.Hook = nil
	}
	if due && st.AppliedHash != "" {
		if err := overlongRequest(capstanv1.TestAnnotation, req, "test"); err != nil {
			return false, err
		}
		run, err := r.testOnce(ctx, s, req)
		if r.endedByHook(ctx, s, err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		st.LastTest, last = run, run
		if run.Result == capstanv1.TestFailed && !holds && r.Recorder != nil {
			// NOTE: a failure that holds the add-on is its phase's event.
			r.Recorder.Eventf(s.addon, nil, "Warning", "TestFailed", "Test", "%s", truncate(s.mask().String(run.Message), 1000))
		}
	}
	if holds && last != nil && last.Result == capstanv1.TestFailed && last.AppliedHash == st.AppliedHash {
		return false, terminal{fmt.Errorf("the chart's tests failed for the render that runs: %s To run them again: `capstan addon test %s` (a new value of the %s annotation); to keep the add-on Synced when they fail, set spec.test.ignoreFailures",
			last.Message, s.addon.Name, capstanv1.TestAnnotation)}
	}
	return false, nil
}

// testOnce runs the test hooks once and says how it went. An error is one
// to retry, not a test that failed: the controller stops, or the API
// server could not take a hook for a moment.
func (r *AddonReconciler) testOnce(ctx context.Context, s *scope, req string) (*capstanv1.TestRun, error) {
	filters := testFilters(s.addon)
	run := &capstanv1.TestRun{AppliedHash: s.addon.Status.AppliedHash, Request: req, Filters: testFiltersKey(filters), StartedAt: metav1.Now()}
	if h := s.addon.Status.Hook; h != nil && h.Event == render.TestEvent && h.Run == hookRun(s, render.TestEvent) {
		// NOTE: a run that goes on from one an earlier look left running.
		run.StartedAt = h.Since
	}
	all := hooks.Select(s.hooks, render.TestEvent)
	selected, left, unknown := filterTests(all, filters)
	end := func(result, message string) (*capstanv1.TestRun, error) {
		run.Result, run.Message, run.FinishedAt = result, truncate(s.mask().String(message), 2000), metav1.Now()
		return run, nil
	}
	switch {
	case len(all) == 0 && s.render != nil && s.render.TestsLeftOut != "":
		return end(capstanv1.TestFailed, "None ran: "+s.render.TestsLeftOut+". Fix spec.patches or spec.images.")
	case len(all) == 0:
		return end(capstanv1.TestNone, "The chart has no test hooks (helm.sh/hook: test).")
	case len(unknown) > 0:
		return end(capstanv1.TestFailed, fmt.Sprintf("None ran: spec.test.filters includes %s, which no test of the chart is named; its tests are %s. Fix spec.test.filters.",
			quoteAll(unknown), strings.Join(testNames(all), ", ")))
	case len(selected) == 0:
		return end(capstanv1.TestNone, fmt.Sprintf("None ran: spec.test.filters leaves out every test of the chart (%s).", strings.Join(left, ", ")))
	}
	if vs := r.testViolations(ctx, s, selected); len(vs) > 0 {
		v := vs[0]
		if onlyReadsFailed(vs) {
			// NOTE: a live read that failed for a moment is no fault of
			// the chart's tests: the run is retried with backoff, rather
			// than failed, and Stalled with spec.test.enable.
			return nil, fmt.Errorf("checking the guardrails of the test %s: %s", v.Object.Describe(), v.Message)
		}
		return end(capstanv1.TestFailed, fmt.Sprintf("The tests break %d of the platform's guardrails, so none ran; the first: %s %s: %s (%s). Fix the chart's tests.",
			len(vs), v.Object.Describe(), v.Path, v.Message, v.Rule))
	}
	logf.FromContext(ctx).Info("Running the chart's tests", "hooks", len(selected), "request", req)
	err := r.runHooks(ctx, s, render.TestEvent, nil)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil && (!hooks.IsHookError(err) || transientHookError(err)):
		return nil, err
	case err != nil:
		return end(capstanv1.TestFailed, err.Error())
	}
	names := make([]string, 0, len(selected))
	for _, h := range selected {
		names = append(names, capstanv1.RefOf(h.Object).Describe())
	}
	message := fmt.Sprintf("%d test(s) passed: %s.", len(selected), strings.Join(names, ", "))
	if len(left) > 0 {
		message += fmt.Sprintf(" Left out by spec.test.filters: %s.", strings.Join(left, ", "))
	}
	return end(capstanv1.TestSucceeded, message)
}

// testFilters are the Addon's spec.test.filters, or none.
func testFilters(a *capstanv1.Addon) []capstanv1.TestFilter {
	if a.Spec.Test == nil {
		return nil
	}
	return a.Spec.Test.Filters
}

// testFiltersKey identifies a set of filters, whatever their order: ""
// for none, so that a run without filters is named as before they were
// read.
func testFiltersKey(filters []capstanv1.TestFilter) string {
	if len(filters) == 0 {
		return ""
	}
	lines := make([]string, len(filters))
	for i, f := range filters {
		lines[i] = fmt.Sprintf("%t %s", f.Exclude, f.Name)
	}
	slices.Sort(lines)
	lines = slices.Compact(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:8])
}

// filterTests applies spec.test.filters to hs, as `helm test --filter`
// does: the tests a filter excludes are left out; when any filter
// includes, so are the tests none includes. Hooks that are no tests pass
// as they are. It returns what is kept, the names of the tests left out,
// and the names an including filter gives that no test of hs has.
func filterTests(hs []render.Hook, filters []capstanv1.TestFilter) (kept []render.Hook, left, unknown []string) {
	if len(filters) == 0 {
		return hs, nil, nil
	}
	excluded, included := map[string]bool{}, map[string]bool{}
	for _, f := range filters {
		if f.Exclude {
			excluded[f.Name] = true
		} else {
			included[f.Name] = true
		}
	}
	found := map[string]bool{}
	for _, h := range hs {
		name := h.Object.GetName()
		switch {
		case !h.IsTest():
		case excluded[name], len(included) > 0 && !included[name]:
			found[name] = found[name] || included[name]
			left = append(left, capstanv1.RefOf(h.Object).Describe())
			continue
		default:
			found[name] = true
		}
		kept = append(kept, h)
	}
	for name := range included {
		if !found[name] {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	return kept, left, unknown
}

// testNames are the names of the tests among hs, for a message.
func testNames(hs []render.Hook) []string {
	var out []string
	for _, h := range hs {
		if h.IsTest() {
			out = append(out, h.Object.GetName())
		}
	}
	return out
}

// quoteAll quotes each name, joined by commas.
func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// testViolations runs the guardrails of a restricted add-on over the
// tests that run (selected), which the sync's leave out
// (checkGuardrails): over what the sync guards and the tests that run,
// so that a test may read the chart's own Secret and may not share an
// applied object's name, keeping what they find in those tests. A test
// spec.test.filters leaves out is not created, so it is not rendered for
// the tests that run: a Secret test left out must not make the name of
// a Secret the chart does not own look like the chart's.
func (r *AddonReconciler) testViolations(ctx context.Context, s *scope, selected []render.Hook) []capstanv1.Violation {
	if s.profile != capstanv1.ProfileRestricted {
		return nil
	}
	all := guarded(s)
	tests := map[string]bool{}
	for _, h := range selected {
		if h.TestOnly() {
			all = append(all, h.Object)
			tests[capstanv1.RefOf(h.Object).Key()] = true
		}
	}
	var out []capstanv1.Violation
	for _, v := range guard.Check(ctx, all, r.guardContext(s)) {
		if tests[v.Object.Key()] {
			out = append(out, v)
		}
	}
	return out
}

// testHooks are the hooks a test run hands the runner: the tests
// spec.test.filters keeps, each of which deletes the object of its last
// run before it runs, whatever its delete policies, as `helm test` never
// reads an old test's result as a new one's.
func testHooks(hs []render.Hook, filters []capstanv1.TestFilter) []render.Hook {
	hs, _, _ = filterTests(hs, filters)
	out := make([]render.Hook, len(hs))
	for i, h := range hs {
		if h.IsTest() && !slices.Contains(h.DeletePolicies, hooks.BeforeHookCreation) {
			h.DeletePolicies = append(slices.Clone(h.DeletePolicies), hooks.BeforeHookCreation)
		}
		out[i] = h
	}
	return out
}
