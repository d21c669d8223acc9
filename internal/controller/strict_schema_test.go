package controller_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestStrictSchemaChartInstalls installs a chart whose values.schema.json
// allows nothing but its own properties, as cert-manager's does. It must
// install as helm install would, without the platform key, and say why.
func TestStrictSchemaChartInstalls(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "strict", version: "1.0.0", files: map[string]string{
		"values.yaml":        "crds:\n  enabled: false\nmessage: hello\n",
		"values.schema.json": `{"type":"object","additionalProperties":false,"properties":{"crds":{"type":"object","additionalProperties":false,"properties":{"enabled":{"type":"boolean"}}},"message":{"type":"string"}}}`,
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  message: {{ .Values.message | quote }}
  crds: {{ .Values.crds.enabled | quote }}
  platform: {{ hasKey .Values "capstan" | quote }}
`,
	}})
	a := create(t, newAddon(controllerNS, "strict-"+ns, url, withTarget(ns), withValues(`{crds: {enabled: true}}`)))
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	cm := live(t, "v1", "ConfigMap", ns, a.Name+"-settings")
	if cm == nil {
		t.Fatal("the ConfigMap was not applied")
	}
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	if data["crds"] != "true" || data["message"] != "hello" || data["platform"] != "false" {
		t.Errorf("the ConfigMap says %v; want the user's value, the chart's default, and no platform key", data)
	}
	found := false
	for _, n := range got.Status.Plan.Notices {
		found = found || (n.Path == "/capstan" && strings.Contains(n.Message, "withheld"))
	}
	if !found {
		t.Errorf("the plan's notices %+v do not say that the platform's facts were withheld", got.Status.Plan.Notices)
	}
}
