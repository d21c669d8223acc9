package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/plan"
)

// healthKinds are the kinds whose readiness decides an add-on's: what runs.
var healthKinds = map[string]bool{"Deployment": true, "StatefulSet": true, "DaemonSet": true, "Job": false}

// workloadReady computes a workload's health with kstatus, from live when
// it was read just now, else from a fresh read. Other kinds are ready once
// they exist.
func workloadReady(ctx context.Context, a *apply.Applier, obj, live *unstructured.Unstructured) (bool, string, error) {
	if !healthKinds[obj.GetKind()] {
		return true, "", nil
	}
	ref := plan.Ref(obj)
	if live == nil {
		var err error
		if live, err = a.Get(ctx, ref); err != nil {
			return false, "", err
		}
	}
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

// manifestDigest identifies an object's manifest, for plan hashes.
func manifestDigest(obj *unstructured.Unstructured) string {
	b, _ := json.Marshal(obj.Object)
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
