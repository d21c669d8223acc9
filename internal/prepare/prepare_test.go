package prepare

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/render"
)

func obj(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// scopes is the lookup of a cluster that serves ConfigMaps, Jobs and
// ClusterRoles, and nothing else.
func scopes(gvk schema.GroupVersionKind) (bool, bool, error) {
	switch gvk.Kind {
	case "ConfigMap", "Job", "Deployment":
		return true, true, nil
	case "ClusterRole", "Namespace":
		return false, true, nil
	}
	return false, false, nil
}

func testRender(t *testing.T) *render.Result {
	return &render.Result{
		Objects: []*unstructured.Unstructured{
			obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}"),
			obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: elsewhere, namespace: other}"),
			obj(t, "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: reader, namespace: wrong}"),
			obj(t, "apiVersion: batch/v1\nkind: Job\nmetadata: {name: migrate}\nspec: {ttlSecondsAfterFinished: 60, template: {spec: {containers: [{name: m, image: m}]}}}"),
			obj(t, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}"),
			obj(t, "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: gadgets.example.com}\nspec: {group: example.com, scope: Namespaced, names: {kind: Gadget}}"),
			obj(t, "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}"),
		},
		Hooks: []render.Hook{{Object: obj(t, "apiVersion: batch/v1\nkind: Job\nmetadata: {name: hook}\nspec: {ttlSecondsAfterFinished: 5, template: {spec: {containers: [{name: h, image: h}]}}}")}},
	}
}

func TestPrepareClusterProfile(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "capstan-system", UID: "u1"},
		Spec: capstanv1.AddonSpec{CreateNamespace: true}}
	rendered := testRender(t)
	res, err := Prepare(Input{Addon: addon, Profile: capstanv1.ProfileCluster, Namespace: "apps", Render: rendered, Scope: scopes})
	if err != nil {
		t.Fatal(err)
	}
	if res.CreatedNamespace != "apps" || res.Objects[0].GetKind() != "Namespace" || res.Objects[0].GetName() != "apps" {
		t.Fatalf("the first object is %s %s; want the Namespace apps that createNamespace adds", res.Objects[0].GetKind(), res.Objects[0].GetName())
	}
	wantNS := map[string]string{"apps": "", "settings": "apps", "elsewhere": "other", "reader": "", "migrate": "apps", "w": "", "gadgets.example.com": "", "g": "apps"}
	for _, o := range res.Objects {
		if want, ok := wantNS[o.GetName()]; ok && o.GetNamespace() != want && o.GetKind() != "CustomResourceDefinition" {
			t.Errorf("%s %s is in namespace %q; want %q", o.GetKind(), o.GetName(), o.GetNamespace(), want)
		}
		l := o.GetLabels()
		if l[capstanv1.AddonLabel] != "demo" || l[capstanv1.AddonNamespaceLabel] != "capstan-system" || l[capstanv1.ManagedByLabel] != "capstan" {
			t.Errorf("%s %s has labels %v; want Capstan's", o.GetKind(), o.GetName(), l)
		}
		if len(o.GetOwnerReferences()) > 0 {
			t.Errorf("%s %s has owner references in the cluster profile", o.GetKind(), o.GetName())
		}
	}
	for _, h := range res.Hooks {
		if len(h.Object.GetOwnerReferences()) > 0 {
			t.Errorf("the hook %s %s has owner references in the cluster profile", h.Object.GetKind(), h.Object.GetName())
		}
	}
	job := res.Objects[4]
	if _, found, _ := unstructured.NestedFieldNoCopy(job.Object, "spec", "ttlSecondsAfterFinished"); found || job.GetName() != "migrate" {
		t.Errorf("the Job %s keeps ttlSecondsAfterFinished", job.GetName())
	}
	hook := res.Hooks[0].Object
	if ttl, found, _ := unstructured.NestedFieldNoCopy(hook.Object, "spec", "ttlSecondsAfterFinished"); !found || ttl != hooks.MinJobTTLSeconds || hook.GetNamespace() != "apps" {
		t.Errorf("the hook Job: ttl %v (found %v), namespace %q; a hook keeps a TTL, raised to the minimum, and gets the namespace", ttl, found, hook.GetNamespace())
	}
	// The render is left as it was.
	if rendered.Objects[0].GetNamespace() != "" || rendered.Objects[0].GetLabels() != nil || rendered.Hooks[0].Object.GetNamespace() != "" {
		t.Error("Prepare changed the render")
	}
}

// TestPrepareRestrictedProfile checks that a restricted add-on's objects
// and hooks alike are owned by the Addon, so that its removal leaves none
// running, all but the kinds Capstan never deletes.
func TestPrepareRestrictedProfile(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "tenant", UID: "u1"}}
	rendered := testRender(t)
	rendered.Hooks = append(rendered.Hooks,
		render.Hook{Object: obj(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: lingers}")},
		render.Hook{Object: obj(t, "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data}")})
	res, err := Prepare(Input{Addon: addon, Profile: capstanv1.ProfileRestricted, Namespace: "tenant", Render: rendered, Scope: scopes})
	if err != nil {
		t.Fatal(err)
	}
	if res.CreatedNamespace != "" {
		t.Error("a restricted add-on got a Namespace")
	}
	for _, o := range res.Objects {
		owned := false
		for _, ref := range o.GetOwnerReferences() {
			owned = owned || ref.UID == "u1"
		}
		neverDeleted := o.GetKind() == "CustomResourceDefinition"
		if owned == neverDeleted {
			t.Errorf("%s %s: owned by the Addon = %v", o.GetKind(), o.GetName(), owned)
		}
	}
	if len(res.Hooks) != 3 {
		t.Fatalf("%d hooks; want 3", len(res.Hooks))
	}
	for _, h := range res.Hooks {
		owned := false
		for _, ref := range h.Object.GetOwnerReferences() {
			owned = owned || ref.UID == "u1" && ref.Kind == "Addon" && ref.Name == "demo"
		}
		neverDeleted := h.Object.GetKind() == "PersistentVolumeClaim"
		if owned == neverDeleted {
			t.Errorf("the hook %s %s: owned by the Addon = %v", h.Object.GetKind(), h.Object.GetName(), owned)
		}
	}
	job := res.Objects[3]
	if v, _, _ := unstructured.NestedBool(job.Object, "spec", "template", "spec", "securityContext", "runAsNonRoot"); !v {
		t.Errorf("the Job's pod was not hardened: %v", job.Object["spec"])
	}
}

func TestPrepareReturnsLookupErrors(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "apps"}}
	boom := errors.New("discovery is down")
	_, err := Prepare(Input{Addon: addon, Profile: capstanv1.ProfileCluster, Namespace: "apps", Render: testRender(t),
		Scope: func(schema.GroupVersionKind) (bool, bool, error) { return false, false, boom }})
	if !errors.Is(err, boom) {
		t.Errorf("Prepare = %v; want the lookup's error", err)
	}
	if res, err := Prepare(Input{Addon: addon}); err != nil || res.Objects != nil {
		t.Errorf("Prepare of no render = %v, %v; want nothing", res, err)
	}
}

// TestPrepareLooksUpEachKindOnce: a render of many objects of a few kinds
// asks the cluster's REST mapper once per kind, and an answer that failed
// is asked again.
func TestPrepareLooksUpEachKindOnce(t *testing.T) {
	var docs []string
	for i := range 12 {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c%d}", i))
	}
	docs = append(docs, "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r}")
	rendered := &render.Result{}
	for _, d := range docs {
		rendered.Objects = append(rendered.Objects, obj(t, d))
	}
	asked := map[string]int{}
	lookup := func(gvk schema.GroupVersionKind) (bool, bool, error) {
		asked[gvk.Kind]++
		return scopes(gvk)
	}
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "apps"}}
	res, err := Prepare(Input{Addon: addon, Profile: capstanv1.ProfileCluster, Namespace: "apps", Render: rendered, Scope: lookup})
	if err != nil {
		t.Fatal(err)
	}
	if asked["ConfigMap"] != 1 || asked["ClusterRole"] != 1 {
		t.Errorf("lookups per kind = %v; want one each", asked)
	}
	for _, o := range res.Objects {
		if want := map[string]string{"ConfigMap": "apps", "ClusterRole": ""}[o.GetKind()]; o.GetNamespace() != want {
			t.Errorf("%s %s in namespace %q; want %q", o.GetKind(), o.GetName(), o.GetNamespace(), want)
		}
	}

	failures := 0
	flaky := ScopeLookup(func(gvk schema.GroupVersionKind) (bool, bool, error) {
		if failures < 1 {
			failures++
			return false, false, errors.New("discovery is down")
		}
		return scopes(gvk)
	}).kept()
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	if _, _, err := flaky(gvk); err == nil {
		t.Fatal("the first lookup did not fail")
	}
	if namespaced, known, err := flaky(gvk); err != nil || !namespaced || !known {
		t.Errorf("the lookup after a failure = %v, %v, %v; want it asked again", namespaced, known, err)
	}
}

// TestPrepareLeavesOutWhatIsNeverApplied: an object marked as Flux marks
// it never to be applied is left out of the objects, with what the render
// left out, each in its namespace, so that the inventory of an earlier
// render can be matched with it.
func TestPrepareLeavesOutWhatIsNeverApplied(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "capstan-system"}, Spec: capstanv1.AddonSpec{CreateNamespace: true}}
	ignore := "annotations: {kustomize.toolkit.fluxcd.io/ssa: ignore}"
	rendered := &render.Result{
		Objects: []*unstructured.Unstructured{
			obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}"),
			obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: theirs, "+ignore+"}"),
			obj(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: apps, "+ignore+"}"),
		},
		Hooks: []render.Hook{{Object: obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: hooked, "+ignore+"}")}},
		Left:  []*unstructured.Unstructured{obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: local, annotations: {argocd.argoproj.io/hook: Skip}}")},
	}
	res, err := Prepare(Input{Addon: addon, Profile: capstanv1.ProfileCluster, Namespace: "apps", Render: rendered, Scope: scopes})
	if err != nil {
		t.Fatal(err)
	}
	// NOTE: the Namespace marked Ignore is not the render's: the one
	// createNamespace asks for is added.
	if len(res.Objects) != 2 || res.Objects[0].GetName() != "apps" || res.CreatedNamespace != "apps" || res.Objects[1].GetName() != "settings" {
		t.Errorf("objects %v, created namespace %q; want apps (created) and settings", res.Objects, res.CreatedNamespace)
	}
	if len(res.Hooks) != 0 {
		t.Errorf("hooks %v; want none", res.Hooks)
	}
	var left []string
	for _, o := range res.Left {
		left = append(left, o.GetNamespace()+"/"+o.GetName())
	}
	if !slices.Equal(left, []string{"apps/local", "apps/theirs", "/apps", "apps/hooked"}) {
		t.Errorf("left out %v; want apps/local, apps/theirs, the Namespace apps and apps/hooked", left)
	}
	if rendered.Objects[1].GetNamespace() != "" {
		t.Error("Prepare changed the render")
	}
}

// TestEmptyRenderPrunesNothingWithCreateNamespace prepares a render, then
// asks the prune what it deletes: the Namespace that createNamespace adds
// is not part of the render, so an empty render still prunes nothing; nor
// does a render of the Namespace alone.
func TestEmptyRenderPrunesNothingWithCreateNamespace(t *testing.T) {
	inventory := []capstanv1.ObjectRef{
		{APIVersion: "v1", Kind: "Namespace", Name: "apps"},
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: "settings"},
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: "dropped"},
	}
	settings := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}"
	for _, tc := range []struct {
		name            string
		createNamespace bool
		profile         capstanv1.Profile
		objects         []string
		want            []string
	}{
		{name: "empty render", want: nil},
		{name: "empty render with createNamespace", createNamespace: true, want: nil},
		{name: "empty restricted render with createNamespace", createNamespace: true, profile: capstanv1.ProfileRestricted, want: nil},
		{name: "render with createNamespace", createNamespace: true, objects: []string{settings}, want: []string{"dropped"}},
		{name: "render without createNamespace", objects: []string{settings}, want: []string{"dropped"}},
		// A render of nothing a prune may delete is as empty as one of
		// nothing (apply.PruneSet).
		{name: "render of only its namespace", createNamespace: true, objects: []string{"apiVersion: v1\nkind: Namespace\nmetadata: {name: apps}"},
			want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "capstan-system"},
				Spec: capstanv1.AddonSpec{CreateNamespace: tc.createNamespace}}
			rendered := &render.Result{}
			for _, doc := range tc.objects {
				rendered.Objects = append(rendered.Objects, obj(t, doc))
			}
			profile := tc.profile
			if profile == "" {
				profile = capstanv1.ProfileCluster
			}
			res, err := Prepare(Input{Addon: addon, Profile: profile, Namespace: "apps", Render: rendered, Scope: scopes})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range apply.PruneSet(inventory, RenderedRefs(res.Objects, res.CreatedNamespace)) {
				got = append(got, r.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("the prune deletes %v, want %v", got, tc.want)
			}
		})
	}
}

// TestHookJobTTL raises a hook Job's ttlSecondsAfterFinished to the
// minimum the hook runner needs to read how the Job ended, and leaves one
// that is long enough, a Job with none, what is not a Job and a value that
// is not a number as they are.
func TestHookJobTTL(t *testing.T) {
	floor := hooks.MinJobTTLSeconds
	for _, tc := range []struct {
		name     string
		manifest string
		want     any // nil: no ttlSecondsAfterFinished
	}{
		{name: "zero, deleted as it finishes", manifest: "apiVersion: batch/v1\nkind: Job\nmetadata: {name: h}\nspec: {ttlSecondsAfterFinished: 0}", want: floor},
		{name: "a few seconds", manifest: "apiVersion: batch/v1\nkind: Job\nmetadata: {name: h}\nspec: {ttlSecondsAfterFinished: 30}", want: floor},
		{name: "one second below the minimum", manifest: fmt.Sprintf("apiVersion: batch/v1\nkind: Job\nmetadata: {name: h}\nspec: {ttlSecondsAfterFinished: %d}", floor-1), want: floor},
		{name: "the minimum", manifest: fmt.Sprintf("apiVersion: batch/v1\nkind: Job\nmetadata: {name: h}\nspec: {ttlSecondsAfterFinished: %d}", floor), want: float64(floor)},
		{name: "an hour", manifest: "apiVersion: batch/v1\nkind: Job\nmetadata: {name: h}\nspec: {ttlSecondsAfterFinished: 3600}", want: float64(3600)},
		{name: "none: kept until its delete policy", manifest: "apiVersion: batch/v1\nkind: Job\nmetadata: {name: h}\nspec: {}"},
		{name: "not a number, for the API server to refuse", manifest: "apiVersion: batch/v1\nkind: Job\nmetadata: {name: h}\nspec: {ttlSecondsAfterFinished: soon}", want: "soon"},
		{name: "not a batch Job", manifest: "apiVersion: example.com/v1\nkind: Job\nmetadata: {name: h}\nspec: {ttlSecondsAfterFinished: 0}", want: float64(0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "apps"}}
			rendered := &render.Result{Hooks: []render.Hook{{Object: obj(t, tc.manifest), Events: []string{"pre-install"}}}}
			res, err := Prepare(Input{Addon: addon, Profile: capstanv1.ProfileCluster, Namespace: "apps", Render: rendered, Scope: scopes})
			if err != nil {
				t.Fatal(err)
			}
			got, found, _ := unstructured.NestedFieldNoCopy(res.Hooks[0].Object.Object, "spec", "ttlSecondsAfterFinished")
			if tc.want == nil {
				if found {
					t.Errorf("ttlSecondsAfterFinished %v was added", got)
				}
				return
			}
			if !found || got != tc.want {
				t.Errorf("ttlSecondsAfterFinished = %v (%T), want %v (%T)", got, got, tc.want, tc.want)
			}
		})
	}
}

// A label that is not a string made GetLabels read none at all, and the
// object was applied with Capstan's labels alone: every label its source
// gave it was lost, without a word.
func TestPrepareRefusesLabelsThatAreNotStrings(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "capstan-system", UID: "u1"}}
	rendered := &render.Result{Objects: []*unstructured.Unstructured{
		obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dashboards, labels: {app: x, tier: 1}}"),
	}}
	res, err := Prepare(Input{Addon: addon, Profile: capstanv1.ProfileCluster, Namespace: "apps", Render: rendered, Scope: scopes})
	if err == nil {
		t.Fatalf("prepared with labels %v, want the label tier refused", res.Objects[0].GetLabels())
	}
	for _, want := range []string{"ConfigMap dashboards", "label tier", "quote the value"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error = %v, want it to name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "spec.patches") {
		t.Errorf("error = %v, names spec.patches, which the Addon has none of", err)
	}

	// The render refuses such a label itself: past it, a patch set it.
	addon.Spec.Patches = []capstanv1.Patch{{Patch: `[{"op": "add", "path": "/metadata/labels/tier", "value": 1}]`}}
	_, err = Prepare(Input{Addon: addon, Profile: capstanv1.ProfileCluster, Namespace: "apps", Render: rendered, Scope: scopes})
	if want := "prepare: after spec.patches, ConfigMap dashboards: the label tier is a number, not a string: quote the value in the patch that sets it"; err == nil || err.Error() != want {
		t.Errorf("with spec.patches, error = %v, want %q", err, want)
	}
}

// A namespaced object that names no namespace is put in the target one,
// where the same object may already be, written with it: only then are
// they the same object, refused rather than applied over each other on
// every sync.
func TestPrepareRefusesAnObjectTwice(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "capstan-system", UID: "u1"}}
	rendered := &render.Result{Objects: []*unstructured.Unstructured{
		obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: '1'}"),
		obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: apps}\ndata: {a: '2'}"),
	}}
	for _, profile := range []capstanv1.Profile{capstanv1.ProfileCluster, capstanv1.ProfileRestricted} {
		_, err := Prepare(Input{Addon: addon, Profile: profile, Namespace: "apps", Render: rendered, Scope: scopes})
		if err == nil || !strings.Contains(err.Error(), "ConfigMap apps/settings twice") {
			t.Errorf("%s: error = %v, want the ConfigMap refused", profile, err)
		}
	}
}
