package hooks

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

func TestJobOutcome(t *testing.T) {
	cond := func(typ batchv1.JobConditionType, status corev1.ConditionStatus, reason, msg string) batchv1.JobCondition {
		return batchv1.JobCondition{Type: typ, Status: status, Reason: reason, Message: msg}
	}
	tests := []struct {
		name       string
		conditions []batchv1.JobCondition
		want       outcome
	}{
		{"no conditions: running", nil, outcome{state: running}},
		{"complete", []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, "", ""), cond(batchv1.JobComplete, corev1.ConditionTrue, "", "")}, outcome{state: succeeded}},
		{"success criteria met but not yet complete: running", []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, "", "")}, outcome{state: running}},
		{"failure target but not yet failed: running", []batchv1.JobCondition{cond(batchv1.JobFailureTarget, corev1.ConditionTrue, "BackoffLimitExceeded", "")}, outcome{state: running}},
		{"failed with its reason and message",
			[]batchv1.JobCondition{cond(batchv1.JobFailed, corev1.ConditionTrue, "BackoffLimitExceeded", "Job has reached the specified backoff limit")},
			outcome{state: failed, reason: "BackoffLimitExceeded", message: "Job has reached the specified backoff limit"}},
		{"deadline", []batchv1.JobCondition{cond(batchv1.JobFailed, corev1.ConditionTrue, "DeadlineExceeded", "Job was active longer than specified deadline")},
			outcome{state: failed, reason: "DeadlineExceeded", message: "Job was active longer than specified deadline"}},
		{"a false Failed condition is not a failure", []batchv1.JobCondition{cond(batchv1.JobFailed, corev1.ConditionFalse, "X", "")}, outcome{state: running}},
		{"failed without a reason", []batchv1.JobCondition{cond(batchv1.JobFailed, corev1.ConditionTrue, "", "")}, outcome{state: failed, reason: "JobFailed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := jobOutcome(&batchv1.Job{Status: batchv1.JobStatus{Conditions: tt.conditions}})
			if got != tt.want {
				t.Errorf("jobOutcome = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestPodOutcome(t *testing.T) {
	exited := func(name string, code int32, reason string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}}
	}
	tests := []struct {
		name   string
		status corev1.PodStatus
		want   outcome
	}{
		{"pending", corev1.PodStatus{Phase: corev1.PodPending}, outcome{state: running}},
		{"running", corev1.PodStatus{Phase: corev1.PodRunning}, outcome{state: running}},
		{"unknown", corev1.PodStatus{Phase: corev1.PodUnknown}, outcome{state: running}},
		{"succeeded", corev1.PodStatus{Phase: corev1.PodSucceeded}, outcome{state: succeeded}},
		{"failed, with each failed container in name order",
			corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{exited("b", 3, "Error"), exited("ok", 0, "Completed"), exited("a", 137, "OOMKilled")}},
			outcome{state: failed, reason: "PodFailed", message: "container a exited with code 137 (OOMKilled), container b exited with code 3 (Error)"}},
		{"failed with the pod's reason",
			corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeadlineExceeded", Message: "Pod was active on the node longer than the specified deadline"},
			outcome{state: failed, reason: "DeadlineExceeded", message: "Pod was active on the node longer than the specified deadline"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := podOutcome(&corev1.Pod{Status: tt.status})
			if got != tt.want {
				t.Errorf("podOutcome = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestWaitsFor(t *testing.T) {
	tests := []struct {
		apiVersion, kind string
		want             bool
	}{
		{"batch/v1", "Job", true},
		{"v1", "Pod", true},
		{"v1", "ConfigMap", false},
		{"example.com/v1", "Job", false},
		{"apps/v1", "Deployment", false},
	}
	for _, tt := range tests {
		if got := waitsFor(tt.apiVersion, tt.kind); got != tt.want {
			t.Errorf("waitsFor(%s, %s) = %v, want %v", tt.apiVersion, tt.kind, got, tt.want)
		}
	}
}

func TestErrorMessage(t *testing.T) {
	ref := capstanv1.ObjectRef{APIVersion: "batch/v1", Kind: "Job", Namespace: "db", Name: "app-migrate"}
	tests := []struct {
		name string
		err  *Error
		want []string
	}{
		{"failed job", &Error{Event: "pre-upgrade", Hook: ref, Weight: -5, Template: "app/templates/migrate.yaml", Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"},
			[]string{"pre-upgrade hook Job db/app-migrate (weight -5, from app/templates/migrate.yaml) failed: BackoffLimitExceeded: Job has reached the specified backoff limit.", "Fix the chart or its values.", "The next sync runs the hook again; to retry at once, raise spec.syncRequest (with manualSync, approve the plan instead: `capstan addon sync`)."}},
		{"timeout", &Error{Event: "post-install", Hook: ref, Reason: ReasonTimeout, Timeout: 90 * time.Second, Message: "the Job has 1 active, 0 succeeded and 0 failed pods"},
			[]string{"post-install hook Job db/app-migrate (weight 0) did not finish within the hook timeout of 1m30s (the Job has 1 active", "raise spec.hookTimeout", "The next sync runs the hook again"}},
		{"kept", &Error{Event: "pre-install", Hook: ref, Reason: "BackoffLimitExceeded", Kept: true},
			[]string{"delete Job db/app-migrate to run it anew", "lack before-hook-creation"}},
		{"kept by a mark", &Error{Event: "pre-install", Hook: ref, Reason: "BackoffLimitExceeded", Kept: true, KeptBy: "helm.sh/resource-policy: keep"},
			[]string{"not deleted by its before-hook-creation policy (kept by helm.sh/resource-policy: keep); delete Job db/app-migrate to run it anew"}},
		{"sync-fail", &Error{Event: "sync-fail", Hook: ref, Reason: "BackoffLimitExceeded"},
			[]string{"sync-fail hook Job db/app-migrate (weight 0) failed", "It runs again only when another render fails."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := tt.err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q\nlacks %q", msg, w)
				}
			}
			if tt.err.Event == "sync-fail" && strings.Contains(msg, "The next sync runs the hook again") {
				t.Errorf("message %q promises a retry that never comes", msg)
			}
			if !IsHookError(tt.err) {
				t.Error("IsHookError = false")
			}
		})
	}
}
