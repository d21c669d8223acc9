package benchmark_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testcluster"
)

// requestsPerKind is how many requests of each kind BenchmarkRequestCosts
// sends, and requestClients how many at once.
const (
	requestsPerKind = 400
	requestClients  = 8
)

// BenchmarkRequestCosts measures what one request of each kind that an
// install sends costs the API server: its CPU time (and etcd's) over
// requestsPerKind requests, from requestClients clients at once, as
// Capstan's controller sends them. The converge benchmark's ratio to the
// floor follows the API server's CPU, so these are the prices of what
// Capstan sends beyond the applies. A Deployment's apply is left out: what
// it costs is mostly the ReplicaSet and pod the control plane makes for it.
func BenchmarkRequestCosts(b *testing.B) {
	b.StopTimer()
	c := clusterFor(b)
	ctx := b.Context()
	admin, err := client.New(c.Config, client.Options{Scheme: scheme()})
	if err != nil {
		b.Fatal(err)
	}
	if err := install.Apply(ctx, admin, false); err != nil {
		b.Fatal(err)
	}
	controllerCfg := c.ConfigFor(install.ControllerUser)
	controllerCfg.QPS, controllerCfg.Burst = -1, -1
	asController, err := client.New(controllerCfg, client.Options{Scheme: scheme()})
	if err != nil {
		b.Fatal(err)
	}
	addonsCfg := rest.CopyConfig(controllerCfg)
	addonsCfg.Impersonate = rest.ImpersonationConfig{UserName: install.AddonsUser}
	asAddons, err := client.New(addonsCfg, client.Options{Scheme: scheme()})
	if err != nil {
		b.Fatal(err)
	}
	run := time.Now().UnixNano() % 100000
	ns := func(what string) string {
		name := fmt.Sprintf("cost-%d-%s", run, what)
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			b.Fatal(err)
		}
		return name
	}
	applyAs := func(cl client.Client, manifest, namespace string, dryRun bool) func(context.Context, int) error {
		return func(ctx context.Context, i int) error {
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(fmt.Appendf(nil, manifest, i), &obj.Object); err != nil {
				return err
			}
			obj.SetNamespace(namespace)
			opts := []client.ApplyOption{client.FieldOwner(capstanv1.FieldManager), client.ForceOwnership}
			if dryRun {
				opts = append(opts, client.DryRunAll)
			}
			return cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), opts...)
		}
	}
	cmNS, dryNS, addonNS := ns("configmaps"), ns("dry-runs"), ns("addons")
	addons := make([]*capstanv1.Addon, requestsPerKind)
	for i := range addons {
		addons[i] = &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: addonNS, Name: fmt.Sprintf("a-%03d", i)},
			Spec: capstanv1.AddonSpec{Git: &capstanv1.GitSource{URL: "https://git.example/r.git", Path: "x"}, TargetNamespace: "x", CreateNamespace: true, Prune: true}}
	}
	var results []string
	measure := func(what string, op func(context.Context, int) error) {
		before, err := c.CPUTimes()
		if err != nil {
			b.Fatal(err)
		}
		if err := concurrently(ctx, requestClients, requestsPerKind, op); err != nil {
			b.Fatalf("%s: %v", what, err)
		}
		after, err := c.CPUTimes()
		if err != nil {
			b.Fatal(err)
		}
		per := func(component string) float64 {
			return float64((after[component] - before[component]).Microseconds()) / 1000 / requestsPerKind
		}
		results = append(results, fmt.Sprintf("  %-62s %6.2f ms   %5.2f ms", what, per(testcluster.KubeAPIServer), per(testcluster.Etcd)))
	}
	// The Addons' own writes come first, in the order of an install: a
	// user creates the Addon, and the controller adds its finalizer.
	measure("Addon: create", func(ctx context.Context, i int) error {
		return admin.Create(ctx, addons[i])
	})
	measure("Addon: finalizer patch", func(ctx context.Context, i int) error {
		a := addons[i].DeepCopy()
		base := a.DeepCopy()
		a.Finalizers = append(a.Finalizers, capstanv1.Finalizer)
		return asController.Patch(ctx, a, client.MergeFrom(base))
	})
	measure("ConfigMap: dry-run apply, not there yet", applyAs(asAddons, costConfigMap, dryNS, true))
	measure("ConfigMap: apply that creates it", applyAs(asAddons, costConfigMap, cmNS, false))
	measure("ConfigMap: get", func(ctx context.Context, i int) error {
		return asController.Get(ctx, client.ObjectKey{Namespace: cmNS, Name: fmt.Sprintf("config-%d", i)}, &corev1.ConfigMap{})
	})
	measure("Deployment: dry-run apply, not there yet", applyAs(asAddons, costDeployment, dryNS, true))
	measure("Addon: status patch with conditions only", func(ctx context.Context, i int) error {
		a := addons[i].DeepCopy()
		base := a.DeepCopy()
		a.Status.Conditions = []metav1.Condition{{Type: capstanv1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Progressing", Message: "Applying.", LastTransitionTime: metav1.Now(), ObservedGeneration: 1}}
		return asController.Status().Patch(ctx, a, client.MergeFrom(base))
	})
	measure("Addon: status patch of a plan and inventory of 21 objects", func(ctx context.Context, i int) error {
		a := addons[i].DeepCopy()
		base := a.DeepCopy()
		installedStatus(&a.Status)
		return asController.Status().Patch(ctx, a, client.MergeFrom(base))
	})
	measure("Addon: get, with a plan and inventory of 21 objects", func(ctx context.Context, i int) error {
		return asController.Get(ctx, client.ObjectKeyFromObject(addons[i]), &capstanv1.Addon{})
	})
	// The status that says Ready is written on an Addon that holds the
	// checkpoint's plan and inventory: the API server reads, checks and
	// compares all of it.
	measure("Addon: status patch of conditions, with a plan and inventory", func(ctx context.Context, i int) error {
		a := addons[i].DeepCopy()
		installedStatus(&a.Status)
		base := a.DeepCopy()
		a.Status.Conditions[0].Message = "Applied and healthy, again."
		return asController.Status().Patch(ctx, a, client.MergeFrom(base))
	})
	measure("Event: create", func(ctx context.Context, i int) error {
		now := metav1.Now()
		return asController.Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: addonNS, GenerateName: "a."},
			InvolvedObject: corev1.ObjectReference{Kind: "Addon", Namespace: addonNS, Name: addons[i].Name}, Reason: "Synced",
			Message: "Applied and healthy.", Type: corev1.EventTypeNormal, Source: corev1.EventSource{Component: "capstan"},
			FirstTimestamp: now, LastTimestamp: now, Count: 1})
	})
	b.Logf("\nwhat one request costs, over %d of each from %d clients at once:\n  %-62s %9s %10s\n%s",
		requestsPerKind, requestClients, "request", "apiserver", "etcd", strings.Join(results, "\n"))
}

// installedStatus is an installed add-on's status before the plan lists
// only changes: 21 objects in the inventory and in the plan.
func installedStatus(st *capstanv1.AddonStatus) {
	st.Phase = capstanv1.PhaseSynced
	st.AppliedHash = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	st.Plan = &capstanv1.Plan{Hash: st.AppliedHash, Generation: 1}
	for j := range 21 {
		ref := capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "x", Name: fmt.Sprintf("config-%d", j)}
		st.Inventory = append(st.Inventory, capstanv1.ObjectID{ObjectRef: ref})
		st.Plan.Objects = append(st.Plan.Objects, capstanv1.PlannedObject{ObjectRef: ref, Action: capstanv1.ActionUnchanged})
	}
	st.Conditions = []metav1.Condition{{Type: capstanv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Synced", Message: "Applied and healthy.", LastTransitionTime: metav1.Now(), ObservedGeneration: 1}}
}

// costConfigMap and costDeployment are the objects whose requests are
// priced, with %d for a name of their own.
const (
	costConfigMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: config-%d
  labels: {capstan.dev/addon: x, capstan.dev/addon-namespace: capstan-system, app.kubernetes.io/managed-by: capstan}
data:
  addon: bench
  settings.yaml: |
    level: info
    retries: 3
    endpoints: [a.example, b.example]
`
	costDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-%d
  labels: {capstan.dev/addon: x, capstan.dev/addon-namespace: capstan-system, app.kubernetes.io/managed-by: capstan}
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: registry.example/web:1.0
          ports: [{name: http, containerPort: 8080}]
`
)
