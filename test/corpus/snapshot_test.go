package corpus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"capstan.dev/capstan/internal/install"
)

// skippedResources are made by the cluster's own controllers or are
// records, not objects a chart installs: what follows from an install
// (pods, replica sets, endpoints, events, leases) differs in names and
// times, and is judged by the objects that made it.
var skippedResources = map[string]bool{
	"pods": true, "replicasets": true, "controllerrevisions": true, "endpoints": true,
	"endpointslices": true, "events": true, "leases": true, "componentstatuses": true,
	"nodes": true, "namespaces": true, "csinodes": true, "bindings": true,
	"certificatesigningrequests": true, "ipaddresses": true, "servicecidrs": true,
}

// snapshotter lists every object of every listable resource in the
// cluster, as the API server returns it.
type snapshotter struct {
	disc     discovery.DiscoveryInterface
	dyn      dynamic.Interface
	resource map[string]schema.GroupVersionResource // "group/Kind" -> resource, from the last take
}

func newSnapshotter(cfg *rest.Config) (*snapshotter, error) {
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &snapshotter{disc: disc, dyn: dyn, resource: map[string]schema.GroupVersionResource{}}, nil
}

// keyOf names an object by group, kind, namespace and name: the version it
// is read at does not matter.
func keyOf(u *unstructured.Unstructured) string {
	gvk := u.GroupVersionKind()
	return gvk.Group + "/" + gvk.Kind + "/" + u.GetNamespace() + "/" + u.GetName()
}

// take lists the objects a chart could have installed, keyed by keyOf.
// It leaves out the controller's own namespace, objects that another
// object owns (the cluster's controllers made them), and the objects every
// namespace gets. A group whose discovery fails (an APIService whose
// server does not answer, here: none ever does) is skipped, as kubectl
// does.
func (s *snapshotter) take(ctx context.Context) (map[string]bool, error) {
	objs, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	keys := make(map[string]bool, len(objs))
	for k := range objs {
		keys[k] = true
	}
	return keys, nil
}

// since lists the objects whose keys are not in baseline.
func (s *snapshotter) since(ctx context.Context, baseline map[string]bool) (map[string]*unstructured.Unstructured, error) {
	objs, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	for k := range objs {
		if baseline[k] {
			delete(objs, k)
		}
	}
	return objs, nil
}

func (s *snapshotter) list(ctx context.Context) (map[string]*unstructured.Unstructured, error) {
	lists, err := s.disc.ServerPreferredResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	out := map[string]*unstructured.Unstructured{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			return nil, err
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || skippedResources[r.Name] || !hasVerb(r, "list") ||
				gv.Group == "capstan.dev" {
				continue
			}
			gvr := gv.WithResource(r.Name)
			s.resource[gv.Group+"/"+r.Kind] = gvr
			items, err := s.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
			if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
				continue // a CRD removed since discovery
			}
			if err != nil {
				return nil, fmt.Errorf("listing %s: %w", gvr, err)
			}
			for i := range items.Items {
				u := &items.Items[i]
				if skipped(u) {
					continue
				}
				out[keyOf(u)] = u
			}
		}
	}
	return out, nil
}

func hasVerb(r metav1.APIResource, verb string) bool {
	for _, v := range r.Verbs {
		if v == verb {
			return true
		}
	}
	return false
}

// skipped reports the objects that no chart installs.
func skipped(u *unstructured.Unstructured) bool {
	switch {
	case u.GetNamespace() == install.Namespace:
		return true
	case len(u.GetOwnerReferences()) > 0:
		return true
	case u.GetKind() == "ConfigMap" && u.GetName() == "kube-root-ca.crt":
		return true
	case u.GetKind() == "ServiceAccount" && u.GetName() == "default":
		return true
	case u.GetKind() == "Secret" && strings.HasPrefix(u.GetName(), "sh.helm.release."):
		return true // Helm's own record of the release
	}
	return false
}

// delete deletes one object; the garbage collector deletes what it owns.
func (s *snapshotter) delete(ctx context.Context, u *unstructured.Unstructured) error {
	gvr, ok := s.resource[u.GroupVersionKind().Group+"/"+u.GetKind()]
	if !ok {
		return errors.New("no resource known for " + keyOf(u))
	}
	policy := metav1.DeletePropagationBackground
	return s.dyn.Resource(gvr).Namespace(u.GetNamespace()).Delete(ctx, u.GetName(), metav1.DeleteOptions{PropagationPolicy: &policy})
}

// resourceOf returns the resource (plural) of a group and kind, as the
// audit log names it.
func (s *snapshotter) resourceOf(group, kind string) string {
	return s.resource[group+"/"+kind].Resource
}
