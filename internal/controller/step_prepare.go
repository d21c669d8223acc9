package controller

import (
	"context"
	"maps"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/guard"
	"capstan.dev/capstan/internal/render"
)

// prepare puts every object into the target namespace, labels it, and, for
// restricted add-ons, hardens pod specs and adds owner references. Jobs
// that are not hooks lose ttlSecondsAfterFinished, since a Job the TTL
// controller deleted would run again on the next sync.
func (r *AddonReconciler) prepare(ctx context.Context, s *scope) (bool, error) {
	if s.render == nil {
		return false, nil
	}
	spec := s.addon.Spec
	if s.profile == capstanv1.ProfileRestricted {
		addonRef := capstanv1.ObjectRef{APIVersion: capstanv1.GroupVersion.String(), Kind: "Addon", Namespace: s.addon.Namespace, Name: s.addon.Name}
		if spec.TargetNamespace != "" && spec.TargetNamespace != s.addon.Namespace {
			s.violations = append(s.violations, capstanv1.Violation{Object: addonRef, Path: "spec.targetNamespace", Rule: "target-namespace",
				Message: "a restricted add-on installs into its own namespace; remove spec.targetNamespace"})
		}
		if spec.CreateNamespace {
			s.violations = append(s.violations, capstanv1.Violation{Object: addonRef, Path: "spec.createNamespace", Rule: "create-namespace",
				Message: "a restricted add-on cannot create namespaces; remove spec.createNamespace"})
		}
	}
	crdScopes := renderedCRDScopes(s.render.Objects)
	objs := make([]*unstructured.Unstructured, 0, len(s.render.Objects)+1)
	if spec.CreateNamespace && s.profile == capstanv1.ProfileCluster && !renders(s.render.Objects, "Namespace", s.namespace) {
		ns := &unstructured.Unstructured{}
		ns.SetAPIVersion("v1")
		ns.SetKind("Namespace")
		ns.SetName(s.namespace)
		objs = append(objs, ns)
		s.createNamespace = s.namespace
	}
	for _, o := range s.render.Objects {
		objs = append(objs, o.DeepCopy())
	}
	s.hooks = make([]render.Hook, 0, len(s.render.Hooks))
	for _, h := range s.render.Hooks {
		h.Object = h.Object.DeepCopy()
		s.hooks = append(s.hooks, h)
	}
	all := make([]*unstructured.Unstructured, 0, len(objs)+len(s.hooks))
	all = append(all, objs...)
	for _, h := range s.hooks {
		all = append(all, h.Object)
	}
	for _, o := range all {
		if err := r.setNamespace(o, s, crdScopes); err != nil {
			return false, err
		}
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, s.addon.AppliedLabels())
		o.SetLabels(labels)
	}
	for _, o := range objs {
		if o.GetKind() == "Job" && strings.HasPrefix(o.GetAPIVersion(), "batch/") {
			unstructured.RemoveNestedField(o.Object, "spec", "ttlSecondsAfterFinished")
		}
	}
	if s.profile == capstanv1.ProfileRestricted {
		// NOTE: Harden's errors are malformed pod templates, which the
		// guard's Check reports as violations in the plan.
		_ = guard.Harden(all)
		for _, o := range objs {
			if apply.Deletable(capstanv1.RefOf(o)) {
				// Appended, not replaced: owner references the chart sets
				// itself stay, and the guard refuses them.
				o.SetOwnerReferences(append(o.GetOwnerReferences(), s.addon.OwnerReference()))
			}
		}
	}
	s.objects = objs
	return false, nil
}

func (r *AddonReconciler) setNamespace(o *unstructured.Unstructured, s *scope, crdScopes map[schema.GroupKind]bool) error {
	gvk := o.GroupVersionKind()
	namespaced, known := crdScopes[gvk.GroupKind()]
	if !known {
		var err error
		namespaced, err = apiutil.IsGVKNamespaced(gvk, r.Client.RESTMapper())
		if err != nil {
			if apimeta.IsNoMatchError(err) {
				// The dry run names the unknown kind in the plan.
				return nil
			}
			return err
		}
	}
	switch {
	case !namespaced:
		o.SetNamespace("")
	case o.GetNamespace() == "":
		o.SetNamespace(s.namespace)
	}
	return nil
}

// renderedCRDScopes returns, for each kind a rendered CRD defines, whether it
// is namespaced.
func renderedCRDScopes(objs []*unstructured.Unstructured) map[schema.GroupKind]bool {
	out := map[schema.GroupKind]bool{}
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
		scope, _, _ := unstructured.NestedString(o.Object, "spec", "scope")
		out[schema.GroupKind{Group: group, Kind: kind}] = scope != "Cluster"
	}
	return out
}

func renders(objs []*unstructured.Unstructured, kind, name string) bool {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return true
		}
	}
	return false
}
