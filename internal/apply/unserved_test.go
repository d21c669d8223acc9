package apply

import (
	"context"
	"errors"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// unmappedClient is a client whose REST mapper maps no kind, as
// controller-runtime's mapper answers a kind whose group discovery lists
// Stale (an aggregated API whose server is down): every read or delete by
// it is a no-match error, and what the API server still holds is unknown.
type unmappedClient struct {
	client.Client
	deletes int
}

func (c *unmappedClient) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	gvk := obj.GetObjectKind().GroupVersionKind()
	return &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
}

func (c *unmappedClient) Delete(_ context.Context, obj client.Object, _ ...client.DeleteOption) error {
	c.deletes++
	gvk := obj.GetObjectKind().GroupVersionKind()
	return &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
}

func (c *unmappedClient) RESTMapper() meta.RESTMapper { return meta.NewDefaultRESTMapper(nil) }

// fakeDiscovery answers as the API server's discovery would: groups, and
// with aggregated discovery their resources and the versions listed
// Stale; without it (resources nil), each version's resources from
// byVersion, or the error in versionErrs.
type fakeDiscovery struct {
	groups      *metav1.APIGroupList
	resources   map[schema.GroupVersion]*metav1.APIResourceList
	failed      map[schema.GroupVersion]error
	err         error
	byVersion   map[string]*metav1.APIResourceList
	versionErrs map[string]error
}

func (d *fakeDiscovery) GroupsAndMaybeResourcesWithContext(context.Context) (*metav1.APIGroupList, map[schema.GroupVersion]*metav1.APIResourceList, map[schema.GroupVersion]error, error) {
	if d.err != nil {
		return nil, nil, nil, d.err
	}
	return d.groups, d.resources, d.failed, nil
}

func (d *fakeDiscovery) ServerResourcesForGroupVersionWithContext(_ context.Context, gv string) (*metav1.APIResourceList, error) {
	if err := d.versionErrs[gv]; err != nil {
		return nil, err
	}
	if l, ok := d.byVersion[gv]; ok {
		return l, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
}

// TestAnUnservedGroupIsNotGone: an object of an aggregated API whose
// APIService is unavailable maps to no version, and is gone only when
// discovery no longer lists its group, or lists the group in full without
// the kind; while discovery lists the group but cannot serve it (Stale,
// or a version whose resources fail to list), reading or deleting the
// object is an error, so the prune or the uninstall tries again instead
// of dropping an object that still runs.
func TestAnUnservedGroupIsNotGone(t *testing.T) {
	ref := capstanv1.ObjectRef{APIVersion: "metrics.example.com/v1", Kind: "Gauge", Namespace: "apps", Name: "load"}
	gv := schema.GroupVersion{Group: "metrics.example.com", Version: "v1"}
	listed := func(versions ...string) *metav1.APIGroupList {
		g := metav1.APIGroup{Name: gv.Group}
		for _, v := range versions {
			g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: gv.Group + "/" + v, Version: v})
		}
		return &metav1.APIGroupList{Groups: []metav1.APIGroup{{Name: "apps", Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "apps/v1", Version: "v1"}}}, g}}
	}
	others := &metav1.APIResourceList{GroupVersion: gv.String(), APIResources: []metav1.APIResource{{Name: "meters", Kind: "Meter"}, {Name: "gauges/status", Kind: "Gauge"}}}
	for _, tc := range []struct {
		name string
		d    *fakeDiscovery
		// want is the error's text, or "" for an object gone.
		want string
	}{
		{name: "the group listed Stale (aggregated discovery)",
			d:    &fakeDiscovery{groups: listed(), resources: map[schema.GroupVersion]*metav1.APIResourceList{}, failed: map[schema.GroupVersion]error{gv: discovery.StaleGroupVersionError{}}},
			want: `the API server lists the API group "metrics.example.com" but cannot serve it now`},
		{name: "the group's version failing to list (unaggregated discovery)",
			d:    &fakeDiscovery{groups: listed("v1"), versionErrs: map[string]error{gv.String(): apierrors.NewServiceUnavailable("the server is currently unable to handle the request")}},
			want: "cannot list the resources of metrics.example.com/v1 now"},
		{name: "discovery failing",
			d:    &fakeDiscovery{err: errors.New("connection refused")},
			want: "asking the API server's discovery whether it still serves Gauge"},
		{name: "the group not listed",
			d: &fakeDiscovery{groups: &metav1.APIGroupList{Groups: []metav1.APIGroup{{Name: "apps"}}}, resources: map[schema.GroupVersion]*metav1.APIResourceList{}, failed: map[schema.GroupVersion]error{}}},
		{name: "the group listed in full without the kind (aggregated discovery)",
			d: &fakeDiscovery{groups: listed("v1"), resources: map[schema.GroupVersion]*metav1.APIResourceList{gv: others}, failed: map[schema.GroupVersion]error{}}},
		{name: "the group listed in full without the kind (unaggregated discovery)",
			d: &fakeDiscovery{groups: listed("v1", "v2"), byVersion: map[string]*metav1.APIResourceList{gv.String(): others}}},
		{name: "the kind listed in the version the client could not map",
			d:    &fakeDiscovery{groups: listed("v1"), resources: map[schema.GroupVersion]*metav1.APIResourceList{gv: {APIResources: []metav1.APIResource{{Name: "gauges", Kind: "Gauge"}}}}, failed: map[schema.GroupVersion]error{}},
			want: "which the client did not map yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &unmappedClient{}
			a := &Applier{Client: c, Discovery: tc.d}
			m, err := a.ReadMetadata(context.Background(), ref)
			if m != nil {
				t.Fatalf("read %v", m)
			}
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("ReadMetadata: %v, want %q", err, tc.want)
			}
			// The uninstall deletes without reading first: an error keeps
			// the entry, and the Addon's finalizer, for the next try.
			deleted, err := a.DeleteAll(context.Background(), []capstanv1.ObjectRef{ref}, Deleting{})
			if tc.want == "" {
				if err != nil || len(deleted.Done) != 1 {
					t.Fatalf("DeleteAll of an object whose kind is gone: %+v, %v", deleted, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || len(deleted.Done) != 0 {
				t.Fatalf("DeleteAll: %+v, %v; want the error %q and nothing done", deleted, err, tc.want)
			}
		})
	}
}

// TestAKindServedByAnotherVersion: discovery listing the kind in a
// version the client did not ask is where the object is looked for.
func TestAKindServedByAnotherVersion(t *testing.T) {
	gk := schema.GroupKind{Group: "metrics.example.com", Kind: "Gauge"}
	gauges := &metav1.APIResourceList{APIResources: []metav1.APIResource{{Name: "gauges", Kind: "Gauge"}}}
	groups := &metav1.APIGroupList{Groups: []metav1.APIGroup{{Name: gk.Group, Versions: []metav1.GroupVersionForDiscovery{{Version: "v1"}, {Version: "v2"}}}}}
	got, err := kindVersions(context.Background(), gk, groups,
		map[schema.GroupVersion]*metav1.APIResourceList{{Group: gk.Group, Version: "v2"}: gauges, {Group: gk.Group, Version: "v1"}: {}}, nil, nil)
	if err != nil || len(got) != 1 || got[0] != "v2" {
		t.Fatalf("kindVersions = %v, %v; want [v2]", got, err)
	}
}

// behindClient is a client whose REST mapper is behind the API server: it
// maps Foo only by v1beta1, while the CRD, which it reads, serves the
// versions in served. A read or delete by a version it does not map is a
// no-match error; one by v1beta1 finds no object.
type behindClient struct {
	client.Client
	served []string
}

func (c *behindClient) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
		if key.Name != "foos.example.com" {
			return apierrors.NewNotFound(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, key.Name)
		}
		crd.Name = key.Name
		crd.Spec.Group = "example.com"
		crd.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: "foos", Kind: "Foo"}
		for _, v := range c.served {
			crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v, Served: true})
		}
		return nil
	}
	return c.answer(obj)
}

func (c *behindClient) Delete(_ context.Context, obj client.Object, _ ...client.DeleteOption) error {
	return c.answer(obj)
}

func (c *behindClient) answer(obj client.Object) error {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Version != "v1beta1" {
		return &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
	}
	return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: "foos"}, obj.GetName())
}

func (c *behindClient) RESTMapper() meta.RESTMapper {
	old := schema.GroupVersion{Group: "example.com", Version: "v1beta1"}
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{old})
	m.Add(old.WithKind("Foo"), meta.RESTScopeNamespace)
	return m
}

// TestAVersionTheMapperHasNotSeenIsNotGone: an object held by v1, which
// its CRD serves and the client's REST mapper does not map yet, may run
// on by v1: reading or deleting it is an error, so that the prune or the
// uninstall tries again, never "gone". When the CRD no longer serves v1,
// a served version that finds no object makes it gone.
func TestAVersionTheMapperHasNotSeenIsNotGone(t *testing.T) {
	ref := capstanv1.ObjectRef{APIVersion: "example.com/v1", Kind: "Foo", Namespace: "apps", Name: "x"}
	for _, tc := range []struct {
		name   string
		served []string
		want   string // the error's text, or "" for an object gone
	}{
		{"v1 served, and only v1", []string{"v1"}, "serves example.com/v1, which the client did not map yet"},
		{"v1 served, with the version the client maps", []string{"v1beta1", "v1"}, "serves example.com/v1, which the client did not map yet"},
		{"v1 no longer served", []string{"v1beta1"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &Applier{Client: &behindClient{served: tc.served}}
			m, err := a.ReadMetadata(context.Background(), ref)
			if m != nil {
				t.Fatalf("read %v", m)
			}
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("ReadMetadata: %v, want %q", err, tc.want)
			}
			deleted, err := a.DeleteAll(context.Background(), []capstanv1.ObjectRef{ref}, Deleting{})
			if tc.want == "" {
				if err != nil || len(deleted.Done) != 1 {
					t.Fatalf("DeleteAll of an object gone: %+v, %v", deleted, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || len(deleted.Done) != 0 {
				t.Fatalf("DeleteAll: %+v, %v; want the error %q and nothing done", deleted, err, tc.want)
			}
		})
	}
}
