package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// gadgetsCRD is a CRD of group safety.example.com with the given versions,
// each "name:storage:sizeType", or "name:storage:sizeType:celRule" with a
// CEL rule on spec.
func gadgetsCRD(group string, versions ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.%s
spec:
  group: %s
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
  versions:
`, group, group)
	for _, v := range versions {
		parts := strings.Split(v, ":")
		fmt.Fprintf(&b, `    - name: %s
      served: true
      storage: %s
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {type: %s}
`, parts[0], parts[1], parts[2])
		if len(parts) > 3 {
			fmt.Fprintf(&b, "              x-kubernetes-validations: [{rule: %q}]\n", parts[3])
		}
	}
	return b.String()
}

// TestUnsafeCRDUpgradesAreRefused upgrades a chart's CRD three ways that
// break stored objects, each a violation in the plan with nothing applied:
// a schema that an existing object no longer meets, a dropped stored
// version, and a storage version changed with no conversion. With
// spec.allowUnsafeCRDChanges the schema change is applied.
func TestUnsafeCRDUpgradesAreRefused(t *testing.T) {
	ns := newNamespace(t)
	group := "safety" + strings.ReplaceAll(ns[len(ns)-5:], "-", "") + ".example.com"
	publish := func(version string, crd string) string {
		url, _ := charts.publish(t, chart{name: "gadgets", version: version, files: map[string]string{"crds/gadgets.yaml": crd}})
		return url
	}
	a := create(t, newAddon(controllerNS, "gadgets-"+ns, publish("1.0.0", gadgetsCRD(group, "v1:true:integer")), withTarget(ns)))
	waitPhase(t, a, capstanv1.PhaseSynced)
	gadget := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Gadget",
		"metadata": map[string]any{"namespace": ns, "name": "g1"}, "spec": map[string]any{"size": int64(3)}}}
	eventually(t, 30*time.Second, "the Gadget to be created", func() bool { return admin.Create(context.Background(), gadget) == nil })

	for _, tc := range []struct {
		name, crd string
		rules     []string
	}{
		{"a schema the stored Gadget breaks", gadgetsCRD(group, "v1:true:string"), []string{"crd-schema-invalidates-objects"}},
		// Only the API server runs CEL rules: the shadow CRD's dry run finds it.
		{"a CEL rule the stored Gadget breaks", gadgetsCRD(group, "v1:true:integer:self.size < 2"), []string{"crd-schema-invalidates-objects"}},
		{"a dropped stored version", gadgetsCRD(group, "v2:true:integer"), []string{"crd-stored-version-dropped", "crd-storage-version-changed"}},
	} {
		url := publish("2.0.0-"+strings.ReplaceAll(tc.name, " ", ""), tc.crd)
		update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url })
		got := waitPhase(t, a, capstanv1.PhaseBlocked)
		for _, rule := range tc.rules {
			if !violationRule(rule)(got) {
				t.Errorf("%s: no %s violation: %s", tc.name, rule, describeStatus(got))
			}
		}
		if tc.rules[0] == "crd-schema-invalidates-objects" {
			msg := ""
			for _, v := range got.Status.Plan.Violations {
				msg += v.Message
			}
			if !strings.Contains(msg, "1 of 1") || !strings.Contains(msg, ns+"/g1") {
				t.Errorf("the violation %q does not count and name the object", msg)
			}
			if !hasNoticeSaying(got.Status.Plan, "by the API server") {
				t.Errorf("%s: the plan does not say the API server judged the objects: %+v", tc.name, got.Status.Plan.Notices)
			}
		}
	}
	// Allowed: the schema change is applied, and the stored Gadget stays.
	url := publish("3.0.0", gadgetsCRD(group, "v1:true:string"))
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL, cur.Spec.AllowUnsafeCRDChanges = url, true })
	waitPhase(t, a, capstanv1.PhaseSynced)
	crd := live(t, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "gadgets."+group)
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	size, _, _ := unstructured.NestedString(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties", "size", "type")
	if size != "string" {
		t.Errorf("the allowed change was not applied: size is %q", size)
	}
	if live(t, group+"/v1", "Gadget", ns, "g1") == nil {
		t.Error("the stored Gadget is gone")
	}
	// No shadow CRD is left behind.
	shadows := &unstructured.UnstructuredList{}
	shadows.SetAPIVersion("apiextensions.k8s.io/v1")
	shadows.SetKind("CustomResourceDefinitionList")
	eventually(t, 30*time.Second, "the shadow CRDs to be deleted", func() bool {
		return admin.List(context.Background(), shadows, client.MatchingLabels{"capstan.dev/crd-check": "true"}) == nil && len(shadows.Items) == 0
	})
}

func hasNoticeSaying(p *capstanv1.Plan, says string) bool {
	for _, n := range p.Notices {
		if strings.Contains(n.Message, says) {
			return true
		}
	}
	return false
}
