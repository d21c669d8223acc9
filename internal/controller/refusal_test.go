package controller_test

import (
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestRefusalAtApplyStalls installs a CRD and a resource of it that the
// CRD's schema refuses. The plan cannot dry-run the resource before its
// CRD exists, so the refusal comes only when the install checks it; the
// retry, with the CRD created, dry-runs it and meets the same refusal in
// its plan: the add-on is Stalled, naming the resource, rather than
// retried every minute for ever.
func TestRefusalAtApplyStalls(t *testing.T) {
	ns := newNamespace(t)
	suffix := strings.ReplaceAll(ns[len(ns)-5:], "-", "")
	kind, plural := "Widget"+suffix, "widgets"+suffix
	crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ` + plural + `.example.com
spec:
  group: example.com
  names: {kind: ` + kind + `, plural: ` + plural + `}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {type: integer, maximum: 5}
`
	url, _ := charts.publish(t, chart{name: "refused", version: "1.0.0", files: map[string]string{
		"crds/widgets.yaml":     crd,
		"templates/widget.yaml": "apiVersion: example.com/v1\nkind: " + kind + "\nmetadata:\n  name: too-big\nspec:\n  size: 99\n",
	}})
	a := create(t, newAddon(controllerNS, "refused-"+ns, url, withTarget(ns)))
	got := waitFor(t, a, 90*time.Second, "Stalled", func(cur *capstanv1.Addon) bool {
		return apimeta.IsStatusConditionTrue(cur.Status.Conditions, "Stalled")
	})
	c := apimeta.FindStatusCondition(got.Status.Conditions, "Stalled")
	if !strings.Contains(c.Message, "too-big") || !strings.Contains(c.Message, kind) {
		t.Errorf("Stalled says %q; want the refused %s too-big named", c.Message, kind)
	}
	if got.Status.Phase != capstanv1.PhaseFailed {
		t.Errorf("phase %s; want Failed: %s", got.Status.Phase, describeStatus(got))
	}
}
