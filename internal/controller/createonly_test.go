package controller_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestIfNotPresentIsCreatedOnly: an object marked as Flux marks it,
// kustomize.toolkit.fluxcd.io/ssa: IfNotPresent, is created while it is
// missing and never changed after: a hand edit stays through an upgrade
// that changes its manifest, where an unmarked object's is taken back; it
// is created anew when deleted. One that existed before the add-on is
// adopted as any other (spec.adopt), and keeps what it holds. An object
// marked ssa: Ignore is never applied; one the add-on applied before the
// mark is left as it is and leaves the inventory, though the add-on
// prunes.
func TestIfNotPresentIsCreatedOnly(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	ifNotPresent := "  annotations:\n    kustomize.toolkit.fluxcd.io/ssa: IfNotPresent\n"
	configMap := func(name, meta string) string {
		return "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n" + meta + "data: {a: {{ .Values.a | quote }}}\n"
	}
	ignore := "  annotations:\n    kustomize.toolkit.fluxcd.io/ssa: Ignore\n"
	url, _ := charts.publish(t, chart{name: "createonly", version: "1.0.0", files: map[string]string{
		"templates/all.yaml": configMap("seeded", ifNotPresent) + configMap("theirs", ifNotPresent) + configMap("plain", "") +
			"{{ if .Values.leaveManaged }}" + configMap("managed", ignore) + "{{ else }}" + configMap("managed", "") + "{{ end }}" +
			configMap("never", ignore) + "{{ if .Values.leave }}" + configMap("later", ignore) + "{{ else }}" + configMap("later", "") + "{{ end }}",
	}})
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "theirs"}, Data: map[string]string{"owner": "person"}}
	if err := admin.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	a := create(t, newAddon(controllerNS, "once-"+ns[len(ns)-5:], url, withTarget(ns), withValues("a: one"), withSpec(func(s *capstanv1.AddonSpec) {
		s.Prune = true
	})))
	blocked := waitPhase(t, a, capstanv1.PhaseBlocked)
	if !strings.Contains(readyMessage(blocked), "ConfigMap "+ns+"/theirs") || !strings.Contains(readyMessage(blocked), "spec.adopt") {
		t.Fatalf("Blocked with %q; want the existing ConfigMap named, and spec.adopt", readyMessage(blocked))
	}
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Adopt = true })
	synced(t, a)

	data := func(name string) map[string]string {
		t.Helper()
		cm := &corev1.ConfigMap{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
			t.Fatalf("reading %s: %v", name, err)
		}
		return cm.Data
	}
	if data("seeded")["a"] != "one" || data("managed")["a"] != "one" {
		t.Fatalf("seeded %v, managed %v; want both created with a: one", data("seeded"), data("managed"))
	}
	if d := data("theirs"); d["owner"] != "person" || d["a"] != "" {
		t.Errorf("the adopted ConfigMap holds %v; want what it held", d)
	}
	if live(t, "v1", "ConfigMap", ns, "never") != nil {
		t.Error("a ConfigMap marked ssa: Ignore was applied")
	}
	if data("later")["a"] != "one" {
		t.Fatalf("later holds %v; want a: one", data("later"))
	}

	for _, name := range []string{"seeded", "managed", "later"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := admin.Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(`{"data":{"a":"by hand"}}`))); err != nil {
			t.Fatal(err)
		}
	}
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("a: two\nleave: true") })
	upgraded := synced(t, a)
	if data("managed")["a"] != "two" {
		t.Errorf("managed holds %v after the upgrade; want a: two", data("managed"))
	}
	if data("seeded")["a"] != "by hand" {
		t.Errorf("seeded holds %v after the upgrade; want the hand edit kept", data("seeded"))
	}
	if d := data("theirs"); d["owner"] != "person" {
		t.Errorf("the adopted ConfigMap holds %v after the upgrade", d)
	}
	// later, marked Ignore now, is left as it is, out of the inventory,
	// though the add-on prunes.
	if data("later")["a"] != "by hand" {
		t.Errorf("later holds %v after the upgrade; want the hand edit kept", data("later"))
	}
	for _, ref := range capstanv1.RefsOf(upgraded.Status.Inventory) {
		if ref.Name == "later" || ref.Name == "never" {
			t.Errorf("the inventory holds %s, marked ssa: Ignore", ref.Describe())
		}
	}
	notices := ""
	for _, n := range upgraded.Status.Plan.Notices {
		notices += n.Message + "\n"
	}
	if !strings.Contains(notices, "2 object(s) are marked kustomize.toolkit.fluxcd.io/ssa: Ignore") {
		t.Errorf("the plan's notices do not name the ignored objects:\n%s", notices)
	}
	for _, o := range upgraded.Status.Plan.Objects {
		if (o.Name == "seeded" || o.Name == "theirs") && o.Action != capstanv1.ActionUnchanged {
			t.Errorf("the plan %ss %s", o.Action, o.Describe())
		}
	}

	if err := admin.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "seeded"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "seeded created anew", func() bool {
		cm := &corev1.ConfigMap{}
		return admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "seeded"}, cm) == nil && cm.Data["a"] == "two"
	})

	// managed, marked Ignore while a gate holds the plan (plain changes),
	// is still in the inventory; the uninstall reads the mark from the
	// render, and leaves it, where it deletes seeded.
	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.ManualSync = true
		cur.Spec.DeletionPolicy = capstanv1.DeletionDelete
		cur.Spec.Values = jsonValues("a: three\nleave: true\nleaveManaged: true")
	})
	held := waitFor(t, a, 60*time.Second, "the plan held", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseOutOfSync && cur.Status.ObservedGeneration == cur.Generation
	})
	if !slices.ContainsFunc(capstanv1.RefsOf(held.Status.Inventory), func(r capstanv1.ObjectRef) bool { return r.Name == "managed" }) {
		t.Fatalf("managed left the inventory before a sync: %v", held.Status.Inventory)
	}
	if err := admin.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "the Addon gone", func() bool {
		return admin.Get(ctx, client.ObjectKeyFromObject(a), &capstanv1.Addon{}) != nil
	})
	if live(t, "v1", "ConfigMap", ns, "managed") == nil {
		t.Error("the uninstall deleted managed, which the render marks ssa: Ignore")
	}
	if cm := live(t, "v1", "ConfigMap", ns, "seeded"); cm != nil && cm.GetDeletionTimestamp() == nil {
		t.Error("the uninstall left seeded")
	}
}
