package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
)

// recreateChart is a chart whose upgrade changes what the API server
// refuses to change in place: a Deployment's selector, a StatefulSet's
// podManagementPolicy and a RoleBinding's roleRef.
var recreateChart = map[string]string{
	"templates/web.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web, track: {{ .Values.track }}}
  template:
    metadata:
      labels: {app: web, track: {{ .Values.track }}}
    spec:
      containers:
        - name: web
          image: registry.example/web:1.0
`,
	"templates/db.yaml": `apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  replicas: 1
  podManagementPolicy: {{ .Values.policy }}
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      containers:
        - name: db
          image: registry.example/db:1.0
`,
	"templates/rbac.yaml": `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: reader
rules:
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: writer
rules:
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [get, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: binding
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ .Values.role }}
subjects:
  - kind: ServiceAccount
    name: default
`,
}

// TestRecreateReplacesWhatCannotChangeInPlace: an upgrade that changes a
// Deployment's selector, a StatefulSet's podManagementPolicy and a
// RoleBinding's roleRef fails its plan, with nothing applied and a message
// that names spec.recreate. With spec.recreate the plan marks the three,
// and the sync deletes and creates them anew: the StatefulSet's pod runs
// on, adopted by the new one, and the Deployment's old ReplicaSet goes. A
// PersistentVolumeClaim is never deleted for a change, spec.recreate or
// not.
func TestRecreateReplacesWhatCannotChangeInPlace(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "recreateapp", version: "1.0.0", files: recreateChart})
	a := create(t, newAddon(controllerNS, "rc-"+ns[len(ns)-5:], url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Values = jsonValues("track: a\npolicy: OrderedReady\nrole: reader")
	})))
	synced := waitPhase(t, a, capstanv1.PhaseSynced)
	uid := func(apiVersion, kind, name string) types.UID {
		t.Helper()
		obj := live(t, apiVersion, kind, ns, name)
		if obj == nil {
			t.Fatalf("%s %s/%s does not exist", kind, ns, name)
		}
		return obj.GetUID()
	}
	web, db, binding, pod := uid("apps/v1", "Deployment", "web"), uid("apps/v1", "StatefulSet", "db"),
		uid("rbac.authorization.k8s.io/v1", "RoleBinding", "binding"), uid("v1", "Pod", "db-0")
	v2 := jsonValues("track: b\npolicy: Parallel\nrole: writer")

	// Without spec.recreate: refused, and nothing changes.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = v2 })
	failed := waitPhase(t, a, capstanv1.PhaseFailed)
	refusals := 0
	for _, o := range failed.Status.Plan.Objects {
		if o.Error != "" {
			refusals++
			if !strings.Contains(o.Error, "field is immutable") || !strings.HasSuffix(o.Error, "; the change needs the object deleted and created anew: set spec.recreate: true for the sync to do that, or mark the object kustomize.toolkit.fluxcd.io/force: enabled") {
				t.Fatalf("the refusal of %s should say why and what to do: %q", o.Describe(), o.Error)
			}
		}
	}
	if refusals != 3 || !strings.Contains(readyMessage(failed), "set spec.recreate: true") {
		t.Fatalf("the plan should refuse the three objects, and Ready say so: %s", describeStatus(failed))
	}
	if failed.Status.AppliedHash != synced.Status.AppliedHash || uid("apps/v1", "Deployment", "web") != web {
		t.Fatalf("a refused plan applied something: %s", describeStatus(failed))
	}

	// With it, held for approval first: the plan says what it recreates.
	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.Recreate = true
		cur.Spec.ManualSync = true
	})
	held := waitFor(t, a, 60*time.Second, "the plan held for approval", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseOutOfSync && cur.Status.ObservedGeneration == cur.Generation
	})
	marked := map[string]bool{}
	for _, o := range held.Status.Plan.Objects {
		if o.Recreate {
			if o.Action != capstanv1.ActionUpdate || o.Error != "" || !strings.Contains(o.Diff, "the sync deletes it and creates it anew") {
				t.Fatalf("%s: %+v", o.Describe(), o)
			}
			marked[o.Kind+"/"+o.Name] = true
		}
	}
	if len(marked) != 3 || !marked["Deployment/web"] || !marked["StatefulSet/db"] || !marked["RoleBinding/binding"] {
		t.Fatalf("the plan should mark the three objects to recreate, it marks %v: %s", marked, describeStatus(held))
	}
	if uid("apps/v1", "Deployment", "web") != web {
		t.Fatal("a held plan recreated the Deployment")
	}

	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.ManualSync = false })
	waitFor(t, a, 90*time.Second, "Synced with the new render", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.AppliedHash != synced.Status.AppliedHash
	})
	if uid("apps/v1", "Deployment", "web") == web || uid("apps/v1", "StatefulSet", "db") == db ||
		uid("rbac.authorization.k8s.io/v1", "RoleBinding", "binding") == binding {
		t.Fatal("an object refused in place was not created anew")
	}
	var events eventsv1.EventList
	if err := admin.List(ctx, &events, client.InNamespace(controllerNS)); err != nil {
		t.Fatal(err)
	}
	recreated := ""
	for _, e := range events.Items {
		if e.Regarding.Name == a.Name && e.Reason == "Recreated" {
			recreated = e.Note
		}
	}
	if want := "(spec.recreate, or the mark named): Deployment " + ns + "/web, RoleBinding " + ns + "/binding, StatefulSet " + ns + "/db."; !strings.Contains(recreated, want) {
		t.Errorf("the Recreated event says %q; want %q", recreated, want)
	}
	if got := live(t, "rbac.authorization.k8s.io/v1", "RoleBinding", ns, "binding").Object["roleRef"].(map[string]any)["name"]; got != "writer" {
		t.Fatalf("roleRef %v", got)
	}
	// The StatefulSet's pod ran on, and the new StatefulSet holds it.
	p := live(t, "v1", "Pod", ns, "db-0")
	if p == nil || p.GetUID() != pod {
		t.Fatalf("the StatefulSet's pod was not kept: %v", p)
	}
	if owners := p.GetOwnerReferences(); len(owners) != 1 || owners[0].UID != uid("apps/v1", "StatefulSet", "db") {
		t.Fatalf("the pod's owners %v: the new StatefulSet should have adopted it", owners)
	}
	// The Deployment's old ReplicaSet, whose selector the new one does not
	// match, goes with the old Deployment.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var rs appsv1.ReplicaSetList
		if err := admin.List(ctx, &rs, client.InNamespace(ns), client.MatchingLabels{"app": "web", "track": "a"}); err != nil {
			t.Fatal(err)
		}
		if len(rs.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the old Deployment's ReplicaSet %s is left running", rs.Items[0].Name)
		}
		time.Sleep(500 * time.Millisecond)
	}

	// A claim is never deleted for a change.
	claimURL, _ := charts.publish(t, chart{name: "recreateclaim", version: "1.0.0", files: map[string]string{
		"templates/claim.yaml": "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\nspec:\n  accessModes: [{{ .Values.mode }}]\n  resources:\n    requests:\n      storage: 1Gi\n",
	}})
	c := create(t, newAddon(controllerNS, "rcc-"+ns[len(ns)-5:], claimURL, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.ReleaseName = "claim"
		s.Recreate = true
		s.Values = jsonValues("mode: ReadWriteOnce")
	})))
	first := waitFor(t, c, 60*time.Second, "the claim applied", func(cur *capstanv1.Addon) bool { return cur.Status.AppliedHash != "" })
	claim := uid("v1", "PersistentVolumeClaim", "data")
	update(t, c, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("mode: ReadOnlyMany") })
	refused := waitFor(t, c, 60*time.Second, "the change of the claim refused", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseFailed && cur.Status.ObservedGeneration == cur.Generation
	})
	if msg := readyMessage(refused); !strings.Contains(msg, "Capstan never deletes a PersistentVolumeClaim, so this change is one to make by hand") {
		t.Fatalf("the refusal of a claim's change: %s", describeStatus(refused))
	}
	if refused.Status.AppliedHash != first.Status.AppliedHash || uid("v1", "PersistentVolumeClaim", "data") != claim {
		t.Fatal("a claim was changed or created anew")
	}
}

// jobChart is a chart of two Jobs whose images come from values: plain,
// and kept, marked helm.sh/resource-policy: keep.
var jobChart = map[string]string{
	"templates/jobs.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: plain\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n" +
		"      containers:\n        - name: run\n          image: registry.example/tools:{{ .Values.plain }}\n" +
		"---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: kept\n  annotations:\n    helm.sh/resource-policy: keep\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n" +
		"      containers:\n        - name: run\n          image: registry.example/tools:{{ .Values.kept }}\n",
}

// TestJobTemplateChangeKeepsKeptJobs upgrades Jobs whose pod template
// changes, which the API server refuses in place: the Job marked
// helm.sh/resource-policy: keep is never deleted for it (the plan fails,
// saying so), and the plain one is deleted and created anew, named in the
// Recreated event. An apply bound to a Job the plan did not see, and one of
// a kept Job, delete nothing.
func TestJobTemplateChangeKeepsKeptJobs(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "jobs", version: "1.0.0", files: jobChart})
	a := create(t, newAddon(controllerNS, "jobs-"+ns[len(ns)-5:], url, withTarget(ns), withValues("plain: \"1.0\"\nkept: \"1.0\"")))
	synced := waitPhase(t, a, capstanv1.PhaseSynced)
	uid := func(name string) types.UID {
		t.Helper()
		obj := live(t, "batch/v1", "Job", ns, name)
		if obj == nil {
			t.Fatalf("Job %s/%s does not exist", ns, name)
		}
		return obj.GetUID()
	}
	plain, kept := uid("plain"), uid("kept")

	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("plain: \"1.0\"\nkept: \"2.0\"") })
	failed := waitPhase(t, a, capstanv1.PhaseFailed)
	if !strings.Contains(describeStatus(failed), "it is marked helm.sh/resource-policy: keep, so Capstan does not delete it to change it") {
		t.Errorf("the plan should say the kept Job is not deleted for the change: %s", describeStatus(failed))
	}
	if uid("kept") != kept || uid("plain") != plain {
		t.Fatal("a Job was deleted for a change to a Job marked to be kept")
	}

	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("plain: \"2.0\"\nkept: \"1.0\"") })
	waitFor(t, a, 90*time.Second, "Synced with the new plain Job", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.AppliedHash != synced.Status.AppliedHash && cur.Status.ObservedGeneration == cur.Generation
	})
	if uid("plain") == plain || uid("kept") != kept {
		t.Fatal("the plain Job should be created anew, and the kept one left")
	}
	eventually(t, 30*time.Second, "a Recreated event that names the plain Job", func() bool {
		return strings.Contains(addonEvent(t, a, "Recreated"), "Job "+ns+"/plain (its pod template changed)")
	})

	// The applier itself: a delete bound to a Job the plan did not see,
	// and the Job marked to be kept, are refused.
	applier := &apply.Applier{Client: admin}
	changed := func(name, image string) *unstructured.Unstructured {
		obj := live(t, "batch/v1", "Job", ns, name)
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("batch/v1")
		u.SetKind("Job")
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetAnnotations(obj.GetAnnotations())
		u.Object["spec"] = map[string]any{"template": map[string]any{"spec": map[string]any{"restartPolicy": "Never",
			"containers": []any{map[string]any{"name": "run", "image": image}}}}}
		return u
	}
	current := uid("plain")
	obj := changed("plain", "registry.example/tools:3.0")
	err := applier.Ordered(ctx, []*unstructured.Unstructured{obj}, map[*unstructured.Unstructured]types.UID{obj: "not-the-one-the-plan-saw"}, nil)
	if err == nil || !strings.Contains(err.Error(), "deleted and created again since the plan") {
		t.Errorf("an apply bound to another Job's UID: %v; want it refused", err)
	}
	if uid("plain") != current {
		t.Error("an apply bound to another Job's UID deleted the Job")
	}
	if err := applier.Apply(ctx, changed("kept", "registry.example/tools:3.0")); err == nil || !strings.Contains(err.Error(), "helm.sh/resource-policy: keep") {
		t.Errorf("applying a new pod template to the kept Job: %v; want it refused", err)
	}
	if uid("kept") != kept {
		t.Error("applying a new pod template deleted the Job marked to be kept")
	}
}
