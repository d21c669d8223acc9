package hooks

import (
	"fmt"
	"sort"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// state is where a hook's object stands.
type state int

const (
	// running: the hook has not finished; keep waiting.
	running state = iota
	// succeeded: the hook finished well.
	succeeded
	// failed: the hook finished badly; the outcome says why.
	failed
)

// outcome is a hook's state, and for a failure its reason and message.
type outcome struct {
	state   state
	reason  string
	message string
	// uid is the UID of the object read, set by wait.
	uid types.UID
}

// jobOutcome reads a Job's terminal conditions, as Helm's waiter does: the
// Job is done when Complete is true and has failed when Failed is true. A
// Job that is still running has neither.
func jobOutcome(job *batchv1.Job) outcome {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return outcome{state: succeeded}
		case batchv1.JobFailed:
			reason := c.Reason
			if reason == "" {
				reason = "JobFailed"
			}
			return outcome{state: failed, reason: reason, message: c.Message}
		}
	}
	return outcome{state: running}
}

// podOutcome reads a Pod's phase, as Helm's waiter does: Succeeded is done,
// Failed has failed, and every other phase is still running.
func podOutcome(pod *corev1.Pod) outcome {
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		return outcome{state: succeeded}
	case corev1.PodFailed:
		reason := pod.Status.Reason
		if reason == "" {
			reason = "PodFailed"
		}
		msg := pod.Status.Message
		if c := containerFailures(pod); c != "" {
			msg = strings.TrimPrefix(msg+"; "+c, "; ")
		}
		return outcome{state: failed, reason: reason, message: msg}
	}
	return outcome{state: running}
}

// containerFailures says how a failed pod's containers ended: each one that
// terminated with a non-zero exit code, with its reason, in name order.
func containerFailures(pod *corev1.Pod) string {
	statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	sort.SliceStable(statuses, func(i, j int) bool { return statuses[i].Name < statuses[j].Name })
	var parts []string
	for _, s := range statuses {
		t := s.State.Terminated
		if t == nil {
			t = s.LastTerminationState.Terminated
		}
		if t == nil || t.ExitCode == 0 {
			continue
		}
		part := fmt.Sprintf("container %s exited with code %d", s.Name, t.ExitCode)
		if t.Reason != "" {
			part += " (" + t.Reason + ")"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}

// waitsFor reports whether a hook of this kind is waited for until it
// finishes. Other kinds only need to exist, as in Helm.
func waitsFor(apiVersion, kind string) bool {
	switch {
	case kind == "Job" && strings.HasPrefix(apiVersion, "batch/"):
		return true
	case kind == "Pod" && apiVersion == "v1":
		return true
	}
	return false
}

// Ended reports whether a hook's live object has finished: a Job Complete
// or Failed, a Pod Succeeded or Failed; for a failure, failure says why.
// Any other kind has finished once it exists. An object that cannot be
// read as its kind has ended too, so that the caller goes on to the run
// that reports it.
func Ended(live *unstructured.Unstructured) (ended bool, failure string) {
	if !waitsFor(live.GetAPIVersion(), live.GetKind()) {
		return true, ""
	}
	out, _, err := liveOutcome(live)
	switch {
	case err != nil:
		return true, ""
	case out.state == failed:
		return true, joinMessage(out.reason, out.message)
	}
	return out.state != running, ""
}

// liveOutcome decides a live Job's or Pod's outcome from its status, and
// returns the Job, for a Job, so that a caller can read its pods.
func liveOutcome(live *unstructured.Unstructured) (outcome, *batchv1.Job, error) {
	if live.GetKind() == "Job" {
		job := &batchv1.Job{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(live.Object, job); err != nil {
			return outcome{}, nil, err
		}
		return jobOutcome(job), job, nil
	}
	pod := &corev1.Pod{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(live.Object, pod); err != nil {
		return outcome{}, nil, err
	}
	return podOutcome(pod), nil, nil
}
