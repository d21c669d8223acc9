package controller_test

import (
	"strings"
	"testing"
	"time"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestTooManyObjects installs a chart that renders 10,000 ConfigMaps, past
// the default limit of 5,000 per add-on: it fails with a message that says
// what to fix, before anything is applied, counted before the chart's
// output is decoded, and remembered as a render stopped at a bound.
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
		return strings.Contains(readyMessage(cur), "--max-objects-per-addon")
	})
	t.Logf("refused %s after the Addon was created: %s", time.Since(began).Round(100*time.Millisecond), readyMessage(got))
	if msg := readyMessage(got); !strings.Contains(msg, "renders more than 5000 objects") || !strings.Contains(msg, "no sooner than") {
		t.Errorf("the message does not say the limit, what to change and when it is tried again: %q", msg)
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

// TestRenderStoppedAtABoundIsNotRepeated: a render that the sandbox stopped
// at its time bound is not run again with the same inputs. A reconcile
// after a pause and resume fails at once with the same message, which says
// when the render is tried again, and no worker runs it; a refresh renders
// it again, and the pause doubles; new values render at once and sync.
func TestRenderStoppedAtABoundIsNotRepeated(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "spin-again", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml": `{{- if .Values.spin }}{{ range 1000000000000 }}{{ range 1000000000000 }}{{ end }}{{ end }}{{ end }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: spin-again
data:
  v: {{ .Values.v | quote }}
`}})
	sandbox := reconciler.Config.Sandbox
	before := sandbox.Stats().TimeBound
	a := create(t, newAddon(ns, "spin-again", url, withValues(`{"v": "one", "spin": true}`)))
	first := waitFor(t, a, 2*time.Minute, "the time bound to stop the render", func(cur *capstanv1.Addon) bool {
		return strings.Contains(readyMessage(cur), "took longer than")
	})
	msg := readyMessage(first)
	if !strings.Contains(msg, "no sooner than") || !strings.Contains(msg, capstanv1.RefreshAnnotation) {
		t.Errorf("the message does not say when the render is tried again and how to have it now: %q", msg)
	}
	stopped := sandbox.Stats().TimeBound
	if stopped != before+1 {
		t.Fatalf("the sandbox stopped %d renders at its time bound; want 1", stopped-before)
	}

	// The same inputs, looked at again: paused, then resumed.
	update(t, a, func(cur *capstanv1.Addon) {
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[capstanv1.PausedAnnotation] = "true"
	})
	waitPhase(t, a, capstanv1.PhasePaused)
	update(t, a, func(cur *capstanv1.Addon) { delete(cur.Annotations, capstanv1.PausedAnnotation) })
	began := time.Now()
	again := waitFor(t, a, time.Minute, "the remembered stop", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseFailed
	})
	t.Logf("failed again %s after the resume: %s", time.Since(began).Round(100*time.Millisecond), readyMessage(again))
	if got := readyMessage(again); got != msg {
		t.Errorf("the repeat's message changed:\n%s\nwant\n%s", got, msg)
	}
	if n := sandbox.Stats().TimeBound; n != stopped {
		t.Errorf("the same inputs ran in the sandbox again: %d more renders stopped at the time bound", n-stopped)
	}

	// A refresh is a person asking: the render runs, stops again, and the
	// pause doubles.
	update(t, a, func(cur *capstanv1.Addon) {
		cur.Annotations = map[string]string{capstanv1.RefreshAnnotation: "try-again"}
	})
	waitFor(t, a, 2*time.Minute, "the refreshed render to stop again", func(cur *capstanv1.Addon) bool {
		return cur.Status.LastHandledRefresh == "try-again" && strings.Contains(readyMessage(cur), "2 times in a row")
	})
	if n := sandbox.Stats().TimeBound; n != stopped+1 {
		t.Errorf("the refresh stopped %d renders at the time bound; want 1", n-stopped)
	}

	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues(`{"v": "two"}`) })
	synced(t, a)
	if cm := live(t, "v1", "ConfigMap", ns, "spin-again"); cm == nil || cm.Object["data"].(map[string]any)["v"] != "two" {
		t.Errorf("the ConfigMap after the fix = %v, want v: two", cm)
	}
}
