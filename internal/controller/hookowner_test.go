package controller_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// lingeringHooks are hooks a tenant's chart leaves behind after they ran:
// a Deployment and a ConfigMap at post-install, and a Job at pre-delete
// and one at post-delete, none with hook-succeeded.
var lingeringHooks = map[string]string{
	"templates/lingers.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: lingers
  annotations:
    helm.sh/hook: post-install
spec:
  replicas: 1
  selector:
    matchLabels: {app: lingers}
  template:
    metadata:
      labels: {app: lingers}
    spec:
      containers:
        - name: lingers
          image: nginx:1.27
`,
	"templates/notes.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\n  annotations:\n    helm.sh/hook: post-install\ndata: {a: b}\n",
	"templates/drain.yaml": `apiVersion: batch/v1
kind: Job
metadata:
  name: drain
  annotations:
    helm.sh/hook: pre-delete
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: drain
          image: registry.example/drain:1.0
`,
	"templates/cleanup.yaml": `apiVersion: batch/v1
kind: Job
metadata:
  name: cleanup
  annotations:
    helm.sh/hook: post-delete
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: cleanup
          image: registry.example/cleanup:1.0
`,
}

// TestRestrictedHookObjectsGoWithTheAddon installs a tenant's chart whose
// hooks leave objects behind, and removes it. Every hook object is owned
// by the Addon, as its other objects are, so removing it with Delete
// leaves nothing running: the post-install Deployment and ConfigMap, and
// the pre-delete and post-delete Jobs, which ran to completion while their
// owner was being deleted, are garbage-collected once the Addon is gone. Removed with
// Orphan, the hook objects are disowned first and stay. A chart's
// finalizer, which would keep them running, is refused (finalizers).
func TestRestrictedHookObjectsGoWithTheAddon(t *testing.T) {
	url, _ := charts.publish(t, webChart("1.0.0", lingeringHooks))
	ownedBy := func(o *unstructured.Unstructured, uid types.UID) bool {
		return o != nil && slices.ContainsFunc(o.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == uid })
	}
	install := func(t *testing.T, ns string, policy capstanv1.DeletionPolicy) *capstanv1.Addon {
		t.Helper()
		a := create(t, newAddon(ns, "web", url, withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = policy })))
		got := waitPhase(t, a, capstanv1.PhaseSynced)
		if got.Status.Profile != capstanv1.ProfileRestricted {
			t.Fatalf("profile %s; want restricted", got.Status.Profile)
		}
		for _, ref := range [][2]string{{"apps/v1", "Deployment"}, {"v1", "ConfigMap"}} {
			name := map[string]string{"Deployment": "lingers", "ConfigMap": "notes"}[ref[1]]
			if o := live(t, ref[0], ref[1], ns, name); !ownedBy(o, got.UID) {
				t.Errorf("the post-install hook's %s %s (found %v) is not owned by the Addon", ref[1], name, o != nil)
			}
		}
		return got
	}

	t.Run("delete", func(t *testing.T) {
		ns := newNamespace(t)
		a := install(t, ns, capstanv1.DeletionDelete)
		ran := watchCompleteJobs(t, ns, a.UID)
		deleteAddon(t, a)
		eventually(t, 60*time.Second, "the hook objects to be garbage-collected", func() bool {
			return live(t, "apps/v1", "Deployment", ns, "lingers") == nil && live(t, "v1", "ConfigMap", ns, "notes") == nil &&
				live(t, "batch/v1", "Job", ns, "drain") == nil && live(t, "batch/v1", "Job", ns, "cleanup") == nil
		})
		for _, job := range []string{"drain", "cleanup"} {
			if !ran(job) {
				t.Errorf("the delete hook's Job %s, owned by the Addon being deleted, did not run to completion", job)
			}
		}
		if live(t, "apps/v1", "Deployment", ns, "web") != nil {
			t.Error("the add-on's own Deployment is still there")
		}
	})

	t.Run("orphan", func(t *testing.T) {
		ns := newNamespace(t)
		a := install(t, ns, capstanv1.DeletionOrphan)
		deleteAddon(t, a)
		// NOTE: the garbage collector acts within a second of the owner's
		// deletion; a few make an object it would delete gone.
		time.Sleep(5 * time.Second)
		for _, o := range []*unstructured.Unstructured{live(t, "apps/v1", "Deployment", ns, "lingers"), live(t, "v1", "ConfigMap", ns, "notes"), live(t, "apps/v1", "Deployment", ns, "web")} {
			if o == nil {
				t.Error("an object of the add-on removed with Orphan is gone")
			} else if ownedBy(o, a.UID) {
				t.Errorf("%s %s is still owned by the Addon removed with Orphan", o.GetKind(), o.GetName())
			}
		}
	})

	t.Run("finalizers", testFinalizersRefused)
}

// testFinalizersRefused installs tenants' charts that set a finalizer:
// orphan on a post-install hook Deployment, which only the garbage
// collector deletes, and one no controller removes on a Deployment of the
// inventory. Applied, the first would leave the hook's ReplicaSet
// running with no owner once the Addon is removed, the second a
// Deployment Terminating for ever with its ReplicaSet running. Both are
// Blocked with rule finalizers, nothing of them is applied, and removing
// the Addon leaves no ReplicaSet behind.
func testFinalizersRefused(t *testing.T) {
	withFinalizer := func(manifest, after, finalizer string) string {
		out := strings.Replace(manifest, after, after+"  finalizers: ["+finalizer+"]\n", 1)
		if out == manifest {
			t.Fatalf("no %q in the test's manifest", after)
		}
		return out
	}
	for _, tc := range []struct {
		name, file, manifest, object string
	}{
		{"orphan on a hook", "templates/lingers.yaml",
			withFinalizer(lingeringHooks["templates/lingers.yaml"], "    helm.sh/hook: post-install\n", "orphan"), "lingers"},
		{"a hold on an object", "templates/deployment.yaml",
			withFinalizer(webChart("1.0.0", nil).files["templates/deployment.yaml"], "  name: {{ .Release.Name }}\n", "example.com/hold"), "web"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			// NOTE: should the chart's finalizer be applied, nothing but
			// this removes it; a Deployment left Terminating would hold
			// the namespace.
			t.Cleanup(func() { stripDeploymentFinalizers(t, ns) })
			url, _ := charts.publish(t, webChart("1.0.0", map[string]string{tc.file: tc.manifest}))
			a := create(t, newAddon(ns, "web", url, withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = capstanv1.DeletionDelete })))
			got := waitFor(t, a, 90*time.Second, "the sync to end", func(cur *capstanv1.Addon) bool {
				return (cur.Status.Phase == capstanv1.PhaseBlocked || cur.Status.Phase == capstanv1.PhaseSynced) && cur.Status.ObservedGeneration == cur.Generation
			})
			if got.Status.Phase != capstanv1.PhaseBlocked || got.Status.Plan == nil ||
				!slices.ContainsFunc(got.Status.Plan.Violations, func(v capstanv1.Violation) bool {
					return v.Rule == "finalizers" && v.Object.Kind == "Deployment" && v.Object.Name == tc.object
				}) {
				t.Errorf("want Blocked with rule finalizers on Deployment %s; got %s", tc.object, describeStatus(got))
			}
			if o := live(t, "apps/v1", "Deployment", ns, tc.object); o != nil {
				t.Errorf("Deployment %s with the chart's finalizer %v was applied", tc.object, o.GetFinalizers())
			}
			deleteAddon(t, a)
			// NOTE: the garbage collector acts within a second of the
			// owner's deletion; a few make what it would delete gone.
			time.Sleep(5 * time.Second)
			rs := &appsv1.ReplicaSetList{}
			if err := admin.List(context.Background(), rs, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			for _, r := range rs.Items {
				t.Errorf("ReplicaSet %s (replicas %d, owners %d) is still there once the Addon is removed", r.Name, ptr.Deref(r.Spec.Replicas, 1), len(r.OwnerReferences))
			}
		})
	}
}

// stripDeploymentFinalizers removes every finalizer from the Deployments
// of ns.
func stripDeploymentFinalizers(t *testing.T, ns string) {
	t.Helper()
	deps := &appsv1.DeploymentList{}
	if err := admin.List(context.Background(), deps, client.InNamespace(ns)); err != nil {
		t.Error(err)
		return
	}
	for i := range deps.Items {
		d := &deps.Items[i]
		if len(d.Finalizers) == 0 {
			continue
		}
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
		if err := admin.Patch(context.Background(), d, patch); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	}
}

// watchCompleteJobs reports whether a Job of ns owned by uid was seen
// complete, by name.
func watchCompleteJobs(t *testing.T, ns string, uid types.UID) func(name string) bool {
	t.Helper()
	c, err := client.NewWithWatch(cluster.ConfigFor("capstan-job-watcher", "system:masters"), client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(context.Background(), &batchv1.JobList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	seen := map[string]bool{}
	go func() {
		for e := range w.ResultChan() {
			j, ok := e.Object.(*batchv1.Job)
			if !ok || !slices.ContainsFunc(j.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == uid }) {
				continue
			}
			for _, cond := range j.Status.Conditions {
				if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
					mu.Lock()
					seen[j.Name] = true
					mu.Unlock()
				}
			}
		}
	}()
	return func(name string) bool {
		mu.Lock()
		defer mu.Unlock()
		return seen[name]
	}
}
