package controller

import (
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// computeHealth is kstatus's judgement of a live object, with Capstan's own
// rules where kstatus calls Current what the health page promises is not:
//
//   - a condition the judgement reads (decidingCondition) that says which
//     generation it describes (conditions[].observedGeneration), and names
//     one older than metadata.generation, describes the spec before the
//     latest change: the object is in progress, whatever the condition
//     says. kstatus compares only status.observedGeneration, and reads no
//     condition's own; a cert-manager Certificate updated to generation 2
//     whose Ready is still generation 1's would be Current at once.
//   - a Job is Current only once its Complete condition is True. kstatus
//     calls a Job Current as soon as it has started ("Job in progress"), so
//     a migration Job in an earlier wave would let the next wave go as soon
//     as its pod was created.
//   - a Pod in phase Failed has failed. kstatus calls it Current ("Pod has
//     completed, but not successfully").
//   - a StatefulSet with the OnDelete update strategy is Current once its
//     ready replicas reach spec.replicas. kstatus calls it Current at once,
//     with no pod ready.
//   - a DaemonSet with the OnDelete update strategy is Current once its
//     controller has seen the latest generation and its ready pods reach
//     status.desiredNumberScheduled. kstatus waits for
//     updatedNumberScheduled too, which after an upgrade only a person
//     deleting each pod moves: it would never be Current.
//   - a paused Deployment (spec.paused) is Current once its controller has
//     seen its latest generation and its Available condition is not False:
//     its controller rolls out nothing until a person resumes it, so
//     waiting on the rollout would hold the add-on, its later waves and
//     its dependents until the health timeout, or for ever without one. kstatus calls it in progress
//     after a change to its template; Helm's --wait counts it ready and
//     Argo CD calls it Suspended. The message says it is paused.
//   - a Job whose Suspended condition is True is in progress with a
//     message that says so: kstatus says only "Job not started". One the
//     chart creates suspended is Current (objectHealth).
//   - an APIService is Current once its Available condition is True.
//     kstatus reads no Available, and calls it Current at once, while the
//     API server cannot reach the service behind it.
//
// Argo CD judges Jobs, failed Pods, OnDelete StatefulSets and APIServices
// the same way; Helm's --wait does not wait on an OnDelete DaemonSet's
// updated pods either.
// An object being deleted is left to kstatus (Terminating).
func computeHealth(live *unstructured.Unstructured) (*status.Result, error) {
	if live.GetDeletionTimestamp() != nil {
		return status.Compute(live)
	}
	if res := staleCondition(live); res != nil {
		return res, nil
	}
	gvk := live.GroupVersionKind()
	if res := onDeleteDaemonSetHealth(live); res != nil {
		return res, nil
	}
	if res := pausedDeploymentHealth(live); res != nil {
		return res, nil
	}
	if gvk.Group == "batch" && gvk.Kind == "Job" && conditionIs(live, "Suspended", "True") {
		return &status.Result{Status: status.InProgressStatus, Message: "Job is suspended (its Suspended condition is True): it runs once spec.suspend is false"}, nil
	}
	res, err := status.Compute(live)
	if err != nil || res.Status != status.CurrentStatus {
		return res, err
	}
	switch {
	case gvk.Group == "batch" && gvk.Kind == "Job":
		return jobHealth(live, res), nil
	case gvk.Group == "" && gvk.Kind == "Pod":
		return podHealth(live, res), nil
	case gvk.Group == "apps" && gvk.Kind == "StatefulSet":
		return onDeleteStatefulSetHealth(live, res), nil
	case gvk.Group == "apiregistration.k8s.io" && gvk.Kind == "APIService":
		return apiServiceHealth(live, res), nil
	}
	return res, nil
}

// statusBlind are the kinds whose health no status of their own changes,
// so that a status write of one cannot make a settled add-on less than
// healthy: kstatus reads a Service's spec alone (a LoadBalancer's address
// is not waited for), calls a PodDisruptionBudget, a CronJob and an
// Ingress Current whatever their status says, and reads of a
// HorizontalPodAutoscaler only status.observedGeneration, which only a
// new generation (drift, or a sync) leaves behind. Their controllers write
// status often (an autoscaler whenever its metrics move, a disruption
// budget whenever a pod comes or goes, a CronJob at each run), and a look
// at the add-on for each would render it again every settledLookEvery for
// as long as it runs. A kind that spec.healthChecks judges is not blind
// (statusMayChangeHealth).
var statusBlind = map[schema.GroupKind]bool{
	{Kind: "Service"}: true,
	{Group: "policy", Kind: "PodDisruptionBudget"}:          true,
	{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}: true,
	{Group: "batch", Kind: "CronJob"}:                       true,
	{Group: "networking.k8s.io", Kind: "Ingress"}:           true,
}

// staleCondition reports an object in progress when one of the conditions
// its judgement reads (decidingCondition) names, in its own
// observedGeneration, a generation older than metadata.generation; nil
// otherwise.
//
// NOTE: an observedGeneration of 0 counts as none: metav1.Condition omits
// the field when it is 0, so 0 is what a controller that does not set it
// writes.
func staleCondition(live *unstructured.Unstructured) *status.Result {
	generation := live.GetGeneration()
	if generation == 0 {
		return nil
	}
	gvk := live.GroupVersionKind()
	conds, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
	for _, c := range conds {
		cond, ok := c.(map[string]any)
		if !ok {
			continue
		}
		typ, _ := cond["type"].(string)
		if !decidingCondition(gvk, typ) {
			continue
		}
		observed := intField(cond["observedGeneration"])
		if observed <= 0 || observed >= generation {
			continue
		}
		msg := fmt.Sprintf("its condition %s describes generation %d and metadata.generation is %d: its controller has not acted on the latest change yet",
			typ, observed, generation)
		return &status.Result{Status: status.InProgressStatus, Message: msg}
	}
	return nil
}

// decidingCondition reports whether the judgement of a gvk object reads
// its condition of type typ: kstatus's Ready, Reconciling and Stalled, of
// any kind, and an APIService's Available (apiServiceHealth).
//
// NOTE: only these are held to the latest generation. An operator writes
// some conditions only on some events (a one-time Initialized, an Issuing
// of the last renewal), and they keep an old observedGeneration through
// every later change: held to it, the object would never be Current, and
// the waves after it would stop at spec.healthTimeout. Job's and
// Deployment's conditions, which the other rules read, have no
// observedGeneration field.
func decidingCondition(gvk schema.GroupVersionKind, typ string) bool {
	switch typ {
	case "Ready", "Reconciling", "Stalled":
		return true
	case "Available":
		return gvk.Group == "apiregistration.k8s.io" && gvk.Kind == "APIService"
	}
	return false
}

// pausedDeploymentHealth reports a paused Deployment (spec.paused) Current,
// saying it is paused, once its controller has seen its latest generation
// and its Available condition is not False: the pods it runs serve, and
// only the rollout waits for a person. A paused Deployment with pods that
// are not available is left to kstatus, so that a crash loop is not
// called healthy; one created paused, with no pod at all, is Current.
// nil for any other object.
func pausedDeploymentHealth(live *unstructured.Unstructured) *status.Result {
	gvk := live.GroupVersionKind()
	if gvk.Group != "apps" || gvk.Kind != "Deployment" {
		return nil
	}
	if paused, _, _ := unstructured.NestedBool(live.Object, "spec", "paused"); !paused {
		return nil
	}
	if nestedInt(live, "status", "observedGeneration") < live.GetGeneration() {
		return nil
	}
	// NOTE: a Deployment created paused has no ReplicaSet and no pod, and
	// says Available False: only a resume rolls it out, so it is not a
	// crash loop to report.
	if conditionIs(live, "Available", "False") && nestedInt(live, "status", "replicas") > 0 {
		return nil
	}
	return &status.Result{Status: status.CurrentStatus, Message: "Deployment is paused: nothing rolls out until it is resumed (kubectl rollout resume)"}
}

// createdSuspended reports whether live is a Job that the chart creates
// suspended (spec.suspend: true in obj, the rendered manifest) and that
// its controller holds so (its Suspended condition True). Such a Job is
// meant to run when a person, or a controller of theirs, resumes it (a
// restore, a re-index), as a paused Deployment rolls out when resumed;
// waiting for it would hold the add-on, its later waves and its
// dependents until spec.healthTimeout, or for ever without one. Argo CD
// calls it Suspended. A Job the chart does not create suspended, which
// another controller suspends (Kueue, until it admits the Job), or one
// whose manifest hands it to a queue (queued), is in progress
// (computeHealth).
func createdSuspended(obj, live *unstructured.Unstructured) bool {
	gvk := live.GroupVersionKind()
	if gvk.Group != "batch" || gvk.Kind != "Job" || live.GetDeletionTimestamp() != nil {
		return false
	}
	suspend, _, _ := unstructured.NestedBool(obj.Object, "spec", "suspend")
	return suspend && !queued(obj) && conditionIs(live, "Suspended", "True")
}

// queueLabel names the Kueue queue a Job waits in, as a label or, in
// older Kueue, an annotation.
const queueLabel = "kueue.x-k8s.io/queue-name"

// queued reports whether the manifest obj hands its Job to a queue, to
// resume when it admits it: it names a Kueue queue, or sets
// spec.managedBy. Kueue's own examples create such a Job suspended, and
// it is in progress until it runs, not waiting for a person.
func queued(obj *unstructured.Unstructured) bool {
	managedBy, _, _ := unstructured.NestedString(obj.Object, "spec", "managedBy")
	return obj.GetLabels()[queueLabel] != "" || obj.GetAnnotations()[queueLabel] != "" || managedBy != ""
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

// onDeleteDaemonSetHealth judges a DaemonSet with the OnDelete update
// strategy: in progress until its controller has seen metadata.generation
// and its ready pods reach status.desiredNumberScheduled, Current then;
// nil for any other object, which kstatus judges.
//
// NOTE: updatedNumberScheduled is not compared, as for an OnDelete
// StatefulSet: a pod takes the new template only when a person deletes
// it.
func onDeleteDaemonSetHealth(live *unstructured.Unstructured) *status.Result {
	gvk := live.GroupVersionKind()
	if gvk.Group != "apps" || gvk.Kind != "DaemonSet" {
		return nil
	}
	if strategy, _, _ := unstructured.NestedString(live.Object, "spec", "updateStrategy", "type"); strategy != "OnDelete" {
		return nil
	}
	if observed, generation := nestedInt(live, "status", "observedGeneration"), live.GetGeneration(); observed < generation {
		return &status.Result{Status: status.InProgressStatus,
			Message: fmt.Sprintf("DaemonSet generation is %d, but latest observed generation is %d", generation, observed)}
	}
	desired, ready := nestedInt(live, "status", "desiredNumberScheduled"), nestedInt(live, "status", "numberReady")
	if ready < desired {
		return &status.Result{Status: status.InProgressStatus, Message: fmt.Sprintf("Ready: %d/%d", ready, desired)}
	}
	return &status.Result{Status: status.CurrentStatus, Message: fmt.Sprintf("All replicas scheduled as expected. Replicas: %d", desired)}
}

// apiServiceHealth keeps an APIService, which kstatus finds Current at
// once, in progress until its Available condition is True, with the
// condition's message when it says why not.
func apiServiceHealth(live *unstructured.Unstructured, res *status.Result) *status.Result {
	if conditionIs(live, "Available", "True") {
		return res
	}
	msg := "APIService is not Available yet"
	conds, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
	for _, c := range conds {
		if cond, ok := c.(map[string]any); ok && cond["type"] == "Available" && cond["status"] == "False" {
			reason, _ := cond["reason"].(string)
			message, _ := cond["message"].(string)
			msg = fmt.Sprintf("APIService is not Available (%s): %s", reason, message)
		}
	}
	return &status.Result{Status: status.InProgressStatus, Message: msg}
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
