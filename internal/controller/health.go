package controller

import (
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// healthKinds are the kinds whose readiness decides an add-on's: what runs.
var healthKinds = map[string]bool{"Deployment": true, "StatefulSet": true, "DaemonSet": true}

// workloadReady computes a workload's health with kstatus from its live
// object, nil when it does not exist.
func workloadReady(obj, live *unstructured.Unstructured) (bool, string, error) {
	ref := capstanv1.RefOf(obj)
	if live == nil {
		return false, ref.Describe() + " does not exist yet", nil
	}
	res, err := status.Compute(live)
	if err != nil {
		return false, "", err
	}
	switch res.Status {
	case status.CurrentStatus:
		return true, "", nil
	case status.FailedStatus:
		return false, fmt.Sprintf("%s failed: %s", ref.Describe(), res.Message), nil
	}
	return false, fmt.Sprintf("waiting for %s: %s", ref.Describe(), res.Message), nil
}
