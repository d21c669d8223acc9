package controller_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/watch"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestUpgradeRunsAHookTheFailedInstallKept fails a post-install event after
// a hook of both post-install and post-upgrade, with hook-succeeded only,
// has succeeded: its Job is kept for the retry. An upgrade then replaces
// the pending event, and its post-upgrade event must run that hook anew,
// not read the install's Job, which is still there, as its own success.
func TestUpgradeRunsAHookTheFailedInstallKept(t *testing.T) {
	ns := newNamespace(t)
	rec := recordEvents(t, ns)
	hooksOf := func(fail string) string {
		return `extraHooks: [{name: both, kind: Job, events: "post-install,post-upgrade", deletePolicy: hook-succeeded},` +
			` {name: second, kind: Job, events: post-install, weight: "1", fail: ` + fail + `}]`
	}
	a := dbapp(t, ns, `{`+hooksOf("true")+`}`)
	got := failedWith(t, a, "the post-install hook failed", "Job "+ns+"/db-second")
	if p := got.Status.PendingHook; p == nil || len(p.Objects) != 1 || p.Objects[0].Name != "db-both" {
		t.Fatalf("status.pendingHook = %+v; want it to keep the Job db-both for the retry", p)
	}
	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.Values = jsonValues(`{appVersion: "2.0", ` + hooksOf("false") + `}`)
	})
	synced(t, a)
	if n := rec.count("Job/db-both", watch.Added); n != 2 {
		t.Errorf("the Job db-both was created %d times; want twice, once by the install and once by the upgrade", n)
	}
}
