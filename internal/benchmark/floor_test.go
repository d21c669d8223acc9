package benchmark_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testcluster"
)

// The floor is what applying the same objects costs with no engine at
// all: a bare server-side-apply client with floorWorkers workers, each
// taking one add-on at a time, creating its namespace and applying its 20
// objects, with no preview, status or inventory. It runs in the same
// process and on the same control plane as the benchmark, into namespaces
// of its own, and its time is from the first apply until every Deployment
// is Available, as Capstan's is until every Addon is Ready.

// envFloorAs chooses the floor's identity: "addons" (the default) applies
// as Capstan does, as the controller's account impersonating
// capstan-addons, so that the floor pays the same authentication and RBAC
// on every request; "admin" applies as the cluster's admin, in
// system:masters, which the API server lets through without RBAC, as the
// figures before 2026-12-02 were measured.
const envFloorAs = "CAPSTAN_BENCH_FLOOR_AS"

// floorClient is the floor's client, as envFloorAs says, and its identity
// in words.
func floorClient(c *testcluster.Cluster) (client.Client, string, error) {
	switch as := os.Getenv(envFloorAs); as {
	case "", "addons":
		cfg := c.ConfigFor(install.ControllerUser)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: install.AddonsUser}
		cl, err := client.New(cfg, client.Options{Scheme: scheme()})
		return cl, "as Capstan: the controller's account impersonating capstan-addons", err
	case "admin":
		cl, err := client.New(c.Config, client.Options{Scheme: scheme()})
		return cl, "as the cluster's admin (system:masters, no RBAC)", err
	default:
		return nil, "", fmt.Errorf("%s=%q: want addons or admin", envFloorAs, as)
	}
}

const (
	floorWorkers = 16
	floorManager = "capstan-bench-floor"
	floorLabel   = "capstan.dev/bench-floor"
)

func floorName(i int) string { return fmt.Sprintf("floor-%03d", i) }

// runFloor applies n add-ons' objects and waits until every Deployment is
// Available, watching them through watchCfg. With keep, it also sends
// Capstan's bookkeeping around each add-on's applies.
func runFloor(ctx context.Context, c client.Client, watchCfg *rest.Config, n int, timeout time.Duration, keep *bookkeeping) (time.Duration, error) {
	return runFloorOf(ctx, c, watchCfg, n, timeout, addonManifest, 1, keep)
}

// runFloorOf is runFloor with other objects: manifest(name) is one
// add-on's, with deployments Deployments among them.
func runFloorOf(ctx context.Context, c client.Client, watchCfg *rest.Config, n int, timeout time.Duration, manifest func(name string) string, deployments int, keep *bookkeeping) (time.Duration, error) {
	objects := make([][]*unstructured.Unstructured, n)
	for i := range n {
		objs, err := parseManifest(manifest(floorName(i)))
		if err != nil {
			return 0, err
		}
		objects[i] = objs
	}
	watched, stop, err := watchFor(ctx, watchCfg, &appsv1.Deployment{}, "", map[string]string{floorLabel: "true"})
	if err != nil {
		return 0, err
	}
	defer stop()
	if keep != nil {
		stopKeep, err := keep.watch(ctx, watchCfg)
		if err != nil {
			return 0, err
		}
		defer stopKeep()
	}
	began := time.Now()
	err = concurrently(ctx, floorWorkers, n, func(ctx context.Context, i int) error {
		return applyFloor(ctx, c, floorName(i), objects[i], keep)
	})
	if err != nil {
		return 0, err
	}
	err = wait.PollUntilContextTimeout(ctx, lookEvery, timeout, true, func(ctx context.Context) (bool, error) {
		list := &appsv1.DeploymentList{}
		if err := watched.List(ctx, list); err != nil {
			return false, nil
		}
		available := 0
		for _, d := range list.Items {
			for _, cond := range d.Status.Conditions {
				if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
					available++
				}
			}
		}
		return available == n*deployments, nil
	})
	if err != nil {
		return 0, fmt.Errorf("the floor's Deployments were not all Available within %s: %w", timeout, err)
	}
	return time.Since(began), nil
}

// concurrently runs op(i) for i in [0, n) with at most workers at once,
// and returns the first error, after which the others' context is done.
func concurrently(ctx context.Context, workers, n int, op func(context.Context, int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i := range n {
		g.Go(func() error { return op(ctx, i) })
	}
	return g.Wait()
}

// applyFloor creates one add-on's namespace and applies its objects there,
// with keep's requests around them when keep is set.
func applyFloor(ctx context.Context, c client.Client, ns string, objs []*unstructured.Unstructured, keep *bookkeeping) error {
	if keep != nil {
		if err := keep.beforeNamespace(ctx, ns); err != nil {
			return err
		}
	}
	nsObj := &unstructured.Unstructured{}
	nsObj.SetAPIVersion("v1")
	nsObj.SetKind("Namespace")
	nsObj.SetName(ns)
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(nsObj), client.FieldOwner(floorManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("floor: namespace %s: %w", ns, err)
	}
	for _, o := range objs {
		o.SetNamespace(ns)
		o.SetLabels(map[string]string{floorLabel: "true"})
	}
	var addon *capstanv1.Addon
	deployment := ""
	if keep != nil {
		refs := append(make([]capstanv1.ObjectRef, 0, len(objs)+1), capstanv1.RefOf(nsObj))
		for _, o := range objs {
			refs = append(refs, capstanv1.RefOf(o))
			if o.GetKind() == "Deployment" && deployment == "" {
				deployment = o.GetName()
			}
		}
		var err error
		if addon, err = keep.beforeApply(ctx, ns, refs); err != nil {
			return err
		}
	}
	for _, o := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(floorManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("floor: %s %s/%s: %w", o.GetKind(), ns, o.GetName(), err)
		}
	}
	if keep != nil {
		return keep.afterApply(ctx, addon, deployment)
	}
	return nil
}

// parseManifest splits a multi-document manifest into objects.
func parseManifest(manifest string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(manifest, "\n---\n") {
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			return nil, err
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out, nil
}
