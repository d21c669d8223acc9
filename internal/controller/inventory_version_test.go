package controller_test

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
)

// foosCRD is a CRD of kind Foo in group, with a version per name, each
// served, and v1beta1 the storage version.
func foosCRD(group string, versions ...string) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "foos." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "foos", Singular: "foo", Kind: "Foo", ListKind: "FooList"},
		},
	}
	open := true
	for _, v := range versions {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
			Name: v, Served: true, Storage: v == "v1beta1",
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", XPreserveUnknownFields: &open,
			}},
		})
	}
	return crd
}

// TestAnInventoryEntryOfAVersionNoLongerServedIsFound: an object that the
// inventory holds by an API version its CRD no longer serves (it serves
// only v1 now) still runs, and is neither "gone" to a read of its
// metadata, which the plan and the prune make, nor left running by a
// delete: both go through v1. Each case is asked through a client whose
// REST mapper saw the old versions, which the API server answers 404 by,
// and through a new one, which finds no match for v1beta1. In the second
// case the old client never saw v1, which only the CRD names. A kind no
// longer served at all (its group absent from discovery, or listed without
// it), and an object missing by a served version, are gone.
func TestAnInventoryEntryOfAVersionNoLongerServedIsFound(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	for i, before := range [][]string{{"v1beta1", "v1"}, {"v1beta1"}} {
		group := "inv" + string(rune('a'+i)) + ns[len(ns)-5:] + ".example.com"
		crd := foosCRD(group, before...)
		if err := admin.Create(ctx, crd); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), crd) })
		if err := apply.WaitForCRD(ctx, admin, crd.Name, 100*time.Millisecond, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"x", "y"} {
			foo := &unstructured.Unstructured{}
			foo.SetAPIVersion(group + "/v1beta1")
			foo.SetKind("Foo")
			foo.SetNamespace(ns)
			foo.SetName(name)
			if err := admin.Create(ctx, foo); err != nil {
				t.Fatal(err)
			}
		}
		ref := func(name string) capstanv1.ObjectRef {
			return capstanv1.ObjectRef{APIVersion: group + "/v1beta1", Kind: "Foo", Namespace: ns, Name: name}
		}
		stale, err := client.New(cluster.Config, client.Options{Scheme: scheme()})
		if err != nil {
			t.Fatal(err)
		}
		disco := discovery.NewDiscoveryClientForConfigOrDie(cluster.Config)
		old := &apply.Applier{Client: stale, Discovery: disco}
		if m, err := old.ReadMetadata(ctx, ref("x")); err != nil || m == nil {
			t.Fatalf("reading x while v1beta1 is served: %v %v", m, err)
		}

		// The CRD now serves only v1, and stores by it.
		if err := admin.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			t.Fatal(err)
		}
		crd.Spec.Versions[0].Served, crd.Spec.Versions[0].Storage = false, false
		if len(crd.Spec.Versions) == 1 {
			crd.Spec.Versions = append(crd.Spec.Versions, *crd.Spec.Versions[0].DeepCopy())
			crd.Spec.Versions[1].Name = "v1"
		}
		crd.Spec.Versions[1].Served, crd.Spec.Versions[1].Storage = true, true
		if err := admin.Update(ctx, crd); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "v1beta1 to leave discovery and v1 to be served", func() bool {
			_, errOld := disco.ServerResourcesForGroupVersion(group + "/v1beta1")
			_, errNew := disco.ServerResourcesForGroupVersion(group + "/v1")
			return apierrors.IsNotFound(errOld) && errNew == nil
		})

		fresh, err := client.New(cluster.Config, client.Options{Scheme: scheme()})
		if err != nil {
			t.Fatal(err)
		}
		anew := &apply.Applier{Client: fresh, Discovery: disco}
		for _, a := range []*apply.Applier{old, anew} {
			m, err := a.ReadMetadata(ctx, ref("x"))
			if err != nil || m == nil || m.APIVersion != group+"/v1" {
				t.Fatalf("served %v before: reading x by the inventory's v1beta1: %v, %v; want it read by v1", before, m, err)
			}
			if m, err := a.ReadMetadata(ctx, ref("missing")); err != nil || m != nil {
				t.Errorf("served %v before: reading a missing object: %v, %v; want it gone", before, m, err)
			}
			gone := ref("x")
			gone.APIVersion = "nothing-" + group + "/v1beta1"
			if m, err := a.ReadMetadata(ctx, gone); err != nil || m != nil {
				t.Errorf("reading an object of a kind no longer served: %v, %v; want it gone", m, err)
			}
			// A group discovery lists in full, without the kind.
			gone = ref("x")
			gone.Kind = "Bar"
			if m, err := a.ReadMetadata(ctx, gone); err != nil || m != nil {
				t.Errorf("reading an object of a kind its served group no longer has: %v, %v; want it gone", m, err)
			}
		}

		// The uninstall's delete, and the prune's, which reads first.
		for _, c := range []struct {
			applier *apply.Applier
			name    string
			d       apply.Deleting
		}{{old, "x", apply.Deleting{}}, {anew, "y", apply.Deleting{Keep: apply.Pruning}}} {
			deleted, err := c.applier.DeleteAll(ctx, []capstanv1.ObjectRef{ref(c.name)}, c.d)
			if err != nil || deleted.Requests != 1 || len(deleted.Done) != 1 {
				t.Errorf("served %v before: deleting %s: %+v, %v; want one delete sent", before, c.name, deleted, err)
			}
			eventually(t, 30*time.Second, c.name+" to be gone", func() bool {
				live := &unstructured.Unstructured{}
				live.SetAPIVersion(group + "/v1")
				live.SetKind("Foo")
				return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.name}, live))
			})
		}
	}
}
