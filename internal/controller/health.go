package controller

import (
	"fmt"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/health"
)

// An add-on is Ready when every object it applied is Current by kstatus:
// Deployments, StatefulSets and DaemonSets rolled out, claims bound,
// LoadBalancer Services with a cluster IP, CRDs established, custom
// resources whose conditions say Ready, and every kind without a status as
// soon as it exists. It is the same judgement as helm install --wait and
// Flux's health checks make, with Capstan's own rules where kstatus is too
// quick (health_rules.go): Jobs complete, failed Pods failed, OnDelete
// StatefulSets ready, APIServices Available, and conditions of the latest
// generation; and where it would wait for ever: OnDelete DaemonSets ready
// with pods of the old template.

// maxNotCurrent is how many objects that are not Current the status names,
// and maxReason how long each one's reason may be: a reason quotes the
// object's own condition message, which its controller may make as long
// as the API server takes (32 KiB), and five of them would make the
// Healthy condition's message longer than that.
const (
	maxNotCurrent = 5
	maxReason     = 1 << 10
)

// objectHealth computes an object's health with kstatus and Capstan's
// rules (computeHealth) from its live object, nil when it does not exist:
// Current, or why not, and whether it failed (kstatus's Failed, a rule's,
// or a check's failed expression).
//
// A kind that spec.healthChecks names is judged by its check alone.
func objectHealth(obj, live *unstructured.Unstructured, checks *health.Checks) (current, failed bool, why string, err error) {
	ref := capstanv1.RefOf(obj)
	if live == nil {
		return false, false, ref.Describe() + ": does not exist yet", nil
	}
	if checks.Judges(live) {
		switch st, msg := checks.Evaluate(live); st {
		case health.Current:
			return true, false, "", nil
		case health.Failed:
			return false, true, fmt.Sprintf("%s: failed: %s", ref.Describe(), msg), nil
		default:
			return false, false, fmt.Sprintf("%s: %s", ref.Describe(), msg), nil
		}
	}
	res, err := computeHealth(live)
	if err != nil {
		return false, false, "", fmt.Errorf("computing the health of %s: %w", ref.Describe(), err)
	}
	switch res.Status {
	case status.CurrentStatus:
		return true, false, "", nil
	case status.FailedStatus:
		return false, true, fmt.Sprintf("%s: failed: %s", ref.Describe(), res.Message), nil
	}
	msg := res.Message
	if msg == "" {
		msg = string(res.Status)
	}
	return false, false, fmt.Sprintf("%s: %s", ref.Describe(), msg), nil
}

// judgement is one look at the health of an add-on's objects, for the
// Healthy condition and the phase.
type judgement struct {
	// nothing: nothing the add-on runs was there to judge (nothing is
	// applied yet).
	nothing bool
	// notCurrent says why each object that is not Current is not, and
	// kinds are their kinds; failed is true when one of them failed, and
	// failures says why each that failed did.
	notCurrent []string
	kinds      []schema.GroupVersionKind
	failed     bool
	failures   []string
}

// The reasons of the Healthy condition.
const (
	reasonHealthCurrent    = "Current"
	reasonHealthNotCurrent = "NotCurrent"
	reasonHealthFailed     = "Failed"
	reasonHealthNothing    = "NothingApplied"
)

// condition is the Healthy condition a judgement gives.
func (j *judgement) condition(generation int64) metav1.Condition {
	c := metav1.Condition{Type: capstanv1.ConditionHealthy, ObservedGeneration: generation}
	switch {
	case j.nothing:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, reasonHealthNothing, "Nothing is applied yet."
	case len(j.notCurrent) == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, reasonHealthCurrent, "Every object the add-on runs is Current."
	case j.failed:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, reasonHealthFailed, notCurrentList(j.notCurrent)
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, reasonHealthNotCurrent, notCurrentList(j.notCurrent)
	}
	return c
}

// notCurrentList is a short list of the objects that are not Current,
// each reason cut to maxReason.
func notCurrentList(why []string) string {
	n := min(len(why), maxNotCurrent)
	cut := make([]string, n)
	for i, w := range why[:n] {
		cut[i] = truncate(w, maxReason)
	}
	if len(why) <= maxNotCurrent {
		return strings.Join(cut, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(cut, "; "), len(why)-maxNotCurrent)
}
