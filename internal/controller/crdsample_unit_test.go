package controller

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
)

// sampleCRD is the Gadget CRD of group example.com whose v1 holds an
// integer spec.size.
func sampleCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	const manifest = `
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {type: integer}
`
	if err := yaml.Unmarshal([]byte(manifest), crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// gadget is a Gadget in ns whose spec.size is size.
func gadget(ns, name string, size any) unstructured.Unstructured {
	return unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Gadget",
		"metadata": map[string]any{"namespace": ns, "name": name}, "spec": map[string]any{"size": size}}}
}

// TestCRDDryRunRefusedIsJudgedInController dry-runs two Gadgets against a
// shadow: the API server refuses one with a plain 403 (the account's RBAC
// in the shadow's group, or an admission policy), and the other with the
// 403 of a Terminating namespace. The first, whose size breaks the new
// schema, is judged in the controller and found invalid; only the second
// is left unjudged. Before, every 403 was left unjudged, and a check whose
// dry runs were all refused let any schema through.
func TestCRDDryRunRefusedIsJudgedInController(t *testing.T) {
	crd := sampleCRD(t)
	shadow, err := newShadow(crd, "0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	gr := schema.GroupResource{Group: shadow.Spec.Group, Resource: "gadgets"}
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			if obj.GetNamespace() == "doomed" {
				err := apierrors.NewForbidden(gr, obj.GetName(), fmt.Errorf("unable to create new content in namespace doomed because it is being terminated"))
				err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: corev1.NamespaceTerminatingCause, Field: "metadata.namespace"})
				return err
			}
			return apierrors.NewForbidden(gr, obj.GetName(), fmt.Errorf("the account may not create it"))
		},
	}).Build()
	sc := &shadowCheck{crd: crd, shadow: shadow}
	got, err := sc.dryRun(context.Background(), &apply.Applier{Client: c}, "0123456789abcdef", crd.Spec.Versions[0],
		[]unstructured.Unstructured{gadget("apps", "broken", "three"), gadget("doomed", "going", int64(3))})
	if err != nil {
		t.Fatal(err)
	}
	if got.checked != 1 || got.invalid != 1 || got.inController != 1 || got.terminating != 1 {
		t.Errorf("checked %d, invalid %d, in the controller %d, terminating %d; want 1 each: %+v", got.checked, got.invalid, got.inController, got.terminating, got)
	}
}

// TestCRDSampleReadsPastObjectsBeingDeleted lists Gadgets whose first page
// is all being deleted (a Terminating namespace's, which come first in
// key order) and whose second holds one that breaks the new schema: the
// check reads on to it and finds it invalid. Before, the first page alone
// was read, and nothing was judged.
func TestCRDSampleReadsPastObjectsBeingDeleted(t *testing.T) {
	crd := sampleCRD(t)
	now := metav1.Now()
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		List: func(_ context.Context, _ client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lo := (&client.ListOptions{}).ApplyOptions(opts)
			ul := list.(*unstructured.UnstructuredList)
			if lo.Continue == "" {
				for i := range crdSampleSize {
					g := gadget("a-old", fmt.Sprintf("g%02d", i), int64(1))
					g.SetDeletionTimestamp(&now)
					ul.Items = append(ul.Items, g)
				}
				ul.SetContinue("page-2")
				return nil
			}
			ul.Items = append(ul.Items, gadget("b-live", "broken", "three"))
			return nil
		},
	}).Build()
	s := &scope{addon: &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "gadgets"}}, applier: &apply.Applier{Client: c}}
	r := &AddonReconciler{}
	got, err := r.checkExisting(context.Background(), s, crd, &shadowCheck{crd: crd}, crd.Spec.Versions[0], "v1", func() bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	if got.checked != 1 || got.invalid != 1 || got.deleting != crdSampleSize {
		t.Errorf("checked %d, invalid %d, passed over %d; want 1, 1, %d", got.checked, got.invalid, got.deleting, crdSampleSize)
	}
}

// TestCRDSampleReadsBoundedPages lists Gadgets that are all being deleted,
// page after page (an operator's objects stuck on its finalizer): the
// check reads crdSamplePages pages, judges nothing, and ends. Before, it
// read the whole collection at every preview.
func TestCRDSampleReadsBoundedPages(t *testing.T) {
	crd := sampleCRD(t)
	now := metav1.Now()
	pages := 0
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		List: func(_ context.Context, _ client.WithWatch, list client.ObjectList, _ ...client.ListOption) error {
			pages++
			ul := list.(*unstructured.UnstructuredList)
			for i := range crdSampleSize {
				g := gadget("a-old", fmt.Sprintf("g%d-%02d", pages, i), int64(1))
				g.SetDeletionTimestamp(&now)
				ul.Items = append(ul.Items, g)
			}
			if pages < 1000 {
				ul.SetContinue(fmt.Sprintf("page-%d", pages+1))
			}
			return nil
		},
	}).Build()
	s := &scope{addon: &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "gadgets"}}, applier: &apply.Applier{Client: c}}
	got, err := (&AddonReconciler{}).checkExisting(context.Background(), s, crd, &shadowCheck{crd: crd}, crd.Spec.Versions[0], "v1", func() bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	if pages != crdSamplePages || got.checked != 0 || got.deleting != crdSamplePages*crdSampleSize {
		t.Errorf("read %d pages, checked %d, passed over %d; want %d pages, none checked, %d passed over", pages, got.checked, got.deleting, crdSamplePages, crdSamplePages*crdSampleSize)
	}
}
