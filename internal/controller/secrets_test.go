package controller_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestSecretInputsNeverShown puts a write-only input in a Secret and looks
// for it, plain and base64, in the Addon's status, in the events, and in
// the controller's log, across an install and an update of the value.
func TestSecretInputsNeverShown(t *testing.T) {
	ns := newNamespace(t)
	name := "secret-" + ns
	const first, second = "s3cr3t-first-Kx9", "s3cr3t-second-Qw7"
	values := inputSecret(t, name+"-in", map[string]string{"password": first})
	url, _ := charts.publish(t, chart{name: "secretive", version: "1.0.0", files: map[string]string{
		"values.schema.json": `{"type":"object","properties":{"password":{"type":"string","writeOnly":true,"minLength":8}},"required":["password"]}`,
		"templates/secret.yaml": `apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-db
stringData:
  password: {{ .Values.password | quote }}
`,
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  length: "{{ len .Values.password }}"
`,
	}})
	a := create(t, newAddon(controllerNS, name, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.ManualSync = true
		s.ValuesFrom = []capstanv1.ValuesReference{{Kind: "Secret", Name: name + "-in", ValuesKey: "password", TargetPath: "password"}}
	})))
	got := waitPhase(t, a, capstanv1.PhaseOutOfSync)
	assertNotShown(t, got, first)
	got = update(t, got, func(cur *capstanv1.Addon) { cur.Spec.ApprovedPlan = cur.Status.Plan.Hash; cur.Spec.SyncRequest++ })
	waitPhase(t, got, capstanv1.PhaseSynced)

	// A new value: the plan shows the Secret's key as changed, no value.
	got, diff := planNewValue(t, a, values, "password", second, "Secret")
	if !strings.Contains(diff, "+  password: '(hidden: new value)'") {
		t.Fatalf("the Secret's changed key should be shown as changed:\n%s", diff)
	}
	assertNotShown(t, got, first)
	assertNotShown(t, got, second)
}

// planNewValue sets key of the values Secret to value, waits for the
// Addon's plan of the change, and returns the Addon and the diff of its
// object of kind.
func planNewValue(t *testing.T, a *capstanv1.Addon, values *corev1.Secret, key, value, kind string) (*capstanv1.Addon, string) {
	t.Helper()
	ctx := context.Background()
	eventually(t, 10*time.Second, "updating the values Secret", func() bool {
		cur := &corev1.Secret{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(values), cur); err != nil {
			return false
		}
		cur.StringData = map[string]string{key: value}
		return admin.Update(ctx, cur) == nil
	})
	got := waitFor(t, a, 60*time.Second, "a plan for the new value", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseOutOfSync && cur.Status.Plan != nil && cur.Status.Plan.Summary.Update > 0
	})
	var diff string
	for _, o := range got.Status.Plan.Objects {
		if o.Kind == kind {
			diff = o.Diff
		}
	}
	return got, diff
}

func assertNotShown(t *testing.T, a *capstanv1.Addon, secret string) {
	t.Helper()
	needles := []string{secret, base64.StdEncoding.EncodeToString([]byte(secret))}
	status, err := json.Marshal(a.Status)
	if err != nil {
		t.Fatal(err)
	}
	var events eventsv1.EventList
	if err := admin.List(context.Background(), &events, client.InNamespace(a.Namespace)); err != nil {
		t.Fatal(err)
	}
	var notes strings.Builder
	for _, e := range events.Items {
		notes.WriteString(e.Note + "\n")
	}
	var coreEvents corev1.EventList
	if err := admin.List(context.Background(), &coreEvents, client.InNamespace(a.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, e := range coreEvents.Items {
		notes.WriteString(e.Message + "\n")
	}
	for _, n := range needles {
		if strings.Contains(string(status), n) {
			t.Fatalf("the status shows a secret input")
		}
		if strings.Contains(notes.String(), n) {
			t.Fatalf("an event shows a secret input")
		}
		if strings.Contains(logSink.String(), n) {
			t.Fatalf("the controller's log shows a secret input")
		}
	}
	if notes.Len() == 0 || logSink.String() == "" {
		t.Fatalf("no events or no log were found; the check would prove nothing")
	}
}

// TestSecretValuesInOtherKindsHidden puts values from a Secret where the
// plan's per-key hiding of Secrets cannot reach them: into a ConfigMap's
// data, whose diff shows it, and into a label value the API server refuses,
// whose message quotes it. Neither value, nor the old one, may appear in
// the status, the events or the log; "(hidden)" stands in its place.
func TestSecretValuesInOtherKindsHidden(t *testing.T) {
	ns := newNamespace(t)
	const first, second, badLabel = "s3cr3t-cm-Jd8", "s3cr3t-cm-Zt4", "s3cr3t label Wq2"
	in := inputSecret(t, "leaky-"+ns+"-in", map[string]string{"message": first, "note": badLabel})
	url, _ := charts.publish(t, chart{name: "leaky", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  message: {{ .Values.message | quote }}
`,
	}})
	fromSecret := func(key string) capstanv1.ValuesReference {
		return capstanv1.ValuesReference{Kind: "Secret", Name: in.Name, ValuesKey: key, TargetPath: key}
	}

	// Into a ConfigMap's data: installed, then the value changes, and the
	// plan's diff of the ConfigMap shows a change of hidden values.
	data := create(t, newAddon(controllerNS, "leaky-data-"+ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.ManualSync = true
		s.ValuesFrom = []capstanv1.ValuesReference{fromSecret("message")}
	})))
	got := waitPhase(t, data, capstanv1.PhaseOutOfSync)
	got = update(t, got, func(cur *capstanv1.Addon) { cur.Spec.ApprovedPlan = cur.Status.Plan.Hash; cur.Spec.SyncRequest++ })
	waitPhase(t, got, capstanv1.PhaseSynced)
	got, diff := planNewValue(t, data, in, "message", second, "ConfigMap")
	if !strings.Contains(diff, "-  message: '(hidden: old value)'") || !strings.Contains(diff, "+  message: '(hidden: new value)'") {
		t.Fatalf("the ConfigMap's diff should show the message changed, both values hidden:\n%s", diff)
	}
	assertNotShown(t, got, first)
	assertNotShown(t, got, second)

	// Into a label value the API server refuses: its message, in the
	// status, the event and the log, has the value hidden.
	labelURL, _ := charts.publish(t, chart{name: "leaky-label", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-noted
  labels:
    note: {{ .Values.note | quote }}
`,
	}})
	label := create(t, newAddon(controllerNS, "leaky-label-"+ns, labelURL, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.ValuesFrom = []capstanv1.ValuesReference{fromSecret("note")}
	})))
	got = waitPhase(t, label, capstanv1.PhaseFailed)
	ready := apimeta.FindStatusCondition(got.Status.Conditions, capstanv1.ConditionReady)
	if ready == nil || !strings.Contains(ready.Message, "(hidden)") {
		t.Fatalf("the refusal should quote the label's value hidden; Ready is %+v", ready)
	}
	assertNotShown(t, got, badLabel)
}

// TestChartsRequiredMessageShownMasked installs a chart whose required
// call says which value to set and quotes a value from a Secret: the Ready
// condition carries the chart's message, the Secret's value hidden in it,
// and the status, events and log never show that value.
func TestChartsRequiredMessageShownMasked(t *testing.T) {
	ns := newNamespace(t)
	const user = "s3cr3t-user-Kq7"
	in := inputSecret(t, "required-"+ns+"-in", map[string]string{"username": user})
	url, _ := charts.publish(t, chart{name: "needs-password", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-auth
data:
  password: {{ required (printf "auth.password is required for user %s" .Values.auth.username) .Values.auth.password | quote }}
`,
	}})
	a := create(t, newAddon(controllerNS, "required-"+ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.ValuesFrom = []capstanv1.ValuesReference{{Kind: "Secret", Name: in.Name, ValuesKey: "username", TargetPath: "auth.username"}}
	})))
	got := waitPhase(t, a, capstanv1.PhaseFailed)
	ready := apimeta.FindStatusCondition(got.Status.Conditions, capstanv1.ConditionReady)
	const want = "needs-password/templates/cm.yaml line 6 column 15: auth.password is required for user (hidden)"
	if ready == nil || !strings.Contains(ready.Message, want) {
		t.Fatalf("Ready should carry the chart's message, the user hidden (%q); it is %+v", want, ready)
	}
	assertNotShown(t, got, user)
}

// TestMasksOfSecretValuesGoWithTheirAddon: the controller keeps the mask
// of an add-on's secret values between reconciles, but only the mask of
// the values it has now: a value rotated out is not kept in its memory,
// nor is any value of an Addon that was deleted.
func TestMasksOfSecretValuesGoWithTheirAddon(t *testing.T) {
	ns := newNamespace(t)
	const first, second = "s3cr3t-kept-Hq5", "s3cr3t-kept-Vb8"
	in := inputSecret(t, "masks-"+ns+"-in", map[string]string{"message": first})
	url, _ := charts.publish(t, chart{name: "masked", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  message: {{ .Values.message | quote }}
`,
	}})
	a := create(t, newAddon(controllerNS, "masks-"+ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.ManualSync = true
		s.ValuesFrom = []capstanv1.ValuesReference{{Kind: "Secret", Name: in.Name, ValuesKey: "message", TargetPath: "message"}}
	})))
	waitPhase(t, a, capstanv1.PhaseOutOfSync)
	if n := reconciler.MasksHolding(first); n != 1 {
		t.Fatalf("the controller keeps %d masks of the add-on's value; want 1", n)
	}
	eventually(t, 10*time.Second, "updating the values Secret", func() bool {
		cur := &corev1.Secret{}
		if err := admin.Get(context.Background(), client.ObjectKeyFromObject(in), cur); err != nil {
			return false
		}
		cur.StringData = map[string]string{"message": second}
		return admin.Update(context.Background(), cur) == nil
	})
	eventually(t, 60*time.Second, "the mask of the rotated value to go", func() bool {
		return reconciler.MasksHolding(first) == 0 && reconciler.MasksHolding(second) == 1
	})
	deleteAndWaitGone(t, a, 60*time.Second, "the Addon to go")
	eventually(t, 10*time.Second, "the mask of the deleted Addon's value to go", func() bool {
		return reconciler.MasksHolding(second) == 0
	})
}

// inputSecret creates a values Secret in the controller's namespace.
func inputSecret(t *testing.T, name string, data map[string]string) *corev1.Secret {
	t.Helper()
	in := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name}, StringData: data}
	if err := admin.Create(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	return in
}

// TestSecretInputTakesItsSchemasType: a writeOnly integer given as a
// Secret's targetPath, as Capstan's writers give every secret input, is
// rendered as the number, not Blocked as a string.
func TestSecretInputTakesItsSchemasType(t *testing.T) {
	ns := newNamespace(t)
	name := "typed-" + ns
	// NOTE: nine digits, so that no UID or resourceVersion in the whole
	// package's log holds the PIN by chance (five did, once).
	inputSecret(t, name+"-in", map[string]string{"pin": "739218465"})
	url, _ := charts.publish(t, chart{name: "typed", version: "1.0.0", files: map[string]string{
		"values.schema.json": `{"type":"object","properties":{"pin":{"type":"integer","writeOnly":true}},"required":["pin"]}`,
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  pinKind: {{ kindOf .Values.pin | quote }}
`,
	}})
	a := create(t, newAddon(controllerNS, name, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.ValuesFrom = []capstanv1.ValuesReference{{Kind: "Secret", Name: name + "-in", ValuesKey: "pin", TargetPath: "pin"}}
	})))
	got := waitFor(t, a, 90*time.Second, "Synced or Blocked", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced || cur.Status.Phase == capstanv1.PhaseBlocked
	})
	if got.Status.Phase != capstanv1.PhaseSynced {
		var errs []capstanv1.ValuesError
		if got.Status.Plan != nil {
			errs = got.Status.Plan.ValuesErrors
		}
		t.Fatalf("phase %s, values errors %v; want the PIN typed and the add-on Synced", got.Status.Phase, errs)
	}
	cm := &corev1.ConfigMap{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name + "-settings"}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["pinKind"] != "float64" {
		t.Fatalf("the chart saw the PIN as %q; want a number (float64), as a values document gives it", cm.Data["pinKind"])
	}
	assertNotShown(t, got, "739218465")
}
