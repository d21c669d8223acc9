package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// patchedChart is webChart with a pre-install hook, a ConfigMap that
// shares nothing with the objects but its kind.
func patchedChart() chart {
	return webChart("1.0.0", map[string]string{"templates/hook.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-hook
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
data:
  ran: "yes"
`})
}

// TestPatchesAndImagesChangeWhatIsApplied: spec.patches and spec.images
// change the render before the preview, in both of Helm's streams: the
// objects and the hooks. A patch that deletes an object leaves it out of
// the apply and the inventory; a change of a patch is an upgrade; a patch
// that selects nothing says so in the plan. Bad patches are refused with
// the field to fix, and nothing is applied. A tenant's patch cannot get
// past the guardrails, which judge the patched objects.
func TestPatchesAndImagesChangeWhatIsApplied(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url, _ := charts.publish(t, patchedChart())
	name := "patches-" + ns
	replicasPatch := func(n string) capstanv1.Patch {
		return capstanv1.Patch{Patch: "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + name + "\nspec:\n  replicas: " + n + "\n"}
	}
	a := create(t, newAddon(controllerNS, name, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Patches = []capstanv1.Patch{
			replicasPatch("2"),
			{Patch: `[{"op":"add","path":"/metadata/labels","value":{"patched":"yes"}}]`, Target: &capstanv1.PatchTarget{Kind: "ConfigMap"}},
			{Patch: "$patch: delete\napiVersion: v1\nkind: Service\nmetadata:\n  name: " + name + "\n"},
		}
		s.Images = []capstanv1.Image{{Name: "nginx", NewName: "mirror.example/nginx", NewTag: "1.27.1"}}
	})))
	got := waitPhase(t, a, capstanv1.PhaseSynced)

	dep := live(t, "apps/v1", "Deployment", ns, name)
	if r, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas"); r != 2 {
		t.Errorf("replicas %d, want the patch's 2", r)
	}
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	if img := containers[0].(map[string]any)["image"]; img != "mirror.example/nginx:1.27.1" {
		t.Errorf("image %v, want spec.images' mirror.example/nginx:1.27.1", img)
	}
	if l := live(t, "v1", "ConfigMap", ns, name+"-config").GetLabels(); l["patched"] != "yes" || l[capstanv1.AddonLabel] == "" {
		t.Errorf("ConfigMap labels %v: the patch's and Capstan's must both be there", l)
	}
	if hook := live(t, "v1", "ConfigMap", ns, name+"-hook"); hook == nil || hook.GetLabels()["patched"] != "yes" {
		t.Errorf("the hook ConfigMap was not patched: %v", hook)
	}
	if svc := live(t, "v1", "Service", ns, name); svc != nil {
		t.Error("the Service a patch deletes from the render was applied")
	}
	for _, id := range got.Status.Inventory {
		if id.Kind == "Service" {
			t.Errorf("the inventory holds %s", id)
		}
	}

	// A new patch is a new render: an upgrade, a revision of its own.
	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.Patches[0] = replicasPatch("3")
		cur.Spec.Patches = append(cur.Spec.Patches, capstanv1.Patch{Patch: "{}", Target: &capstanv1.PatchTarget{Kind: "Secret"}})
	})
	got = waitFor(t, a, 60*time.Second, "the upgrade", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.ObservedGeneration == cur.Generation && len(cur.Status.History) == 2
	})
	if r, _, _ := unstructured.NestedInt64(live(t, "apps/v1", "Deployment", ns, name).Object, "spec", "replicas"); r != 3 {
		t.Errorf("after the upgrade: replicas %d, want 3", r)
	}
	noticed := false
	for _, n := range got.Status.Plan.Notices {
		noticed = noticed || n.Path == "spec.patches[3]" && strings.Contains(n.Message, "selects no object")
	}
	if !noticed {
		t.Errorf("a patch of kind Secret, which the chart has none of: notices %+v", got.Status.Plan.Notices)
	}

	// Refused: a copy, and a patch of an object the chart does not render.
	for i, bad := range []struct {
		patch capstanv1.Patch
		want  string
	}{
		{capstanv1.Patch{Patch: `[{"op":"copy","from":"/spec","path":"/metadata/annotations/x"}]`, Target: &capstanv1.PatchTarget{Kind: "Deployment"}}, "spec.patches[0]: operation 0 is a JSON 6902 copy"},
		{capstanv1.Patch{Patch: "kind: Deployment\nmetadata:\n  name: nothere\n"}, "spec.patches[0] names Deployment nothere, which the render does not have"},
	} {
		b := create(t, newAddon(controllerNS, "pbad"+string(rune('a'+i))+"-"+ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
			s.ReleaseName = "bad" + string(rune('a'+i))
			s.Patches = []capstanv1.Patch{bad.patch}
		})))
		failed := waitPhase(t, b, capstanv1.PhaseFailed)
		if c := condition(failed, capstanv1.ConditionReady); c == nil || !strings.Contains(c.Message, bad.want) {
			t.Errorf("want a message with %q:\n%s", bad.want, describeStatus(failed))
		}
		if live(t, "apps/v1", "Deployment", ns, "bad"+string(rune('a'+i))) != nil || len(failed.Status.Inventory) != 0 {
			t.Error("an add-on with a refused patch applied something")
		}
	}
	err := admin.Create(ctx, newAddon(controllerNS, "pnoimg-"+ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Images = []capstanv1.Image{{Name: "nginx"}}
	})))
	if err == nil || !strings.Contains(err.Error(), "set newName, newTag or digest") {
		t.Errorf("an image entry that changes nothing: %v", err)
	}
}

// TestATenantsPatchMeetsTheGuardrails: the guardrails judge the patched
// render, so a restricted add-on cannot patch its way past them.
func TestATenantsPatchMeetsTheGuardrails(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := create(t, newAddon(ns, "tenant", url, withSpec(func(s *capstanv1.AddonSpec) {
		s.Patches = []capstanv1.Patch{{
			Patch:  `[{"op":"add","path":"/spec/template/spec/hostNetwork","value":true}]`,
			Target: &capstanv1.PatchTarget{Kind: "Deployment"},
		}}
	})))
	got := waitPhase(t, a, capstanv1.PhaseBlocked)
	found := false
	for _, v := range got.Status.Plan.Violations {
		found = found || strings.Contains(v.Path, "hostNetwork")
	}
	if !found || got.Status.Profile != capstanv1.ProfileRestricted {
		t.Fatalf("a patch that sets hostNetwork: want a violation\n%s", describeStatus(got))
	}
	if live(t, "apps/v1", "Deployment", ns, "tenant") != nil {
		t.Fatal("a Deployment blocked by the guardrails was applied")
	}
}
