package hooks_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/hooks"
)

const minute = time.Minute

// TestOrderAndWaiting runs the pre-install hooks of weights -20, -10, 0, a
// non-numeric weight, and 5, with Jobs among them, and observes from the
// API server's resourceVersions that each was created in order (weight,
// kind, name) and only after the Job before it had finished.
func TestOrderAndWaiting(t *testing.T) {
	f := newFixture(t)
	hs := f.hooksOf(`
extraHooks:
  - {name: late, kind: ConfigMap, events: pre-install, weight: "5"}
  - {name: first, kind: ConfigMap, events: pre-install, weight: "-20"}
  - {name: zzz, kind: ConfigMap, events: pre-install, weight: "0"}
  - {name: nonnumeric, kind: ConfigMap, events: pre-install, weight: "abc"}
  - {name: aaa, kind: Job, events: pre-install, weight: "0"}
  - {name: typo, kind: ConfigMap, events: pre-instal, weight: "-30"}
  - {name: upgrade-only, kind: ConfigMap, events: pre-upgrade, weight: "-30"}
`, false)
	rec := f.record()
	if err := f.run("pre-install", hs, minute); err != nil {
		t.Fatal(err)
	}
	// Weight 0 ties go by kind (ConfigMaps before Jobs), then by name.
	want := []string{"ConfigMap/db-first", "Job/db-initdb", "ConfigMap/db-nonnumeric", "ConfigMap/db-zzz", "Job/db-aaa", "ConfigMap/db-late"}
	var created []*creation
	eventually(t, 10*time.Second, "the watch to see every creation", func() bool {
		created = rec.created(t)
		return len(created) >= len(want)
	})
	if diff := cmp.Diff(want, keys(created)); diff != "" {
		t.Fatalf("creation order (-want +got):\n%s", diff)
	}
	for i, c := range created[:len(created)-1] {
		if !strings.HasPrefix(c.key, "Job/") {
			continue
		}
		next := created[i+1]
		if c.finishedRV == "" || !rvLess(t, c.finishedRV, next.createdRV) {
			t.Errorf("%s was created (rv %s) before %s finished (rv %q): a Job hook must be waited for", next.key, next.createdRV, c.key, c.finishedRV)
		}
	}
	for _, name := range []string{"db-initdb", "db-aaa"} {
		j := f.job(name)
		if j == nil || j.Status.Succeeded != 1 {
			t.Errorf("%s, want it kept (before-hook-creation) and succeeded", jobString(j))
		}
	}
	if f.configMap("db-typo") != nil {
		t.Error("the hook with the unknown event pre-instal ran")
	}
	if f.configMap("db-upgrade-only") != nil {
		t.Error("a pre-upgrade hook ran on pre-install")
	}
	wantProgress := make([]string, len(want))
	for i, w := range want {
		wantProgress[i] = "pre-install " + w
	}
	if diff := cmp.Diff(wantProgress, f.progress); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
}

// TestDeletePolicies runs one Job hook under each delete policy, succeeding
// and failing, and checks whether the Job and its pods are left.
func TestDeletePolicies(t *testing.T) {
	tests := []struct {
		name     string
		policy   string
		fail     bool
		wantKept bool
	}{
		{"default keeps a succeeded hook", "", false, true},
		{"default keeps a failed hook", "", true, true},
		{"hook-succeeded deletes a succeeded hook", "hook-succeeded", false, false},
		{"hook-succeeded keeps a failed hook", "hook-succeeded", true, true},
		{"hook-failed deletes a failed hook", "hook-failed", true, false},
		{"hook-failed keeps a succeeded hook", "hook-failed", false, true},
		{"both delete a succeeded hook", "hook-succeeded,hook-failed", false, false},
		{"both delete a failed hook", "hook-succeeded,hook-failed", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			hs := f.hooksOf(`
hooks:
  initdb: {deletePolicy: "`+tt.policy+`", fail: `+boolString(tt.fail)+`}
`, false)
			rec := f.record()
			err := f.run("pre-install", hs, minute)
			if tt.fail {
				_ = hookError(t, err)
			} else if err != nil {
				t.Fatal(err)
			}
			j := f.job("db-initdb")
			if kept := j != nil; kept != tt.wantKept {
				t.Fatalf("Job kept = %v, want %v", kept, tt.wantKept)
			}
			if tt.wantKept {
				return
			}
			// The Job was there, with pods, and its deletion took them too.
			eventually(t, 5*time.Second, "the watch to see the Job's pod", func() bool { return rec.saw("Pod/db-initdb-") })
			eventually(t, 30*time.Second, "the deleted Job's pods to go", func() bool {
				return len(f.podsOfJob("db-initdb")) == 0
			})
		})
	}
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// podsOfJob lists the pods of a Job by the job-name label.
func (f *fixture) podsOfJob(name string) []corev1.Pod {
	f.t.Helper()
	list := &corev1.PodList{}
	if err := admin.List(context.Background(), list, client.InNamespace(f.ns), client.MatchingLabels{batchv1.JobNameLabel: name}); err != nil {
		f.t.Fatal(err)
	}
	return list.Items
}

// TestBeforeHookCreationRecreates runs the same hook twice: the second run
// deletes the first Job and creates a new one, which runs again.
func TestBeforeHookCreationRecreates(t *testing.T) {
	f := newFixture(t)
	hs := f.hooksOf("", false)
	if err := f.run("pre-install", hs, minute); err != nil {
		t.Fatal(err)
	}
	first := f.job("db-initdb")
	if first == nil {
		t.Fatal("the first run left no Job")
	}
	if err := f.run("pre-install", hs, minute); err != nil {
		t.Fatal(err)
	}
	second := f.job("db-initdb")
	if second == nil || second.UID == first.UID {
		t.Fatalf("the second run kept the Job %s; before-hook-creation must create it anew", first.UID)
	}
	if second.Status.Succeeded != 1 {
		t.Errorf("the new Job has %d succeeded pods, want 1: it must run again", second.Status.Succeeded)
	}
	eventually(t, 30*time.Second, "the first Job's pods to go", func() bool {
		return len(f.podsOf(string(first.UID))) == 0
	})
}

// TestKeptFailedHookIsReadAgain shows Helm's semantics for a hook whose
// policies lack before-hook-creation: its failed Job from an earlier run
// stays, is applied unchanged and fails again, and the error says how to
// run it anew.
func TestKeptFailedHookIsReadAgain(t *testing.T) {
	f := newFixture(t)
	hs := f.hooksOf(`
hooks:
  initdb: {deletePolicy: hook-succeeded, fail: true}
`, false)
	first := hookError(t, f.run("pre-install", hs, minute))
	if first.Kept {
		t.Error("the first run says the hook was kept from an earlier run")
	}
	uid := f.job("db-initdb").UID
	second := hookError(t, f.run("pre-install", hs, minute))
	if !second.Kept || !strings.Contains(second.Error(), "delete Job "+f.ns+"/db-initdb to run it anew") {
		t.Errorf("second error = %v; want it to say the Job was kept and how to run it anew", second)
	}
	if j := f.job("db-initdb"); j == nil || j.UID != uid {
		t.Error("the kept Job was replaced")
	}
}

// TestFailedJobStopsTheEvent makes the weight -10 Job fail with exit code
// 3: the error names the hook and the Job's failure reason, the hook
// before it that has hook-succeeded is deleted (as Helm does), and the
// hooks after it never run.
func TestFailedJobStopsTheEvent(t *testing.T) {
	f := newFixture(t)
	hs := f.hooksOf(`
hooks:
  initdb: {fail: true, exitCode: 3}
extraHooks:
  - {name: before, kind: ConfigMap, events: pre-install, weight: "-20", deletePolicy: hook-succeeded}
  - {name: after, kind: ConfigMap, events: pre-install, weight: "5"}
`, false)
	rec := f.record()
	he := hookError(t, f.run("pre-install", hs, minute))
	if he.Event != "pre-install" || he.Hook.Kind != "Job" || he.Hook.Name != "db-initdb" || he.Hook.Namespace != f.ns || he.Weight != -10 {
		t.Errorf("error names %s %+v weight %d, want pre-install Job %s/db-initdb weight -10", he.Event, he.Hook, he.Weight, f.ns)
	}
	if he.Reason != "BackoffLimitExceeded" {
		t.Errorf("reason = %q, want the Job's Failed condition reason BackoffLimitExceeded", he.Reason)
	}
	msg := he.Error()
	for _, want := range []string{
		"pre-install hook Job " + f.ns + "/db-initdb (weight -10, from dbapp/templates/hooks/initdb.yaml) failed: BackoffLimitExceeded",
		"backoff limit",
		"container initdb exited with code 3 (Error)",
		"The next sync runs the hook again",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q\nlacks %q", msg, want)
		}
	}
	if f.configMap("db-after") != nil {
		t.Error("a hook after the failed one ran")
	}
	eventually(t, 5*time.Second, "the watch to see db-before", func() bool { return rec.saw("ConfigMap/db-before") })
	if f.configMap("db-before") != nil {
		t.Error("the succeeded hook db-before (hook-succeeded) was kept after a later hook failed; Helm deletes it")
	}
}

// TestHookTimeout runs a Job whose pod is never scheduled: Run stops at the
// hook timeout with an error that says so, and the next run, with the
// chart fixed, deletes the stuck Job and succeeds.
func TestHookTimeout(t *testing.T) {
	f := newFixture(t)
	start := time.Now()
	he := hookError(t, f.run("pre-install", f.hooksOf(`{hooks: {initdb: {hang: true}}}`, false), 3*time.Second))
	elapsed := time.Since(start)
	if he.Reason != hooks.ReasonTimeout || he.Timeout != 3*time.Second {
		t.Errorf("reason %q timeout %s, want Timeout 3s", he.Reason, he.Timeout)
	}
	if elapsed < 3*time.Second || elapsed > 20*time.Second {
		t.Errorf("Run took %s, want about the 3s timeout", elapsed)
	}
	for _, want := range []string{"pre-install hook Job " + f.ns + "/db-initdb (weight -10", "did not finish within the hook timeout of 3s", "Pending 1", "raise spec.hookTimeout", "The next sync runs the hook again"} {
		if !strings.Contains(he.Error(), want) {
			t.Errorf("error %q\nlacks %q", he.Error(), want)
		}
	}
	stuck := f.job("db-initdb")
	if stuck == nil {
		t.Fatal("the timed-out Job is gone; before-hook-creation keeps it until the next run")
	}
	if err := f.run("pre-install", f.hooksOf("", false), minute); err != nil {
		t.Fatalf("the next run: %v", err)
	}
	if j := f.job("db-initdb"); j == nil || j.UID == stuck.UID || j.Status.Succeeded != 1 {
		t.Errorf("after the next run: %s; want a new Job that succeeded", jobString(j))
	}
}

// TestPodHooks waits for bare Pod hooks: one that succeeds (the test plays
// the kubelet, since kwok leaves a pod without a Job running), one that
// kwok fails, and one that stays Running past the timeout.
func TestPodHooks(t *testing.T) {
	t.Run("succeeded", func(t *testing.T) {
		f := newFixture(t)
		hs := f.hooksOf(`{extraHooks: [{name: check, kind: Pod, events: post-install}]}`, false)
		done := make(chan error, 1)
		go func() { done <- f.run("post-install", hs, minute) }()
		var pod corev1.Pod
		eventually(t, 30*time.Second, "the hook pod to run", func() bool {
			return admin.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "db-check"}, &pod) == nil && pod.Status.Phase == corev1.PodRunning
		})
		time.Sleep(time.Second)
		select {
		case err := <-done:
			t.Fatalf("Run returned (%v) while the hook pod was still Running", err)
		default:
		}
		patch := client.MergeFrom(pod.DeepCopy())
		pod.Status.Phase = corev1.PodSucceeded
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "check", Image: pod.Spec.Containers[0].Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}}}
		if err := admin.Status().Patch(context.Background(), &pod, patch); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return after the hook pod succeeded")
		}
	})
	t.Run("failed", func(t *testing.T) {
		f := newFixture(t)
		he := hookError(t, f.run("post-install", f.hooksOf(`{extraHooks: [{name: broken, kind: Pod, events: post-install, fail: true, exitCode: 7}]}`, false), minute))
		if he.Reason != "PodFailed" || !strings.Contains(he.Message, "container broken exited with code 7 (Error)") {
			t.Errorf("error = %v, want PodFailed with the container's exit code", he)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		f := newFixture(t)
		he := hookError(t, f.run("post-install", f.hooksOf(`{extraHooks: [{name: stuck, kind: Pod, events: post-install}]}`, false), 2*time.Second))
		if he.Reason != hooks.ReasonTimeout || !strings.Contains(he.Error(), "(the pod is Running)") {
			t.Errorf("error = %v, want a timeout that says the pod is Running", he)
		}
	})
}

// TestPreInstallNamespace runs a pre-install hook into a target namespace
// that does not exist yet: created when the Addon asks for it, reported
// otherwise.
func TestPreInstallNamespace(t *testing.T) {
	f := newFixture(t)
	target := f.ns + "-target"
	f.addon.Spec.TargetNamespace = target
	hs := f.hooksOf("", false)
	for _, h := range hs {
		h.Object.SetNamespace(target)
	}
	he := hookError(t, f.run("pre-install", hs, minute))
	if he.Reason != hooks.ReasonCreateFailed || !strings.Contains(he.Error(), "namespace "+target+" does not exist; create it, or set spec.createNamespace: true") {
		t.Errorf("without createNamespace: %v", he)
	}

	f.addon.Spec.CreateNamespace = true
	if err := f.run("pre-install", hs, minute); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{}
	if err := admin.Get(context.Background(), client.ObjectKey{Name: target}, ns); err != nil {
		t.Fatal(err)
	}
	if ns.Labels["capstan.dev/addon"] != "dbapp" || ns.Labels["app.kubernetes.io/managed-by"] != "capstan" {
		t.Errorf("namespace labels = %v, want Capstan's", ns.Labels)
	}
	j := &batchv1.Job{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: target, Name: "db-initdb"}, j); err != nil || j.Status.Succeeded != 1 {
		t.Errorf("Job in the new namespace: %v, succeeded %d", err, j.Status.Succeeded)
	}
}

// TestUpgradeRunsTheMigration renders the chart for an upgrade: only the
// pre-upgrade migration runs, rendered with the new version.
func TestUpgradeRunsTheMigration(t *testing.T) {
	f := newFixture(t)
	hs := f.hooksOf(`appVersion: "2.0"`, true)
	if err := f.run("pre-upgrade", hs, minute); err != nil {
		t.Fatal(err)
	}
	if err := f.run("post-upgrade", hs, minute); err != nil {
		t.Fatalf("post-upgrade, which has no hooks: %v", err)
	}
	j := f.job("db-migrate")
	if j == nil || j.Status.Succeeded != 1 {
		t.Fatalf("migrate: %s, want it run", jobString(j))
	}
	if got := j.Spec.Template.Spec.Containers[0].Args; !cmp.Equal(got, []string{"migrate", "--to", "2.0"}) {
		t.Errorf("migrate args = %v", got)
	}
	for _, name := range []string{"db-initdb", "db-seed", "db-backup"} {
		if f.job(name) != nil {
			t.Errorf("Job %s ran on upgrade", name)
		}
	}
}

// jobString describes a Job in one line for a failure message.
func jobString(j *batchv1.Job) string {
	if j == nil {
		return "absent"
	}
	conds := []string{}
	for _, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			conds = append(conds, string(c.Type)+"/"+c.Reason)
		}
	}
	return fmt.Sprintf("Job %s (uid %s): active %d, succeeded %d, failed %d, conditions %v", j.Name, j.UID, j.Status.Active, j.Status.Succeeded, j.Status.Failed, conds)
}
