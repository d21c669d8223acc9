package controller_test

import (
	"fmt"
	"testing"
	"time"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestInstallIntoNewNamespaceDryRunsFirst installs a chart whose objects
// go into a namespace the sync creates, so the plan could not dry-run them,
// and one of which the API server refuses. Once the namespace exists, every
// such object is dry-run before any is applied: the add-on fails with the
// API server's reason, and nothing but the namespace is created.
func TestInstallIntoNewNamespaceDryRunsFirst(t *testing.T) {
	ns := fmt.Sprintf("verify-%d", time.Now().UnixNano()%100000)
	url, _ := charts.publish(t, chart{name: "refused", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: first\ndata:\n  k: v\n",
		"templates/svc.yaml": `apiVersion: v1
kind: Service
metadata:
  name: refused
spec:
  selector: {app: x}
  ports:
    - port: 99999
`,
	}})
	a := create(t, newAddon(controllerNS, ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) { s.CreateNamespace = true })))
	// NOTE: the first sync says "nothing but CRDs and Namespaces was
	// applied"; the next finds the namespace and refuses in its plan.
	failedWith(t, a, "refused Service "+ns+"/refused in a dry run", "99999")
	if live(t, "v1", "Namespace", "", ns) == nil {
		t.Error("the namespace of spec.createNamespace was not created")
	}
	if live(t, "v1", "ConfigMap", ns, "first") != nil {
		t.Error("the ConfigMap was applied though another object of the install was refused")
	}
}
