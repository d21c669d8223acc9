// Package install applies Capstan's own manifests (config/) to a cluster:
// the CRDs, the RBAC and the namespace, built with kustomize in memory. The
// controller Deployment is left out when the controller runs elsewhere, as
// in `capstan dev` and the tests.
package install

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"capstan.dev/capstan/config"
	"capstan.dev/capstan/internal/apply"
)

// Namespace is where config/default installs Capstan.
const Namespace = "capstan-system"

// ControllerServiceAccount is the controller's own account.
const ControllerServiceAccount = "capstan-controller"

// ControllerUser is the controller's user name, for running it outside the
// cluster with its real rights.
const ControllerUser = "system:serviceaccount:" + Namespace + ":" + ControllerServiceAccount

// AddonsServiceAccount is the account cluster-profile add-ons are applied
// as, which the controller impersonates.
const AddonsServiceAccount = "capstan-addons"

// AddonsUser is AddonsServiceAccount's user name.
const AddonsUser = "system:serviceaccount:" + Namespace + ":" + AddonsServiceAccount

// Objects builds config/default and returns its objects; withDeployment
// keeps the controller Deployment.
func Objects(withDeployment bool) ([]*unstructured.Unstructured, error) {
	mem := filesys.MakeFsInMemory()
	err := fs.WalkDir(config.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := config.FS.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile(path.Join("/config", p), data)
	})
	if err != nil {
		return nil, err
	}
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, "/config/default")
	if err != nil {
		return nil, fmt.Errorf("building config/default: %w", err)
	}
	var out []*unstructured.Unstructured
	for _, res := range resMap.Resources() {
		m, err := res.Map()
		if err != nil {
			return nil, err
		}
		obj := &unstructured.Unstructured{Object: m}
		if !withDeployment && obj.GetKind() == "Deployment" {
			continue
		}
		out = append(out, obj)
	}
	return out, nil
}

// Apply applies Capstan's manifests with server-side apply and waits until
// the CRDs are Established and served.
func Apply(ctx context.Context, c client.Client, withDeployment bool) error {
	objs, err := Objects(withDeployment)
	if err != nil {
		return err
	}
	// Namespaces and CRDs first: the rest lives in them or uses them.
	rank := func(o *unstructured.Unstructured) int {
		switch o.GetKind() {
		case "Namespace":
			return 0
		case "CustomResourceDefinition":
			return 1
		}
		return 2
	}
	sort.SliceStable(objs, func(i, j int) bool { return rank(objs[i]) < rank(objs[j]) })
	for _, obj := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.ForceOwnership, client.FieldOwner("capstan-install")); err != nil {
			return fmt.Errorf("installing %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	for _, obj := range objs {
		if obj.GetKind() != "CustomResourceDefinition" {
			continue
		}
		if err := apply.WaitForCRD(ctx, c, obj.GetName(), 100*time.Millisecond, 30*time.Second); err != nil {
			return err
		}
	}
	return nil
}
