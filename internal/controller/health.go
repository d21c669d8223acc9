package controller

import (
	"fmt"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/health"
)

// An add-on is Ready when every object it applied is Current by kstatus:
// Deployments, StatefulSets and DaemonSets rolled out, Jobs complete,
// claims bound, LoadBalancer Services with an address, CRDs established,
// custom resources whose conditions say Ready, and every kind without a
// status as soon as it exists. It is the same judgement as helm install
// --wait and Flux's health checks make.

// maxNotCurrent is how many objects that are not Current the status names.
const maxNotCurrent = 5

// objectHealth computes an object's health with kstatus from its live
// object, nil when it does not exist: Current, or why not.
//
// A kind that spec.healthChecks names is judged by its check alone.
func objectHealth(obj, live *unstructured.Unstructured, checks *health.Checks) (current bool, why string, err error) {
	ref := capstanv1.RefOf(obj)
	if live == nil {
		return false, ref.Describe() + ": does not exist yet", nil
	}
	if checks.Judges(live) {
		switch st, msg := checks.Evaluate(live); st {
		case health.Current:
			return true, "", nil
		case health.Failed:
			return false, fmt.Sprintf("%s: failed: %s", ref.Describe(), msg), nil
		default:
			return false, fmt.Sprintf("%s: %s", ref.Describe(), msg), nil
		}
	}
	res, err := status.Compute(live)
	if err != nil {
		return false, "", fmt.Errorf("computing the health of %s: %w", ref.Describe(), err)
	}
	switch res.Status {
	case status.CurrentStatus:
		return true, "", nil
	case status.FailedStatus:
		return false, fmt.Sprintf("%s: failed: %s", ref.Describe(), res.Message), nil
	}
	msg := res.Message
	if msg == "" {
		msg = string(res.Status)
	}
	return false, fmt.Sprintf("%s: %s", ref.Describe(), msg), nil
}

// notCurrentList is a short list of the objects that are not Current.
func notCurrentList(why []string) string {
	if len(why) <= maxNotCurrent {
		return strings.Join(why, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(why[:maxNotCurrent], "; "), len(why)-maxNotCurrent)
}
