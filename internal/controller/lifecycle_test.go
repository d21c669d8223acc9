package controller_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/install"
)

func TestAdoptIdenticalChangesNothing(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	name := "adopt-" + ns
	// What already runs: created by someone else, exactly as the chart renders it.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"greeting": "hello"}}
	if err := admin.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	url, _ := charts.publish(t, chart{name: "adopt", version: "1.0.0", files: map[string]string{
		"values.yaml":       "greeting: hello\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  greeting: {{ .Values.greeting }}\n",
	}})
	a := create(t, newAddon(controllerNS, name, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) { s.Adopt = true })))
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	// The adoption writes the owner labels, and only them: they mark the
	// object as this add-on's (TestAdoptionMarksTheObjectAsTheAddonsOwn).
	adopted := live(t, "v1", "ConfigMap", ns, name)
	if d, _, _ := unstructured.NestedStringMap(adopted.Object, "data"); len(d) != 1 || d["greeting"] != "hello" || !got.LabelledFor(adopted.GetLabels()) {
		t.Fatalf("adopting an identical object changed more than its owner labels: labels %v, data %v", adopted.GetLabels(), d)
	}
	before := adopted.GetResourceVersion()
	if len(got.Status.Inventory) != 1 {
		t.Fatalf("the adopted object belongs in the inventory: %v", got.Status.Inventory)
	}
	// Later syncs leave it alone too: it lacks Capstan's other labels
	// because Capstan never applied it, not because someone removed them.
	update(t, got, func(cur *capstanv1.Addon) { cur.Spec.SyncRequest++ })
	got = waitFor(t, a, 60*time.Second, "a later sync", func(cur *capstanv1.Addon) bool {
		return cur.Status.LastSyncRequest == cur.Spec.SyncRequest && cur.Status.Phase == capstanv1.PhaseSynced
	})
	if after := live(t, "v1", "ConfigMap", ns, name).GetResourceVersion(); after != before {
		t.Fatalf("a sync after the adoption changed the object: resourceVersion %s -> %s; plan %+v", before, after, got.Status.Plan.Objects)
	}
}

func TestAdoptWithChangesBlocksUntilAllowed(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	name := "adoptchg-" + ns
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"greeting": "hi"}}
	if err := admin.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	url, _ := charts.publish(t, chart{name: "adopt", version: "1.0.1", files: map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  greeting: hello\n",
	}})
	a := create(t, newAddon(controllerNS, name, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) { s.Adopt = true })))
	got := waitPhase(t, a, capstanv1.PhaseBlocked)
	o := got.Status.Plan.Objects[0]
	if !o.Adopted || o.Action != capstanv1.ActionUpdate || !strings.Contains(o.Diff, "-  greeting: hi") || !strings.Contains(o.Diff, "+  greeting: hello") {
		t.Fatalf("the plan should show the adoption's diff: %+v", o)
	}
	if live(t, "v1", "ConfigMap", ns, name).Object["data"].(map[string]any)["greeting"] != "hi" {
		t.Fatal("a blocked adoption changed the object")
	}
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.AllowAdoptChanges = true })
	waitPhase(t, a, capstanv1.PhaseSynced)
	if live(t, "v1", "ConfigMap", ns, name).Object["data"].(map[string]any)["greeting"] != "hello" {
		t.Fatal("allowAdoptChanges did not apply the change")
	}
}

// TestAdoptionTakesOverHelmsFields: a move from Helm. Adopted, with or
// without a change, the fields the chart renders become Capstan's, and the
// release's manager keeps only those the chart never rendered: the chart's
// next version that drops a field removes it, as helm upgrade would have,
// and what Capstan never rendered stays.
func TestAdoptionTakesOverHelmsFields(t *testing.T) {
	for _, tc := range []struct {
		name    string
		live    map[string]string // as the Helm release left it
		chart   string            // data the chart renders first
		changes bool
	}{
		{name: "unchanged", live: map[string]string{"greeting": "hello", "kept": "mine"}, chart: "  greeting: hello\n"},
		{name: "changed", live: map[string]string{"greeting": "hello", "colour": "red", "kept": "mine"}, chart: "  greeting: hello\n  colour: blue\n", changes: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			ctx := context.Background()
			name := "fromhelm-" + tc.name + ns[strings.LastIndex(ns, "-"):]
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: tc.live}
			if err := admin.Create(ctx, cm, client.FieldOwner("helm")); err != nil {
				t.Fatal(err)
			}
			publish := func(version, data string) string {
				url, _ := charts.publish(t, chart{name: "fromhelm", version: version, files: map[string]string{
					"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n" + data,
				}})
				return url
			}
			a := create(t, newAddon(controllerNS, name, publish("1.0.0", tc.chart), withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
				s.Adopt, s.AllowAdoptChanges = true, tc.changes
			})))
			waitPhase(t, a, capstanv1.PhaseSynced)
			for _, f := range live(t, "v1", "ConfigMap", ns, name).GetManagedFields() {
				if f.Manager == "helm" && strings.Contains(f.FieldsV1.GetRawString(), "f:greeting") {
					t.Errorf("the release's manager still owns a field the chart renders: %s", f.FieldsV1.GetRawString())
				}
			}
			// The chart's next version renders another key instead.
			update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = publish("2.0.0", "  other: value\n") })
			waitPhase(t, a, capstanv1.PhaseSynced)
			data, _, _ := unstructured.NestedStringMap(live(t, "v1", "ConfigMap", ns, name).Object, "data")
			want := map[string]string{"other": "value", "kept": "mine"}
			if !maps.Equal(data, want) {
				t.Fatalf("after the chart dropped its keys, data = %v, want %v", data, want)
			}
		})
	}
}

// TestIgnoredFieldsStayTheirOwners: a field that spec.ignore leaves to
// whoever manages it (here one a person set with kubectl, which the chart
// never renders) is sent as it runs, but never taken from its owner: when
// the rule goes, the field stays.
func TestIgnoredFieldsStayTheirOwners(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	name := "ignored" + ns[strings.LastIndex(ns, "-"):]
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"greeting": "hello", "extra": "mine"}}
	if err := admin.Create(ctx, cm, client.FieldOwner("kubectl-client-side-apply")); err != nil {
		t.Fatal(err)
	}
	publish := func(version, data string) string {
		url, _ := charts.publish(t, chart{name: "ignored", version: version, files: map[string]string{
			"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n" + data,
		}})
		return url
	}
	a := create(t, newAddon(controllerNS, name, publish("1.0.0", "  greeting: hello\n"), withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Adopt = true
		s.Ignore = []capstanv1.IgnoreRule{{Paths: []string{"/data/extra"}, Target: capstanv1.IgnoreTarget{Kind: "ConfigMap"}}}
	})))
	waitPhase(t, a, capstanv1.PhaseSynced)
	// The rule goes, and the chart's next version changes the object.
	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.Ignore = nil
		cur.Spec.Chart.URL = publish("2.0.0", "  greeting: hello\n  other: value\n")
	})
	waitPhase(t, a, capstanv1.PhaseSynced)
	data, _, _ := unstructured.NestedStringMap(live(t, "v1", "ConfigMap", ns, name).Object, "data")
	if want := map[string]string{"greeting": "hello", "other": "value", "extra": "mine"}; !maps.Equal(data, want) {
		t.Fatalf("after the ignore rule went, data = %v, want %v", data, want)
	}
}

// TestExistingObjectWithoutAdoptBlocks: an object that runs already,
// here one a Helm release installed, blocks the add-on until spec.adopt
// is set, and the plan says that Helm still counts it as its own, and how
// to let the release go without deleting it.
func TestExistingObjectWithoutAdoptBlocks(t *testing.T) {
	ns := newNamespace(t)
	name := "noadopt-" + ns
	if err := admin.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Annotations: map[string]string{"meta.helm.sh/release-name": "old", "meta.helm.sh/release-namespace": ns}}}); err != nil {
		t.Fatal(err)
	}
	url, _ := charts.publish(t, chart{name: "adopt", version: "1.0.2", files: map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n",
	}})
	a := create(t, newAddon(controllerNS, name, url, withTarget(ns)))
	got := waitPhase(t, a, capstanv1.PhaseBlocked)
	if !strings.Contains(condition(got, capstanv1.ConditionReady).Message, "spec.adopt") {
		t.Fatalf("the message should say how to adopt: %s", condition(got, capstanv1.ConditionReady).Message)
	}
	if !slices.ContainsFunc(got.Status.Plan.Notices, func(n capstanv1.Notice) bool {
		return strings.Contains(n.Message, "still marked as its own by Helm release "+ns+"/old") && strings.Contains(n.Message, "owner=helm,name=old")
	}) {
		t.Errorf("the plan should say that Helm release %s/old still holds the object: %+v", ns, got.Status.Plan.Notices)
	}
}

// bindVolume creates a PersistentVolume reserved for the claim ns/name, as
// an admin provisions one by hand, so the claim binds with no provisioner.
func bindVolume(t *testing.T, ns, name string) {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + ns + "-" + name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: name},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/nonexistent/" + ns}},
		},
	}
	if err := admin.Create(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), pv) })
}

func pruneChart(version string, withExtra bool) chart {
	files := map[string]string{
		"templates/keep.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep\n",
	}
	if withExtra {
		files["templates/extra.yaml"] = `apiVersion: v1
kind: ConfigMap
metadata:
  name: dropped
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Namespace
metadata:
  name: {{ .Release.Name }}-extra
---
` + crdYAML("Widget{{ .Values.suffix }}", "widgets{{ .Values.suffix }}")
	}
	return chart{name: "prune", version: version, files: files}
}

func TestPruneNeverDeletesStatefulKinds(t *testing.T) {
	ns := newNamespace(t)
	suffix := strings.ReplaceAll(ns[len(ns)-5:], "-", "")
	// The chart's claim is Current (Bound) once a volume takes it: no
	// provisioner runs here, so a volume waits for it, bound ahead to it.
	bindVolume(t, ns, "data")
	url1, _ := charts.publish(t, pruneChart("1.0.0", true))
	name := "prune-" + ns
	a := create(t, newAddon(controllerNS, name, url1, withTarget(ns), withValues("suffix: x"+suffix),
		withSpec(func(s *capstanv1.AddonSpec) { s.Prune = true })))
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	if len(got.Status.Inventory) != 5 {
		t.Fatalf("inventory %v", got.Status.Inventory)
	}
	crdName := "widgetsx" + suffix + ".example.com"
	url2, _ := charts.publish(t, pruneChart("2.0.0", false))
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url2 })
	got = waitFor(t, a, 90*time.Second, "the prune", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.ObservedGeneration == cur.Generation && live(t, "v1", "ConfigMap", ns, "dropped") == nil
	})
	if live(t, "v1", "PersistentVolumeClaim", ns, "data") == nil {
		t.Fatal("a PersistentVolumeClaim was pruned")
	}
	if live(t, "v1", "Namespace", "", name+"-extra") == nil {
		t.Fatal("a Namespace was pruned")
	}
	if live(t, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", crdName) == nil {
		t.Fatal("a CustomResourceDefinition was pruned")
	}
	if live(t, "v1", "ConfigMap", ns, "keep") == nil {
		t.Fatal("a rendered object was pruned")
	}
	// The inventory forgets what was pruned, and lets go of what is never
	// deleted once the render no longer has it: left running, it is the
	// add-on's no more, so another add-on may take it over.
	inv := map[string]bool{}
	for _, r := range got.Status.Inventory {
		inv[r.Kind+"/"+r.Name] = true
	}
	if inv["ConfigMap/dropped"] || inv["PersistentVolumeClaim/data"] || inv["Namespace/"+name+"-extra"] || !inv["ConfigMap/keep"] {
		t.Errorf("inventory after the prune: %v", got.Status.Inventory)
	}
}

func TestEmptyRenderPrunesNothing(t *testing.T) {
	ns := newNamespace(t)
	url1, _ := charts.publish(t, chart{name: "empty", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml": "{{ if .Values.enabled }}apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: only\n{{ end }}\n",
		"values.yaml":       "enabled: true\n",
	}})
	a := create(t, newAddon(controllerNS, "empty-"+ns, url1, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) { s.Prune = true })))
	waitPhase(t, a, capstanv1.PhaseSynced)
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("enabled: false") })
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	if live(t, "v1", "ConfigMap", ns, "only") == nil {
		t.Fatal("an empty render pruned everything")
	}
	if len(got.Status.Inventory) != 1 {
		t.Fatalf("the inventory should keep what was not pruned: %v", got.Status.Inventory)
	}
}

// TestRenderOfOnlyCRDsPrunesNothing turns a chart's templates off with its
// values: its crds/ still render, and that render is as empty as one that
// renders nothing, so its Deployment keeps running and stays in the
// inventory.
func TestRenderOfOnlyCRDsPrunesNothing(t *testing.T) {
	ns := newNamespace(t)
	suffix := strings.ReplaceAll(ns[len(ns)-5:], "-", "")
	url, _ := charts.publish(t, chart{name: "switched", version: "1.0.0", files: map[string]string{
		"crds/sprockets.yaml": crdYAML("Sprocket"+suffix, "sprockets"+suffix),
		"templates/deployment.yaml": `{{- if .Values.enabled }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: worker
spec:
  selector:
    matchLabels: {app: worker}
  template:
    metadata:
      labels: {app: worker}
    spec:
      containers:
        - name: worker
          image: nginx:1.27
{{- end }}
`,
		"values.yaml": "enabled: true\n",
	}})
	a := create(t, newAddon(controllerNS, "switched-"+ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) { s.Prune = true })))
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	if len(got.Status.Inventory) != 2 {
		t.Fatalf("inventory after the install: %v", got.Status.Inventory)
	}
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("enabled: false") })
	got = waitFor(t, a, 90*time.Second, "the render of only CRDs synced or held", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == cur.Generation && (cur.Status.Phase == capstanv1.PhaseSynced || cur.Status.Phase == capstanv1.PhaseOutOfSync)
	})
	if live(t, "apps/v1", "Deployment", ns, "worker") == nil {
		t.Fatalf("a render of only the chart's CRDs pruned its Deployment: %s", describeStatus(got))
	}
	if got.Status.Phase != capstanv1.PhaseSynced {
		t.Errorf("a render of only CRDs, which prunes nothing, is held: %s", describeStatus(got))
	}
	if p := got.Status.Plan; p == nil || p.Summary.Delete != 0 {
		t.Errorf("the plan of a render of only CRDs deletes something: %s", describeStatus(got))
	}
	if len(got.Status.Inventory) != 2 {
		t.Errorf("the inventory should keep what was not pruned: %v", got.Status.Inventory)
	}
}

func deleteAddon(t *testing.T, a *capstanv1.Addon) {
	t.Helper()
	if err := admin.Delete(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "the Addon to go", func() bool {
		err := admin.Get(context.Background(), client.ObjectKeyFromObject(a), &capstanv1.Addon{})
		return apierrors.IsNotFound(err)
	})
}

func TestDeletionPolicies(t *testing.T) {
	for _, tc := range []struct {
		name      string
		policy    capstanv1.DeletionPolicy
		uninstall bool
		wantGone  bool
	}{
		{name: "orphan-default", wantGone: false},
		{name: "delete", policy: capstanv1.DeletionDelete, wantGone: true},
		{name: "annotation", uninstall: true, wantGone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			url, _ := charts.publish(t, webChart("1.0.0", nil))
			a := create(t, newAddon(controllerNS, "del-"+ns, url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = tc.policy })))
			waitPhase(t, a, capstanv1.PhaseSynced)
			if tc.uninstall {
				update(t, a, func(cur *capstanv1.Addon) {
					cur.Annotations = map[string]string{capstanv1.UninstallAnnotation: "true"}
				})
			}
			deleteAddon(t, a)
			gone := live(t, "apps/v1", "Deployment", ns, a.Name) == nil && live(t, "v1", "ConfigMap", ns, a.Name+"-config") == nil
			if gone != tc.wantGone {
				t.Fatalf("software gone = %v, want %v", gone, tc.wantGone)
			}
		})
	}
}

func TestRestrictedAddonIsOwnedAndGarbageCollected(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := create(t, newAddon(ns, "web", url))
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	if got.Status.Profile != capstanv1.ProfileRestricted {
		t.Fatalf("profile %s", got.Status.Profile)
	}
	dep := live(t, "apps/v1", "Deployment", ns, "web")
	if refs := dep.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != got.UID {
		t.Fatalf("owner references %v", refs)
	}
	sc, _, _ := unstructured.NestedBool(dep.Object, "spec", "template", "spec", "securityContext", "runAsNonRoot")
	if !sc {
		t.Fatalf("restricted pods are hardened: runAsNonRoot not set")
	}
	// Remove the finalizer's work from the picture: delete the Addon and
	// see its objects go, by Capstan or by the garbage collector.
	deleteAddon(t, a)
	eventually(t, 60*time.Second, "the objects to be garbage-collected", func() bool {
		return live(t, "apps/v1", "Deployment", ns, "web") == nil && live(t, "v1", "Service", ns, "web") == nil
	})
}

func TestRestrictedViolationsBlock(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", map[string]string{
		"templates/role.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {{ .Release.Namespace }}-grab\nrules: []\n",
	}))
	a := create(t, newAddon(ns, "web", url))
	got := waitPhase(t, a, capstanv1.PhaseBlocked)
	if len(got.Status.Plan.Violations) == 0 || got.Status.Plan.Violations[0].Object.Kind != "ClusterRole" {
		t.Fatalf("violations %+v", got.Status.Plan.Violations)
	}
	if live(t, "v1", "ConfigMap", ns, "web-config") != nil {
		t.Fatal("a blocked add-on applied something")
	}
}

func TestImpersonation(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	roleName := "imp-" + ns
	own, err := client.New(cluster.ConfigFor(install.ControllerUser), client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	err = own.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: roleName + "-direct"}})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("the controller's own account must not create a ClusterRole: %v", err)
	}
	url, _ := charts.publish(t, chart{name: "rbac", version: "1.0.0", files: map[string]string{
		"templates/role.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: " + roleName + "\nrules: []\n",
	}})
	a := create(t, newAddon(controllerNS, roleName, url, withTarget(ns)))
	waitPhase(t, a, capstanv1.PhaseSynced)
	if live(t, "rbac.authorization.k8s.io/v1", "ClusterRole", "", roleName) == nil {
		t.Fatal("the cluster add-on did not create its ClusterRole")
	}
	checkAuditAttribution(t, roleName)
}

// TestCRDAndItsResourcesInOneSync installs an operator-style chart: a CRD in
// crds/ and a resource of it in templates/. The plan cannot dry-run the
// resource before its CRD exists, so it says so; the sync then creates the
// CRD, waits until it is Established and served, and applies the resource.
func TestCRDAndItsResourcesInOneSync(t *testing.T) {
	ns := newNamespace(t)
	suffix := strings.ReplaceAll(ns[len(ns)-5:], "-", "")
	kind, plural := "Gizmo"+suffix, "gizmos"+suffix
	url, _ := charts.publish(t, chart{name: "operator", version: "1.0.0", files: map[string]string{
		"crds/gizmos.yaml":     crdYAML(kind, plural),
		"templates/gizmo.yaml": "apiVersion: example.com/v1\nkind: " + kind + "\nmetadata:\n  name: first\nspec:\n  size: 3\n",
		// As with `helm install`, the chart's own CRD is in .Capabilities
		// on its first install.
		"templates/gated.yaml": "{{- if .Capabilities.APIVersions.Has \"example.com/v1/" + kind + "\" }}\napiVersion: example.com/v1\nkind: " + kind + "\nmetadata:\n  name: gated\n{{- end }}\n",
	}})
	a := create(t, newAddon(controllerNS, "operator-"+ns, url, withTarget(ns),
		withSpec(func(s *capstanv1.AddonSpec) { s.ManualSync = true })))
	got := waitPhase(t, a, capstanv1.PhaseOutOfSync)
	var planned *capstanv1.PlannedObject
	for i, o := range got.Status.Plan.Objects {
		if o.Kind == kind {
			planned = &got.Status.Plan.Objects[i]
		}
	}
	if planned == nil || planned.Action != capstanv1.ActionCreate || planned.Error != "" || planned.Namespace != ns || planned.Diff != "" {
		t.Fatalf("the plan's entry for the custom resource: %+v", planned)
	}
	if !slices.ContainsFunc(got.Status.Plan.Notices, func(n capstanv1.Notice) bool {
		return strings.Contains(n.Message, "2 object(s) to create wait for a Namespace or CustomResourceDefinition")
	}) {
		t.Errorf("no notice says the custom resource is checked once its CRD exists: %+v", got.Status.Plan.Notices)
	}
	update(t, got, func(cur *capstanv1.Addon) { cur.Spec.ApprovedPlan = cur.Status.Plan.Hash; cur.Spec.SyncRequest++ })
	got = waitFor(t, a, 90*time.Second, "the sync", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.AppliedHash != ""
	})
	cr := live(t, "example.com/v1", kind, ns, "first")
	if cr == nil {
		t.Fatalf("the custom resource was not created: %s", describeStatus(got))
	}
	if size, _, _ := unstructured.NestedInt64(cr.Object, "spec", "size"); size != 3 {
		t.Errorf("spec.size = %d, want 3", size)
	}
	if live(t, "example.com/v1", kind, ns, "gated") == nil {
		t.Errorf("the resource the chart renders when its CRD is in .Capabilities was not created: %s", describeStatus(got))
	}
	// Once the CRD exists, the resource is dry-run like any other object.
	update(t, got, func(cur *capstanv1.Addon) { cur.Spec.SyncRequest++ })
	got = waitFor(t, a, 60*time.Second, "a second plan", func(cur *capstanv1.Addon) bool {
		return cur.Status.Plan != nil && cur.Status.ObservedGeneration == cur.Generation && cur.Status.Phase == capstanv1.PhaseSynced
	})
	for _, o := range got.Status.Plan.Objects {
		if o.Kind == kind && (o.Action != capstanv1.ActionUnchanged || o.Diff != "") {
			t.Errorf("after the sync the custom resource plans %s %q", o.Action, o.Diff)
		}
	}
}

// crdYAML is a namespaced CustomResourceDefinition of group example.com
// that keeps any field.
func crdYAML(kind, plural string) string {
	return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ` + plural + `.example.com
spec:
  group: example.com
  names: {kind: ` + kind + `, plural: ` + plural + `}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`
}
