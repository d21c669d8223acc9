package controller

import (
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"capstan.dev/capstan/internal/plan"
)

// healthKinds are the kinds whose readiness decides an add-on's: what runs.
var healthKinds = map[string]bool{"Deployment": true, "StatefulSet": true, "DaemonSet": true}

// workloadReady computes a workload's health with kstatus from its live
// object, nil when it does not exist.
func workloadReady(obj, live *unstructured.Unstructured) (bool, string, error) {
	ref := plan.Ref(obj)
	if live == nil {
		return false, fmt.Sprintf("%s %s/%s does not exist yet", ref.Kind, ref.Namespace, ref.Name), nil
	}
	res, err := status.Compute(live)
	if err != nil {
		return false, "", err
	}
	switch res.Status {
	case status.CurrentStatus:
		return true, "", nil
	case status.FailedStatus:
		return false, fmt.Sprintf("%s %s/%s failed: %s", ref.Kind, ref.Namespace, ref.Name, res.Message), nil
	}
	return false, fmt.Sprintf("waiting for %s %s/%s: %s", ref.Kind, ref.Namespace, ref.Name, res.Message), nil
}
