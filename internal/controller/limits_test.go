package controller_test

import (
	"strings"
	"testing"
	"time"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestTooManyObjects installs a chart that renders 10,000 ConfigMaps, past
// the default limit of 5,000 per add-on: it fails with a message that says
// what to fix, before anything is applied.
func TestTooManyObjects(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "many", version: "1.0.0", files: map[string]string{
		"templates/many.yaml": `{{- range $i := until 10000 }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: many-{{ $i }}
{{- end }}
`}})
	began := time.Now()
	a := create(t, newAddon(ns, "many", url))
	got := waitFor(t, a, 2*time.Minute, "the limit to stop it", func(cur *capstanv1.Addon) bool {
		return strings.Contains(readyMessage(cur), "more than the limit")
	})
	t.Logf("refused %s after the Addon was created: %s", time.Since(began).Round(100*time.Millisecond), readyMessage(got))
	if msg := readyMessage(got); !strings.Contains(msg, "renders 10000 objects") || !strings.Contains(msg, "--max-objects-per-addon") {
		t.Errorf("the message does not say how many and what to change: %q", msg)
	}
	if live(t, "v1", "ConfigMap", ns, "many-0") != nil {
		t.Error("an object was applied")
	}
}

// TestRenderThatNeverEnds upgrades an add-on to values that make its chart
// loop for ever. The render is stopped at the sandbox's time bound, the
// Addon says so and what to check, the running ConfigMap stays as it was,
// and correct values then sync as before.
func TestRenderThatNeverEnds(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "spin", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml": `{{- if .Values.spin }}{{ range 1000000000000 }}{{ range 1000000000000 }}{{ end }}{{ end }}{{ end }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: spin
data:
  v: {{ .Values.v | quote }}
`}})
	a := create(t, newAddon(ns, "spin", url, withValues(`{"v": "one"}`)))
	synced(t, a)

	a = update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`{"v": "two", "spin": true}`) })
	began := time.Now()
	got := waitFor(t, a, 2*time.Minute, "the time bound to stop the render", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == cur.Generation && strings.Contains(readyMessage(cur), "took longer than")
	})
	t.Logf("stopped %s after the update: %s", time.Since(began).Round(100*time.Millisecond), readyMessage(got))
	if msg := readyMessage(got); !strings.Contains(msg, "--render-timeout") || !strings.Contains(msg, "loops") {
		t.Errorf("the message does not say what to check: %q", msg)
	}
	if cm := live(t, "v1", "ConfigMap", ns, "spin"); cm == nil || cm.Object["data"].(map[string]any)["v"] != "one" {
		t.Errorf("the running ConfigMap changed: %v", cm)
	}

	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`{"v": "three"}`) })
	synced(t, a)
	if cm := live(t, "v1", "ConfigMap", ns, "spin"); cm == nil || cm.Object["data"].(map[string]any)["v"] != "three" {
		t.Errorf("the ConfigMap after the fix = %v, want v: three", cm)
	}
}
