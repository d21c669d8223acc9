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
