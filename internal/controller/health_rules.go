package controller

import (
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// computeHealth is kstatus's judgement of a live object, with Capstan's own
// rules where kstatus calls Current what the health page promises is not:
//
//   - a condition that says which generation it describes
//     (conditions[].observedGeneration), and names one older than
//     metadata.generation, describes the spec before the latest change: the
//     object is in progress, whatever the condition says. kstatus compares
//     only status.observedGeneration, and reads no condition's own; a
//     cert-manager Certificate updated to generation 2 whose Ready is still
//     generation 1's would be Current at once.
//   - a Job is Current only once its Complete condition is True. kstatus
//     calls a Job Current as soon as it has started ("Job in progress"), so
//     a migration Job in an earlier wave would let the next wave go as soon
//     as its pod was created.
//   - a Pod in phase Failed has failed. kstatus calls it Current ("Pod has
//     completed, but not successfully").
//   - a StatefulSet with the OnDelete update strategy is Current once its
//     ready replicas reach spec.replicas. kstatus calls it Current at once,
//     with no pod ready.
//
// Argo CD judges Jobs, failed Pods and OnDelete StatefulSets the same way.
// An object being deleted is left to kstatus (Terminating).
func computeHealth(live *unstructured.Unstructured) (*status.Result, error) {
	if live.GetDeletionTimestamp() != nil {
		return status.Compute(live)
	}
	if res := staleCondition(live); res != nil {
		return res, nil
	}
	res, err := status.Compute(live)
	if err != nil || res.Status != status.CurrentStatus {
		return res, err
	}
	gvk := live.GroupVersionKind()
	switch {
	case gvk.Group == "batch" && gvk.Kind == "Job":
		return jobHealth(live, res), nil
	case gvk.Group == "" && gvk.Kind == "Pod":
		return podHealth(live, res), nil
	case gvk.Group == "apps" && gvk.Kind == "StatefulSet":
		return onDeleteStatefulSetHealth(live, res), nil
	}
	return res, nil
}

// staleCondition reports an object in progress when one of its conditions
// names, in its own observedGeneration, a generation older than
// metadata.generation; nil otherwise.
//
// NOTE: an observedGeneration of 0 counts as none: metav1.Condition omits
// the field when it is 0, so 0 is what a controller that does not set it
// writes.
func staleCondition(live *unstructured.Unstructured) *status.Result {
	generation := live.GetGeneration()
	if generation == 0 {
		return nil
	}
	conds, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
	for _, c := range conds {
		cond, ok := c.(map[string]any)
		if !ok {
			continue
		}
		observed := intField(cond["observedGeneration"])
		if observed <= 0 || observed >= generation {
			continue
		}
		typ, _ := cond["type"].(string)
		msg := fmt.Sprintf("its condition %s describes generation %d and metadata.generation is %d: its controller has not acted on the latest change yet",
			typ, observed, generation)
		return &status.Result{Status: status.InProgressStatus, Message: msg}
	}
	return nil
}

// jobHealth keeps a Job that kstatus found Current in progress until its
// Complete condition is True.
func jobHealth(live *unstructured.Unstructured, res *status.Result) *status.Result {
	switch {
	case conditionIs(live, "Complete", "True"):
		return res
	case conditionIs(live, "Failed", "True"):
		// NOTE: kstatus finds this first; kept so that the rule stands
		// on its own.
		return &status.Result{Status: status.FailedStatus, Message: "Job failed"}
	}
	return &status.Result{Status: status.InProgressStatus, Message: fmt.Sprintf("Job has not completed: active %d, succeeded %d, failed %d",
		nestedInt(live, "status", "active"), nestedInt(live, "status", "succeeded"), nestedInt(live, "status", "failed"))}
}

// podHealth turns a Pod that kstatus found Current in phase Failed into a
// failure, saying why when the Pod or its first terminated container does.
func podHealth(live *unstructured.Unstructured, res *status.Result) *status.Result {
	if phase, _, _ := unstructured.NestedString(live.Object, "status", "phase"); phase != "Failed" {
		return res
	}
	msg := "Pod is in phase Failed"
	if reason, _, _ := unstructured.NestedString(live.Object, "status", "reason"); reason != "" {
		return &status.Result{Status: status.FailedStatus, Message: msg + " (" + reason + ")"}
	}
	for _, field := range []string{"initContainerStatuses", "containerStatuses"} {
		list, _, _ := unstructured.NestedSlice(live.Object, "status", field)
		for _, c := range list {
			cs, ok := c.(map[string]any)
			if !ok {
				continue
			}
			term, found, _ := unstructured.NestedMap(cs, "state", "terminated")
			if !found || intField(term["exitCode"]) == 0 {
				continue
			}
			name, _ := cs["name"].(string)
			reason, _ := term["reason"].(string)
			return &status.Result{Status: status.FailedStatus,
				Message: fmt.Sprintf("%s: container %s exited with code %d (%s)", msg, name, intField(term["exitCode"]), reason)}
		}
	}
	return &status.Result{Status: status.FailedStatus, Message: msg}
}

// onDeleteStatefulSetHealth keeps a StatefulSet with the OnDelete update
// strategy, which kstatus finds Current at once, in progress until its
// ready replicas reach spec.replicas.
//
// NOTE: updatedReplicas is not compared. With OnDelete, a pod takes a new
// template only when a person deletes it; an upgrade would wait for that
// and fail past spec.healthTimeout. Helm's --wait, kstatus and Argo CD
// do not wait for it either.
func onDeleteStatefulSetHealth(live *unstructured.Unstructured, res *status.Result) *status.Result {
	if strategy, _, _ := unstructured.NestedString(live.Object, "spec", "updateStrategy", "type"); strategy != "OnDelete" {
		return res
	}
	want := int64(1)
	if _, found, _ := unstructured.NestedFieldNoCopy(live.Object, "spec", "replicas"); found {
		want = nestedInt(live, "spec", "replicas")
	}
	if ready := nestedInt(live, "status", "readyReplicas"); ready < want {
		return &status.Result{Status: status.InProgressStatus, Message: fmt.Sprintf("Ready: %d/%d", ready, want)}
	}
	return res
}

// conditionIs reports whether live has a status condition of type typ with
// status want.
func conditionIs(live *unstructured.Unstructured, typ, want string) bool {
	conds, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
	for _, c := range conds {
		if cond, ok := c.(map[string]any); ok && cond["type"] == typ && cond["status"] == want {
			return true
		}
	}
	return false
}

// nestedInt reads a whole number at fields of live; 0 when it is not one.
func nestedInt(live *unstructured.Unstructured, fields ...string) int64 {
	v, _, _ := unstructured.NestedFieldNoCopy(live.Object, fields...)
	return intField(v)
}

// intField reads a whole number of an unstructured object: int64 from the
// API server, float64 from JSON decoded by hand; 0 otherwise.
func intField(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case int:
		return int64(n)
	case int32:
		return int64(n)
	case float64:
		return int64(n)
	}
	return 0
}
