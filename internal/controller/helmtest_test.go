package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestChartTests: a chart's test hooks run as `helm test` runs them. With
// spec.test.enable they run once the install is Current, are in the plan,
// and do not run again for the same render (a refresh); `capstan addon
// test` runs them once more on request; an upgrade whose test fails makes
// the add-on Failed (TestFailed) until ignoreFailures keeps it Synced.
func TestChartTests(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "tested", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata: {v: {{ .Values.v | quote }}}\n",
		// NOTE: hook-failed alone keeps a passed test's Job: a second run
		// must still run anew, not read the old Job's result.
		"templates/tests/check.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: check\n  annotations:\n    helm.sh/hook: test\n    helm.sh/hook-delete-policy: hook-failed\n" +
			"spec:\n  backoffLimit: 0\n  template:\n    metadata:\n      labels: {capstan.dev/test-fail: {{ .Values.fail | quote }}}\n" +
			"    spec:\n      restartPolicy: Never\n      containers:\n        - name: check\n          image: registry.example/tools:1.0\n",
	}})
	a := create(t, newAddon(controllerNS, "tested-"+ns[len(ns)-5:], url, withTarget(ns), withValues("v: \"1\"\nfail: false"),
		withSpec(func(s *capstanv1.AddonSpec) { s.Test = &capstanv1.TestPolicy{Enable: true} })))
	got := synced(t, a)
	first := got.Status.LastTest
	if first == nil || first.Result != capstanv1.TestSucceeded || first.AppliedHash != got.Status.AppliedHash ||
		!strings.Contains(first.Message, "1 test(s) passed: Job "+ns+"/check") {
		t.Fatalf("status.lastTest after the install = %+v", first)
	}
	firstJob := job(t, ns, "check")
	if firstJob == nil || firstJob.Status.Succeeded != 1 {
		t.Fatalf("the test Job did not run to success: %+v", firstJob)
	}
	listed := false
	for _, h := range got.Status.History {
		listed = listed || h.Changes.Hooks == 1
	}
	if !listed {
		t.Errorf("the install's plan did not list the test hook: %+v", got.Status.History)
	}

	// The same render is not tested again.
	capstan(t, "addon", "refresh", a.Name, "-n", controllerNS)
	if again := getAddon(t, a).Status.LastTest; again == nil || !again.StartedAt.Equal(&first.StartedAt) {
		t.Fatalf("a refresh ran the tests again: %+v, then %+v", first, again)
	}

	// A request runs them once more.
	out := capstan(t, "addon", "test", a.Name, "-n", controllerNS)
	if !strings.Contains(out, "Succeeded: 1 test(s) passed") {
		t.Fatalf("capstan addon test printed:\n%s", out)
	}
	requested := getAddon(t, a).Status.LastTest
	if requested.Request == "" || requested.Request != getAddon(t, a).Annotations[capstanv1.TestAnnotation] || !first.StartedAt.Before(&requested.StartedAt) {
		t.Fatalf("the requested run = %+v", requested)
	}
	if again := job(t, ns, "check"); again == nil || again.UID == firstJob.UID || again.Status.Succeeded != 1 {
		t.Fatalf("the requested run read the first run's Job instead of running anew: %+v", again)
	}

	// An upgrade whose test fails: Failed, TestFailed, and the CLI says so.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("v: \"2\"\nfail: true") })
	failed := failedWith(t, a, "the chart's tests failed", "capstan addon test "+a.Name, "spec.test.ignoreFailures")
	if c := condition(failed, capstanv1.ConditionReady); c == nil || c.Reason != "TestFailed" {
		t.Fatalf("the Ready condition of a failed test: %s", describeStatus(failed))
	}
	if lt := failed.Status.LastTest; lt == nil || lt.Result != capstanv1.TestFailed || lt.AppliedHash != failed.Status.AppliedHash {
		t.Fatalf("status.lastTest after the failed test = %+v", lt)
	}
	if out, err := capstanFails(t, "addon", "test", a.Name, "-n", controllerNS); err == nil || !strings.Contains(err.Error(), "failed its tests") {
		t.Fatalf("capstan addon test of a failing test: %v\n%s", err, out)
	}

	// ignoreFailures keeps it Synced, with the failure in status.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Test.IgnoreFailures = true })
	kept := synced(t, a)
	if lt := kept.Status.LastTest; lt == nil || lt.Result != capstanv1.TestFailed {
		t.Fatalf("status.lastTest with ignoreFailures = %+v", lt)
	}
}

// TestChartTestFilters: spec.test.filters leaves a failing test out, so
// the add-on is Synced with the other test passed and the left-out one
// never created; a filter that includes a name no test has fails a
// requested run, holds the add-on and says which names there are,
// creating nothing; mended, the tests run again by themselves and pass.
func TestChartTestFilters(t *testing.T) {
	ns := newNamespace(t)
	test := func(name string, fail bool) string {
		return "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: " + name + "\n  annotations:\n    helm.sh/hook: test\n" +
			"spec:\n  backoffLimit: 0\n  template:\n    metadata:\n      labels: {capstan.dev/test-fail: \"" + fmt.Sprint(fail) + "\"}\n" +
			"    spec:\n      restartPolicy: Never\n      containers:\n        - name: check\n          image: registry.example/tools:1.0\n"
	}
	url, _ := charts.publish(t, chart{name: "filtered", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml":             "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata: {v: \"1\"}\n",
		"templates/tests/check.yaml":    test("check", false),
		"templates/tests/external.yaml": test("external", true),
	}})
	a := create(t, newAddon(controllerNS, "filtered-"+ns[len(ns)-5:], url, withTarget(ns),
		withSpec(func(s *capstanv1.AddonSpec) {
			s.Test = &capstanv1.TestPolicy{Enable: true, Filters: []capstanv1.TestFilter{{Name: "external", Exclude: true}}}
		})))
	got := synced(t, a)
	if lt := got.Status.LastTest; lt == nil || lt.Result != capstanv1.TestSucceeded ||
		lt.Message != "1 test(s) passed: Job "+ns+"/check. Left out by spec.test.filters: Job "+ns+"/external." {
		t.Fatalf("status.lastTest with a test left out = %+v", lt)
	}
	if j := job(t, ns, "external"); j != nil {
		t.Fatalf("the test left out ran: %+v", j.Status)
	}

	// A filter that includes a test the chart does not have.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Test.Filters = []capstanv1.TestFilter{{Name: "chek"}} })
	if out, err := capstanFails(t, "addon", "test", a.Name, "-n", controllerNS); err == nil {
		t.Fatalf("a run of a test no chart has passed:\n%s", out)
	}
	lt := getAddon(t, a).Status.LastTest
	if lt == nil || lt.Result != capstanv1.TestFailed ||
		lt.Message != `None ran: spec.test.filters includes "chek", which no test of the chart is named; its tests are check, external. Fix spec.test.filters.` {
		t.Fatalf("status.lastTest of a filter that names no test = %+v", lt)
	}
	if j := job(t, ns, "external"); j != nil {
		t.Fatalf("a run that selected nothing ran the test left out: %+v", j.Status)
	}
	// With spec.test.enable, a run that fails holds the add-on, and
	// says what to fix.
	failedWith(t, a, `spec.test.filters includes "chek"`, "Fix spec.test.filters")

	// The filter mended: the tests of the render whose run failed run
	// again, with no request, and pass.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Test.Filters = []capstanv1.TestFilter{{Name: "check"}} })
	mended := synced(t, a)
	if lt := mended.Status.LastTest; lt == nil || lt.Result != capstanv1.TestSucceeded || lt.Filters == "" ||
		lt.Message != "1 test(s) passed: Job "+ns+"/check. Left out by spec.test.filters: Job "+ns+"/external." {
		t.Fatalf("status.lastTest once the filter is mended = %+v", lt)
	}
	if j := job(t, ns, "external"); j != nil {
		t.Fatalf("a filter that includes only check ran external: %+v", j.Status)
	}
}

// TestRestrictedTestsAreGuarded: a tenant's test hook that breaks a
// guardrail does not hold the sync, which never runs it, and a request to
// run it fails with the guardrail, creating nothing and leaving the
// add-on Synced. A test may read the chart's own Secret.
func TestRestrictedTestsAreGuarded(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "guardedtest", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata: {v: \"1\"}\n",
		"templates/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData: {password: x}\n",
		"templates/tests/probe.yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: probe\n  annotations:\n    helm.sh/hook: test\n" +
			"spec:\n  hostNetwork: true\n  restartPolicy: Never\n  containers:\n    - name: probe\n      image: registry.example/tools:1.0\n" +
			"      env: [{name: PASSWORD, valueFrom: {secretKeyRef: {name: creds, key: password}}}]\n",
	}})
	a := create(t, newAddon(ns, "guarded", url))
	got := synced(t, a)
	if got.Status.Profile != capstanv1.ProfileRestricted || len(got.Status.Plan.Violations) != 0 {
		t.Fatalf("the tenant's add-on: profile %s, violations %+v", got.Status.Profile, got.Status.Plan.Violations)
	}
	out, err := capstanFails(t, "addon", "test", a.Name, "-n", ns)
	if err == nil || !strings.Contains(err.Error(), "break 1 of the platform's guardrails, so none ran") || !strings.Contains(err.Error(), "Pod "+ns+"/probe") {
		t.Fatalf("capstan addon test of a test that breaks a guardrail: %v\n%s", err, out)
	}
	if live(t, "v1", "Pod", ns, "probe") != nil {
		t.Fatal("the test that breaks a guardrail was created")
	}
	// Asked for, not enabled: a failed run changes no phase, as helm test
	// leaves a release deployed.
	if got := getAddon(t, a); got.Status.Phase != capstanv1.PhaseSynced || got.Status.LastTest == nil || got.Status.LastTest.Result != capstanv1.TestFailed {
		t.Fatalf("after a failed run that was only asked for: %s, lastTest %+v", describeStatus(got), got.Status.LastTest)
	}
}

// TestRestrictedTestsLeftOutAreNotRendered: a tenant's chart has two
// tests, a Job that mounts the Secret platform-db and a Secret of that
// name, in a namespace that holds the platform's Secret platform-db.
// spec.test.filters leaves the Secret out, so the run would create only
// the Job, which would mount the platform's Secret: the run fails with
// reference-not-rendered and creates nothing. A test left out of the run
// is not rendered for the tests that run.
func TestRestrictedTestsLeftOutAreNotRendered(t *testing.T) {
	ns := newNamespace(t)
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "platform-db"}, StringData: map[string]string{"password": "platform"}}
	if err := admin.Create(context.Background(), theirs); err != nil {
		t.Fatal(err)
	}
	url, _ := charts.publish(t, chart{name: "leftouttest", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata: {v: \"1\"}\n",
		"templates/tests/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: platform-db\n  annotations:\n    helm.sh/hook: test\n" +
			"stringData: {password: x}\n",
		"templates/tests/check.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: check\n  annotations:\n    helm.sh/hook: test\n" +
			"spec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: check\n          image: registry.example/tools:1.0\n" +
			"          volumeMounts: [{name: s, mountPath: /s}]\n      volumes: [{name: s, secret: {secretName: platform-db}}]\n",
	}})
	a := create(t, newAddon(ns, "leftout", url, withSpec(func(s *capstanv1.AddonSpec) {
		s.Test = &capstanv1.TestPolicy{Filters: []capstanv1.TestFilter{{Name: "platform-db", Exclude: true}}}
	})))
	if got := synced(t, a); got.Status.Profile != capstanv1.ProfileRestricted {
		t.Fatalf("the tenant's add-on: profile %s", got.Status.Profile)
	}
	out, err := capstanFails(t, "addon", "test", a.Name, "-n", ns)
	if err == nil || !strings.Contains(err.Error(), "Job "+ns+"/check") || !strings.Contains(err.Error(), "reference-not-rendered") {
		t.Fatalf("capstan addon test of a test that mounts the platform's Secret: %v\n%s", err, out)
	}
	if job(t, ns, "check") != nil {
		t.Fatal("the test that mounts the platform's Secret was created")
	}
}
