package controller_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/netguard"
)

// gadgetsCRD is a CRD of group safety.example.com with the given versions,
// each "name:storage:fields", or "name:storage:fields:celRule" with a CEL
// rule on spec. fields is the type of spec.size, then "+colour" for a
// string spec.colour, "+open" for an object spec.options that keeps
// unknown fields (x-kubernetes-preserve-unknown-fields), and "+closed" for
// one that does not.
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
		fields := strings.Split(parts[2], "+")
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
`, parts[0], parts[1], fields[0])
		for _, f := range fields[1:] {
			switch f {
			case "colour":
				b.WriteString("                colour: {type: string}\n")
			case "open":
				b.WriteString("                options: {type: object, x-kubernetes-preserve-unknown-fields: true}\n")
			case "closed":
				b.WriteString("                options: {type: object}\n")
			}
		}
		if len(parts) > 3 {
			fmt.Fprintf(&b, "              x-kubernetes-validations: [{rule: %q}]\n", parts[3])
		}
	}
	return b.String()
}

// TestUnsafeCRDUpgradesAreRefused upgrades a chart's CRD in ways that
// break stored objects, each a violation in the plan with nothing applied:
// a schema or a CEL rule that an existing object no longer meets, a field
// it holds that the new schema drops (the API server would prune it), the
// same by x-kubernetes-preserve-unknown-fields removed, and a dropped
// stored version with the storage version changed to a different schema
// with no conversion. With spec.allowUnsafeCRDChanges the schema change is
// applied.
func TestUnsafeCRDUpgradesAreRefused(t *testing.T) {
	ns := newNamespace(t)
	group := "safety" + strings.ReplaceAll(ns[len(ns)-5:], "-", "") + ".example.com"
	publish := func(version string, crd string) string {
		url, _ := charts.publish(t, chart{name: "gadgets", version: version, files: map[string]string{"crds/gadgets.yaml": crd}})
		return url
	}
	a := create(t, newAddon(controllerNS, "gadgets-"+ns, publish("1.0.0", gadgetsCRD(group, "v1:true:integer+colour+open")), withTarget(ns)))
	waitPhase(t, a, capstanv1.PhaseSynced)
	gadget := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Gadget",
		"metadata": map[string]any{"namespace": ns, "name": "g1"},
		"spec":     map[string]any{"size": int64(3), "colour": "red", "options": map[string]any{"fast": true}}}}
	eventually(t, 30*time.Second, "the Gadget to be created", func() bool { return admin.Create(context.Background(), gadget) == nil })

	for _, tc := range []struct {
		name, crd string
		rules     []string
		says      string
	}{
		{"a schema the stored Gadget breaks", gadgetsCRD(group, "v1:true:string+colour+open"), []string{"crd-schema-invalidates-objects"}, "size"},
		// Only the API server runs CEL rules: the shadow CRD's dry run finds it.
		{"a CEL rule the stored Gadget breaks", gadgetsCRD(group, "v1:true:integer+colour+open:self.size < 2"), []string{"crd-schema-invalidates-objects"}, "size"},
		// The API server prunes what the schema does not name, without
		// an error unless asked to be strict.
		{"a field the stored Gadget holds removed", gadgetsCRD(group, "v1:true:integer+open"), []string{"crd-schema-invalidates-objects"}, "spec.colour"},
		{"unknown fields no longer kept", gadgetsCRD(group, "v1:true:integer+colour+closed"), []string{"crd-schema-invalidates-objects"}, "spec.options.fast"},
		{"a dropped stored version", gadgetsCRD(group, "v2:true:string+colour+open"), []string{"crd-stored-version-dropped", "crd-storage-version-changed"}, ""},
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
			if !strings.Contains(msg, "1 of 1") || !strings.Contains(msg, ns+"/g1") || !strings.Contains(msg, tc.says) {
				t.Errorf("%s: the violation %q does not count and name the object, and say %q", tc.name, msg, tc.says)
			}
			if !hasNoticeSaying(got.Status.Plan, "by the API server") {
				t.Errorf("%s: the plan does not say the API server judged the objects: %+v", tc.name, got.Status.Plan.Notices)
			}
		}
	}
	// Allowed: the schema change is applied, and the stored Gadget stays.
	url := publish("3.0.0", gadgetsCRD(group, "v1:true:string+colour+open"))
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
		return admin.List(context.Background(), shadows, client.HasLabels{"capstan.dev/crd-check"}) == nil && len(shadows.Items) == 0
	})
}

// TestUnsafeCRDHookUpgradesAreRefused ships the CRD as a pre-install and
// pre-upgrade hook, as charts do to have it in first: the hook runner
// applies it over the live CRD, unpreviewed, so the same checks must hold
// it back. A schema the stored Gadget breaks, a field it holds removed and
// a dropped stored version are refused, and nothing is applied; with
// spec.allowUnsafeCRDChanges the schema change is applied by the hook.
func TestUnsafeCRDHookUpgradesAreRefused(t *testing.T) {
	ns := newNamespace(t)
	group := "hooksafety" + strings.ReplaceAll(ns[len(ns)-5:], "-", "") + ".example.com"
	publish := func(version string, crd string) string {
		hook := strings.Replace(crd, "metadata:\n", "metadata:\n  annotations: {helm.sh/hook: \"pre-install,pre-upgrade\"}\n", 1)
		url, _ := charts.publish(t, chart{name: "gadgets", version: version, files: map[string]string{"templates/gadgets.yaml": hook}})
		return url
	}
	schemaType := func() string {
		crd := live(t, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "gadgets."+group)
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		size, _, _ := unstructured.NestedString(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties", "size", "type")
		return size
	}
	a := create(t, newAddon(controllerNS, "hookgadgets-"+ns, publish("1.0.0", gadgetsCRD(group, "v1:true:integer+colour+open")), withTarget(ns)))
	waitPhase(t, a, capstanv1.PhaseSynced)
	gadget := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Gadget",
		"metadata": map[string]any{"namespace": ns, "name": "g1"},
		"spec":     map[string]any{"size": int64(3), "colour": "red", "options": map[string]any{"fast": true}}}}
	eventually(t, 30*time.Second, "the Gadget to be created", func() bool { return admin.Create(context.Background(), gadget) == nil })

	for _, tc := range []struct {
		name, crd string
		rules     []string
		says      string
	}{
		{"a schema the stored Gadget breaks", gadgetsCRD(group, "v1:true:string+colour+open"), []string{"crd-schema-invalidates-objects"}, "size"},
		{"a field the stored Gadget holds removed", gadgetsCRD(group, "v1:true:integer+open"), []string{"crd-schema-invalidates-objects"}, "spec.colour"},
		{"a dropped stored version", gadgetsCRD(group, "v2:true:string+colour+open"), []string{"crd-stored-version-dropped", "crd-storage-version-changed"}, ""},
	} {
		url := publish("2.0.0-"+strings.ReplaceAll(tc.name, " ", ""), tc.crd)
		update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url })
		got := waitPhase(t, a, capstanv1.PhaseBlocked)
		for _, rule := range tc.rules {
			if !violationRule(rule)(got) {
				t.Errorf("%s: no %s violation: %s", tc.name, rule, describeStatus(got))
			}
		}
		if tc.says != "" {
			msg := ""
			for _, v := range got.Status.Plan.Violations {
				msg += v.Message
			}
			if !strings.Contains(msg, "1 of 1") || !strings.Contains(msg, ns+"/g1") || !strings.Contains(msg, tc.says) {
				t.Errorf("%s: the violation %q does not count and name the object, and say %q", tc.name, msg, tc.says)
			}
		}
		if got := schemaType(); got != "integer" {
			t.Errorf("%s: the refused CRD hook was applied: size is %q", tc.name, got)
		}
	}
	if g := live(t, group+"/v1", "Gadget", ns, "g1"); g == nil {
		t.Error("the stored Gadget is gone")
	} else if colour, _, _ := unstructured.NestedString(g.Object, "spec", "colour"); colour != "red" {
		t.Errorf("the stored Gadget lost its colour: %v", g.Object["spec"])
	}
	// Allowed: the hook applies the schema change, and the Gadget stays.
	url := publish("3.0.0", gadgetsCRD(group, "v1:true:string+colour+open"))
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL, cur.Spec.AllowUnsafeCRDChanges = url, true })
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	if len(got.Status.Plan.Violations) > 0 {
		t.Errorf("the allowed change was refused: %+v", got.Status.Plan.Violations)
	}
	if !hasNoticeSaying(got.Status.Plan, "validated 1 existing gadgets") {
		t.Errorf("the plan does not say the stored Gadget was checked: %+v", got.Status.Plan.Notices)
	}
	if size := schemaType(); size != "string" {
		t.Errorf("the allowed change was not applied: size is %q", size)
	}
	if live(t, group+"/v1", "Gadget", ns, "g1") == nil {
		t.Error("the stored Gadget is gone")
	}
}

// TestStorageVersionMoveWithTheSameSchema moves a CRD's storage version
// to a new version of the same schema with no conversion webhook, as
// Gateway API v1.0 does: the API server only rewrites the apiVersion of
// what it reads, so the move is applied, after the stored Gadget is
// validated against the new version's schema, and the Gadget is read in it
// unchanged. Both versions are checked against one shadow CRD.
func TestStorageVersionMoveWithTheSameSchema(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	group := "storage" + strings.ReplaceAll(ns[len(ns)-5:], "-", "") + ".example.com"
	publish := func(version string, crd string) string {
		url, _ := charts.publish(t, chart{name: "gadgets", version: version, files: map[string]string{"crds/gadgets.yaml": crd}})
		return url
	}
	a := create(t, newAddon(controllerNS, "storage-"+ns, publish("1.0.0", gadgetsCRD(group, "v1:true:integer+colour")), withTarget(ns)))
	waitPhase(t, a, capstanv1.PhaseSynced)
	gadget := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Gadget",
		"metadata": map[string]any{"namespace": ns, "name": "g1"}, "spec": map[string]any{"size": int64(3), "colour": "red"}}}
	eventually(t, 30*time.Second, "the Gadget to be created", func() bool { return admin.Create(ctx, gadget) == nil })

	made := watchShadows(t, a)
	url := publish("2.0.0", gadgetsCRD(group, "v1:false:integer+colour", "v2:true:integer+colour"))
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url })
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	if len(got.Status.Plan.Violations) > 0 {
		t.Errorf("the move was refused: %+v", got.Status.Plan.Violations)
	}
	// Both versions are checked, against one shadow: a shadow made again
	// for the second met the first one still being deleted.
	if m := made(); len(m) != 1 {
		t.Errorf("the move made shadow CRDs %v; want one", m)
	}
	if !hasNoticeSaying(got.Status.Plan, "of version v2 (read as v1") {
		t.Errorf("the stored Gadget was not validated against v2's schema: %+v", got.Status.Plan.Notices)
	}
	g := live(t, group+"/v2", "Gadget", ns, "g1")
	if size, _, _ := unstructured.NestedInt64(g.Object, "spec", "size"); size != 3 {
		t.Errorf("the Gadget read as v2 has size %d; want 3", size)
	}
}

func hasNoticeSaying(p *capstanv1.Plan, says string) bool {
	for _, n := range p.Notices {
		if strings.Contains(n.Message, says) {
			return true
		}
	}
	return false
}

// TestCRDChecksMakeShadowsOnlyToApply follows an add-on with a CRD and a
// stored object. A preview that reads the unchanged CRD (its live
// resourceVersion moved) makes no shadow CRD, nor does `capstan plan` of
// it, which writes nothing. An incompatible schema change is caught, in
// the controller and with no shadow, while the add-on is suspended and by
// `capstan plan`; once resumed, by the API server through a shadow, which
// is deleted after with a leftover of the add-on's own, while another
// add-on's and a CRD that merely carries the add-on's label stay.
func TestCRDChecksMakeShadowsOnlyToApply(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	group := "shadow" + strings.ReplaceAll(ns[len(ns)-5:], "-", "") + ".example.com"
	publish := func(version string, crd string) string {
		url, _ := charts.publish(t, chart{name: "gadgets", version: version, files: map[string]string{"crds/gadgets.yaml": crd}})
		return url
	}
	a := create(t, newAddon(controllerNS, "shadows-"+ns, publish("1.0.0", gadgetsCRD(group, "v1:true:integer")), withTarget(ns)))
	a = waitPhase(t, a, capstanv1.PhaseSynced)
	gadget := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Gadget",
		"metadata": map[string]any{"namespace": ns, "name": "g1"}, "spec": map[string]any{"size": int64(3)}}}
	eventually(t, 30*time.Second, "the Gadget to be created", func() bool { return admin.Create(ctx, gadget) == nil })
	made := watchShadows(t, a)

	// Another writer's annotation moves the CRD's resourceVersion: the
	// next sync reads it and dry-runs it again, and finds it unchanged.
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := admin.Get(ctx, client.ObjectKey{Name: "gadgets." + group}, crd); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(crd.DeepCopy())
	metav1.SetMetaDataAnnotation(&crd.ObjectMeta, "example.com/touched", "yes")
	if err := admin.Patch(ctx, crd, patch); err != nil {
		t.Fatal(err)
	}
	patchAnnotation(t, a, capstanv1.RefreshAnnotation, "after-touch")
	got := waitFor(t, a, 60*time.Second, "the refresh to be handled", func(cur *capstanv1.Addon) bool {
		return cur.Status.LastHandledRefresh == "after-touch"
	})
	if got.Status.Phase != capstanv1.PhaseSynced || hasNoticeSaying(got.Status.Plan, "validated") {
		t.Errorf("the unchanged CRD was checked: %s, notices %+v", describeStatus(got), got.Status.Plan.Notices)
	}
	if m := made(); len(m) > 0 {
		t.Errorf("a preview of the unchanged CRD made shadow CRDs %v", m)
	}

	// `capstan plan` of the unchanged CRD writes nothing.
	const planUser = "capstan-crd-plan-auditor"
	plan := func() *capstanv1.Plan {
		t.Helper()
		_, p := planAs(t, planUser, a)
		return p
	}
	if p := plan(); hasNoticeSaying(p, "validated") || len(p.Violations) > 0 {
		t.Errorf("the plan checked the unchanged CRD: violations %+v, notices %+v", p.Violations, p.Notices)
	}

	// Suspended, the incompatible change is caught in the controller.
	url := publish("2.0.0", gadgetsCRD(group, "v1:true:string"))
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL, cur.Spec.Suspend = url, true })
	got = waitFor(t, a, 60*time.Second, "the suspended add-on to find the violation", violationRule("crd-schema-invalidates-objects"))
	if !hasNoticeSaying(got.Status.Plan, "in the controller") {
		t.Errorf("the suspended add-on's plan does not say the controller judged the objects: %+v", got.Status.Plan.Notices)
	}
	if p := plan(); !hasViolation(p, "crd-schema-invalidates-objects") || !hasNoticeSaying(p, "in the controller") {
		t.Errorf("the plan of the incompatible change: violations %+v, notices %+v", p.Violations, p.Notices)
	}
	if m := made(); len(m) > 0 {
		t.Errorf("a suspended add-on or a plan made shadow CRDs %v", m)
	}
	assertNoWrites(t, planUser)

	// A crash left a shadow of this add-on's (for an earlier chart), and
	// another add-on checks its own CRD right now.
	// And someone put the add-on's shadow label on a CRD that is not one.
	leftover, others := leftoverShadow(t, group, "left", shadowOwnerOf(a)), leftoverShadow(t, group, "other", "0123456789abcdef")
	imposter := labelledCRD(t, "imposter"+group, shadowOwnerOf(a))

	// Resumed, the API server judges it through a shadow, deleted after,
	// with the leftover; the other add-on's is left alone.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Suspend = false })
	got = waitFor(t, a, 60*time.Second, "the API server to judge the objects", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseBlocked && cur.Status.Plan != nil && hasNoticeSaying(cur.Status.Plan, "by the API server")
	})
	if !violationRule("crd-schema-invalidates-objects")(got) {
		t.Errorf("no violation once resumed: %s", describeStatus(got))
	}
	if m := made(); !slices.ContainsFunc(m, func(name string) bool { return name != imposter.Name }) {
		t.Error("the check before the apply made no shadow CRD")
	}
	shadows := &apiextensionsv1.CustomResourceDefinitionList{}
	eventually(t, 30*time.Second, "the shadow CRDs to be deleted", func() bool {
		return admin.List(ctx, shadows, client.MatchingLabels{"capstan.dev/crd-check": shadowOwnerOf(got)}) == nil &&
			!slices.ContainsFunc(shadows.Items, func(crd apiextensionsv1.CustomResourceDefinition) bool { return crd.Name != imposter.Name })
	})
	if err := admin.Get(ctx, client.ObjectKeyFromObject(leftover), &apiextensionsv1.CustomResourceDefinition{}); err == nil {
		t.Errorf("the leftover shadow %s is still there", leftover.Name)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(others), others); err != nil || others.DeletionTimestamp != nil {
		t.Errorf("another add-on's shadow in use was deleted: %v", err)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(imposter), imposter); err != nil || imposter.DeletionTimestamp != nil {
		t.Errorf("the labelled CRD %s, which is no shadow, was deleted: %v", imposter.Name, err)
	}
}

// leftoverShadow creates, as the admin, a shadow CRD labelled for owner,
// with a group of a shadow's form, deleted at the test's end.
func leftoverShadow(t *testing.T, group, name, owner string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	sum := sha256.Sum256([]byte(name + "/" + group))
	return labelledCRD(t, "c"+hex.EncodeToString(sum[:])[:12]+".crdcheck.capstan.dev", owner)
}

// labelledCRD creates, as the admin, a CRD of group g labelled as a
// shadow for owner, deleted at the test's end.
func labelledCRD(t *testing.T, g, owner string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets." + g, Labels: map[string]string{"capstan.dev/crd-check": owner}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: g, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}}}},
	}
	if err := admin.Create(context.Background(), crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), crd) })
	return crd
}

// TestSweepLeavesLabelledCRDs: the label that marks a shadow CRD is not
// enough to have a CRD deleted, by an add-on's check or by the sweep,
// however old: someone who may only patch CRDs must not get Capstan to
// delete one, and every object of its kind with it. The shadows
// themselves are deleted.
func TestSweepLeavesLabelledCRDs(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	group := "sweep" + strings.ReplaceAll(ns[len(ns)-5:], "-", "") + ".example.com"
	const owner, other = "5eed5eed5eed5eed", "0dd0dd0dd0dd0dd0"
	labelled := labelledCRD(t, group, owner)
	mine, others := leftoverShadow(t, group, "mine", owner), leftoverShadow(t, group, "other", other)
	gone := func(crd *apiextensionsv1.CustomResourceDefinition) bool {
		got := &apiextensionsv1.CustomResourceDefinition{}
		err := admin.Get(ctx, client.ObjectKeyFromObject(crd), got)
		return apierrors.IsNotFound(err) || err == nil && got.DeletionTimestamp != nil
	}

	// The add-on's check deletes its own shadows, whatever their age.
	controller.CleanShadowsAt(ctx, admin, owner, time.Now())
	if !gone(mine) || gone(others) {
		t.Errorf("the check of %s: its shadow gone %v, another add-on's young one gone %v; want true, false", owner, gone(mine), gone(others))
	}
	// NOTE: the sweep an hour on deletes every shadow in the cluster: the
	// suite's tests run one at a time, and a check whose shadow goes is
	// retried.
	controller.CleanShadowsAt(ctx, admin, "", time.Now().Add(time.Hour))
	if !gone(others) {
		t.Errorf("the sweep left the old shadow %s", others.Name)
	}
	if gone(labelled) {
		t.Errorf("the CRD %s, which only carries the shadows' label, was deleted", labelled.Name)
	}
}

// shadowOwnerOf is the value of the capstan.dev/crd-check label on an
// Addon's shadow CRDs: a short hash of its namespace, name and UID.
func shadowOwnerOf(a *capstanv1.Addon) string {
	sum := sha256.Sum256([]byte(a.Namespace + "/" + a.Name + "/" + string(a.UID)))
	return hex.EncodeToString(sum[:])[:16]
}

// watchShadows watches the CRDs created for a's checks from now on, and
// returns a function that names those created so far.
func watchShadows(t *testing.T, a *capstanv1.Addon) func() []string {
	t.Helper()
	c, err := client.NewWithWatch(cluster.ConfigFor("capstan-shadow-watcher", "system:masters"), client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(context.Background(), &apiextensionsv1.CustomResourceDefinitionList{},
		client.MatchingLabels{"capstan.dev/crd-check": shadowOwnerOf(a)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	var names []string
	go func() {
		for e := range w.ResultChan() {
			if crd, ok := e.Object.(*apiextensionsv1.CustomResourceDefinition); ok && e.Type == watch.Added {
				mu.Lock()
				names = append(names, crd.Name)
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		// NOTE: an event can trail the status that the reconcile which
		// made it wrote; a second is ample on loopback.
		time.Sleep(time.Second)
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(names)
	}
}

// planAs computes a's plan on demand as user, as `capstan plan` does.
func planAs(t *testing.T, user string, a *capstanv1.Addon) (*capstanv1.Addon, *capstanv1.Plan) {
	t.Helper()
	cfg := cluster.ConfigFor(user, "system:masters")
	c, err := client.New(cfg, client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	fetcher, err := addons.NewFetcher(cfg, addons.FetcherOptions{Guard: netguard.Config{Allow: []string{charts.addr}, LoopbackOnly: true}, CABundle: charts.caPEM})
	if err != nil {
		t.Fatal(err)
	}
	planner := addons.Planner{Client: c, RestConfig: cfg, Fetcher: fetcher, Config: controller.Config{Namespace: controllerNS}}
	got, p, err := planner.Plan(context.Background(), client.ObjectKeyFromObject(a))
	if err != nil {
		t.Fatalf("planning: %v", err)
	}
	return got, p
}

// assertNoWrites fails the test if the audit log holds a write by user
// other than a dry run.
func assertNoWrites(t *testing.T, user string) {
	t.Helper()
	entries, err := cluster.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	var writes []string
	for _, e := range entries {
		if e.User.Username == user && !strings.Contains(e.RequestURI, "dryRun=All") {
			writes = append(writes, e.Verb+" "+e.RequestURI)
		}
	}
	if len(writes) > 0 {
		t.Errorf("%s made %d writes; want none:\n%s", user, len(writes), strings.Join(writes, "\n"))
	}
}

func hasViolation(p *capstanv1.Plan, rule string) bool {
	return slices.ContainsFunc(p.Violations, func(v capstanv1.Violation) bool { return v.Rule == rule })
}

// TestCRDVersionThatStopsBeingServed upgrades a CRD whose old storage
// version v1 stops being served (served: false, storage: false) as v2,
// with the same schema, becomes the storage version: a common step before
// a version is dropped. The stored Gadget is checked as v2, the version it
// is served as, and the upgrade applies. Before, the check validated it as
// v1 too, on a shadow that no longer serves v1: every sync failed with
// the shadow's "no match", retried for ever. A version that stops being
// served still holds the objects stored in it, which the API server
// prunes by its schema when it reads them: cutting that schema down is
// refused.
func TestCRDVersionThatStopsBeingServed(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	group := "unserved" + strings.ReplaceAll(ns[len(ns)-5:], "-", "") + ".example.com"
	publish := func(version string, crd string) string {
		url, _ := charts.publish(t, chart{name: "gadgets", version: version, files: map[string]string{"crds/gadgets.yaml": crd}})
		return url
	}
	a := create(t, newAddon(controllerNS, "unserved-"+ns, publish("1.0.0", gadgetsCRD(group, "v1:true:integer+colour")), withTarget(ns)))
	waitPhase(t, a, capstanv1.PhaseSynced)
	gadget := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Gadget",
		"metadata": map[string]any{"namespace": ns, "name": "g1"}, "spec": map[string]any{"size": int64(3), "colour": "red"}}}
	eventually(t, 30*time.Second, "the Gadget to be created", func() bool { return admin.Create(ctx, gadget) == nil })

	crd := gadgetsCRD(group, "v1:false:integer+colour", "v2:true:integer+colour")
	unserved := strings.Replace(crd, "- name: v1\n      served: true", "- name: v1\n      served: false", 1)
	if unserved == crd {
		t.Fatal("the CRD's v1 was not made unserved")
	}
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = publish("2.0.0", unserved) })
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	if len(got.Status.Plan.Violations) > 0 {
		t.Errorf("the upgrade was refused: %+v", got.Status.Plan.Violations)
	}
	if !hasNoticeSaying(got.Status.Plan, "of version v2") {
		t.Errorf("the stored Gadget was not validated against v2's schema: %+v", got.Status.Plan.Notices)
	}
	if g := live(t, group+"/v2", "Gadget", ns, "g1"); g == nil {
		t.Error("the Gadget cannot be read as v2")
	}

	// The Gadget is still stored as v1 (status.storedVersions), and the
	// API server prunes it by v1's schema when it reads it: a v1 cut down
	// to no colour, unserved as it is, would lose the field.
	stub := strings.Replace(gadgetsCRD(group, "v1:false:integer", "v2:true:integer+colour"), "- name: v1\n      served: true", "- name: v1\n      served: false", 1)
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = publish("3.0.0", stub) })
	got = waitPhase(t, a, capstanv1.PhaseBlocked)
	if !violationRule("crd-schema-invalidates-objects")(got) {
		t.Errorf("no violation for the stored Gadget that the unserved v1's schema prunes: %s", describeStatus(got))
	}
}

// TestCRDCheckSkipsObjectsBeingDeleted: a Gadget that a finalizer holds
// in a Terminating namespace is among the sampled objects when the chart
// changes the CRD's schema. The API server refuses to create anything in
// that namespace, the shadow's dry run included, and the object is on its
// way out: it is left out of the check, which the notice says, and the
// upgrade goes on. Before, every sync failed with the dry run's 403.
func TestCRDCheckSkipsObjectsBeingDeleted(t *testing.T) {
	ctx := context.Background()
	ns, doomed := newNamespace(t), newNamespace(t)
	group := "doomed" + strings.ReplaceAll(ns[len(ns)-5:], "-", "") + ".example.com"
	publish := func(version string, crd string) string {
		url, _ := charts.publish(t, chart{name: "gadgets", version: version, files: map[string]string{"crds/gadgets.yaml": crd}})
		return url
	}
	a := create(t, newAddon(controllerNS, "doomed-"+ns, publish("1.0.0", gadgetsCRD(group, "v1:true:integer")), withTarget(ns)))
	waitPhase(t, a, capstanv1.PhaseSynced)
	held := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Gadget",
		"metadata": map[string]any{"namespace": doomed, "name": "g0", "finalizers": []any{"example.com/hold"}}, "spec": map[string]any{"size": int64(3)}}}
	eventually(t, 30*time.Second, "the held Gadget to be created", func() bool { return admin.Create(ctx, held) == nil })
	t.Cleanup(func() {
		_ = admin.Patch(ctx, held, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	if err := admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: doomed}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the held Gadget to be marked for deletion", func() bool {
		return admin.Get(ctx, client.ObjectKeyFromObject(held), held) == nil && held.GetDeletionTimestamp() != nil
	})

	url := publish("2.0.0", gadgetsCRD(group, "v1:true:integer+colour"))
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url })
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	if !hasNoticeSaying(got.Status.Plan, "1 more passed over: being deleted") {
		t.Errorf("the plan does not say the Gadget being deleted was left out: %+v", got.Status.Plan.Notices)
	}
}
