// Package prepare turns a render into the objects Capstan applies: each in
// its namespace, labelled for its add-on, and, for a restricted add-on,
// hardened and owned by the Addon. It is pure: what it needs of the cluster
// (whether a kind is namespaced) is a lookup the caller injects.
package prepare

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/guard"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/render"
)

// ScopeLookup says whether a kind is namespaced. known is false for a kind
// the cluster does not serve: its object is left as it is, and the dry run
// names the unknown kind in the plan.
type ScopeLookup func(gvk schema.GroupVersionKind) (namespaced, known bool, err error)

// kept is the lookup with each kind's answer kept for the rest of one
// Prepare: a render names a few kinds many times over, and each lookup
// walks the cluster's REST mapper. An error is not kept.
func (l ScopeLookup) kept() ScopeLookup {
	if l == nil {
		return nil
	}
	type answer struct{ namespaced, known bool }
	seen := map[schema.GroupVersionKind]answer{}
	return func(gvk schema.GroupVersionKind) (bool, bool, error) {
		if a, ok := seen[gvk]; ok {
			return a.namespaced, a.known, nil
		}
		namespaced, known, err := l(gvk)
		if err == nil {
			seen[gvk] = answer{namespaced, known}
		}
		return namespaced, known, err
	}
}

// Input is what Prepare works on.
type Input struct {
	// Addon is the add-on the objects are applied for.
	Addon *capstanv1.Addon
	// Profile is the add-on's profile.
	Profile capstanv1.Profile
	// Namespace is the target namespace of namespaced objects that name
	// none.
	Namespace string
	// Render is what the source rendered to. Prepare never changes it.
	Render *render.Result
	// Scope is the lookup of kinds the render does not define itself.
	Scope ScopeLookup
}

// Result is the prepared objects.
type Result struct {
	// Objects are the objects to apply, in the render's order, after the
	// Namespace that spec.createNamespace adds, if any.
	Objects []*unstructured.Unstructured
	// Hooks are the render's hooks, prepared as the objects are.
	Hooks []render.Hook
	// CreatedNamespace is the Namespace added for spec.createNamespace: it
	// is created when missing and never counts as adopted.
	CreatedNamespace string
	// Left are the objects the render leaves out (render.Result.Left), and
	// those marked never to be applied (apply.Ignored), with their
	// namespaces set as the objects' are, so that an earlier render's
	// inventory can be matched with them.
	Left []*unstructured.Unstructured
	// Generated is the render's Generated, each with the namespace its
	// object was put in (placed), so that it names one prepared object,
	// hook, or object left out exactly.
	Generated []render.Generated
}

// Prepare copies the render's objects and hooks and:
//   - leaves out the objects and hooks marked never to be applied
//     (apply.Ignored);
//   - adds the target Namespace for spec.createNamespace (cluster profile),
//     unless the render has it;
//   - puts every namespaced object without a namespace into the target
//     namespace, and takes the namespace off cluster-scoped ones;
//   - labels every object for its add-on (api/v1alpha1 AppliedLabels);
//   - removes ttlSecondsAfterFinished from Jobs that are not hooks, since a
//     Job the TTL controller deleted would run again on the next sync, and
//     raises a hook Job's to at least hooks.MinJobTTLSeconds, so the hook
//     runner reads how it ended before it goes (raiseHookJobTTL);
//   - for a restricted add-on, hardens pod specs (guard.Harden) and makes
//     the Addon an owner of every object it may delete.
func Prepare(in Input) (Result, error) {
	var out Result
	if in.Render == nil {
		return out, nil
	}
	in.Scope = in.Scope.kept()
	var applied, ignored []*unstructured.Unstructured
	for _, o := range in.Render.Objects {
		// NOTE: after spec.patches, so a patch may mark an object of a
		// chart never to be applied.
		if apply.Ignored(o) != "" {
			ignored = append(ignored, o)
		} else {
			applied = append(applied, o)
		}
	}
	crdScopes := CRDScopes(applied)
	objs := make([]*unstructured.Unstructured, 0, len(applied)+1)
	if in.Addon.Spec.CreateNamespace && in.Profile == capstanv1.ProfileCluster && !Renders(applied, "Namespace", in.Namespace) {
		ns := &unstructured.Unstructured{}
		ns.SetAPIVersion("v1")
		ns.SetKind("Namespace")
		ns.SetName(in.Namespace)
		objs = append(objs, ns)
		out.CreatedNamespace = in.Namespace
	}
	// copies are the prepared copies of the render's objects and hooks.
	copies := make(map[*unstructured.Unstructured]*unstructured.Unstructured, len(in.Render.Objects)+len(in.Render.Hooks))
	for _, o := range applied {
		copies[o] = o.DeepCopy()
		objs = append(objs, copies[o])
	}
	out.Hooks = make([]render.Hook, 0, len(in.Render.Hooks))
	for _, h := range in.Render.Hooks {
		if apply.Ignored(h.Object) != "" {
			ignored = append(ignored, h.Object)
			continue
		}
		copies[h.Object] = h.Object.DeepCopy()
		h.Object = copies[h.Object]
		out.Hooks = append(out.Hooks, h)
	}
	all := make([]*unstructured.Unstructured, 0, len(objs)+len(out.Hooks))
	all = append(all, objs...)
	for _, h := range out.Hooks {
		all = append(all, h.Object)
	}
	for _, o := range all {
		if err := setNamespace(o, in, crdScopes); err != nil {
			return Result{}, err
		}
		// NOTE: GetLabels reads labels of which one is not a string as
		// none, and the object would be applied with Capstan's alone.
		if err := render.CheckMetadata(o); err != nil {
			// NOTE: the render checks what it makes; what it passed and
			// is wrong here, spec.patches made so.
			if len(in.Addon.Spec.Patches) > 0 {
				return Result{}, fmt.Errorf("prepare: after spec.patches, %w in the patch that sets it", err)
			}
			return Result{}, fmt.Errorf("prepare: %w", err)
		}
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, in.Addon.AppliedLabels())
		o.SetLabels(labels)
	}
	// NOTE: the render refuses an object written twice where it can say
	// where; two only collide here when one names the target namespace
	// and the other none, or a patch renamed one.
	seen := make(map[string]bool, len(objs))
	for _, o := range objs {
		ref := capstanv1.RefOf(o)
		if o.GetName() == "" {
			continue
		}
		if seen[ref.Key()] {
			return Result{}, fmt.Errorf("prepare: the render holds %s twice (one of them may name no namespace, and was put in this one; or spec.patches renamed one): "+
				"the cluster holds one object of a name, and two would be applied over each other on every sync; remove one, or give each a name of its own", ref.Describe())
		}
		seen[ref.Key()] = true
	}
	for _, o := range objs {
		if isJob(o) {
			unstructured.RemoveNestedField(o.Object, "spec", "ttlSecondsAfterFinished")
		}
	}
	for _, h := range out.Hooks {
		raiseHookJobTTL(h.Object)
	}
	if in.Profile == capstanv1.ProfileRestricted {
		// NOTE: Harden's errors are malformed pod templates, which the
		// guard's Check reports as violations in the plan.
		_ = guard.Harden(all)
		// NOTE: hooks are owned too, though they are in no inventory: a
		// tenant's chart could otherwise make any object a hook with no
		// delete policy (a Deployment at post-install) and leave it
		// running once the Addon is removed. The garbage collector
		// deletes it when the Addon goes; the Addon, held by Capstan's
		// finalizer, outlives its own delete hooks.
		for _, o := range all {
			if apply.Deletable(capstanv1.RefOf(o)) {
				// Appended, not replaced: owner references the chart sets
				// itself stay, and the guard refuses them.
				o.SetOwnerReferences(append(o.GetOwnerReferences(), in.Addon.OwnerReference()))
			}
		}
	}
	for _, o := range slices.Concat(in.Render.Left, ignored) {
		c := o.DeepCopy()
		if err := setNamespace(c, in, crdScopes); err != nil {
			return Result{}, err
		}
		copies[o] = c
		out.Left = append(out.Left, c)
	}
	out.Objects = objs
	out.Generated = placed(in.Render, copies)
	return out, nil
}

// placed returns the render's Generated with the namespace each object
// was put in. A Generated names its object as the chart rendered it, often
// with no namespace, and a chart may render two objects of one kind and
// name, one with no namespace and one in another namespace: only the
// namespace it was put in tells which prepared object it is.
func placed(r *render.Result, copies map[*unstructured.Unstructured]*unstructured.Unstructured) []render.Generated {
	if len(r.Generated) == 0 {
		return nil
	}
	out := make([]render.Generated, 0, len(r.Generated))
	for _, g := range r.Generated {
		objs := r.Objects
		if g.Hook {
			objs = make([]*unstructured.Unstructured, 0, len(r.Hooks))
			for _, h := range r.Hooks {
				objs = append(objs, h.Object)
			}
		}
		for _, o := range objs {
			if c, ok := copies[o]; ok && o.GetAPIVersion() == g.APIVersion && o.GetKind() == g.Kind &&
				o.GetNamespace() == g.Namespace && o.GetName() == g.Name {
				g.Namespace = c.GetNamespace()
				break
			}
		}
		out = append(out, g)
	}
	return out
}

// isJob reports whether o is a batch Job.
func isJob(o *unstructured.Unstructured) bool {
	return o.GetKind() == "Job" && strings.HasPrefix(o.GetAPIVersion(), "batch/")
}

// raiseHookJobTTL raises a hook Job's ttlSecondsAfterFinished below
// hooks.MinJobTTLSeconds to it. A Job with none is left as it is: it stays
// until its delete policy deletes it.
//
// NOTE: with ttlSecondsAfterFinished: 0 (Longhorn's and other charts' hook
// Jobs) the TTL controller deletes the Job the moment it finishes, before
// the runner reads whether it succeeded; the runner then cannot tell a
// migration that succeeded from one that failed. Helm, which watches the
// Job, sees its end before the deletion; Capstan reads it, so it keeps the
// Job a few minutes. A value that is not a number is left for the API
// server to refuse.
func raiseHookJobTTL(o *unstructured.Unstructured) {
	if ttl, found := hooks.JobTTL(o); found && ttl < hooks.MinJobTTLSeconds {
		_ = unstructured.SetNestedField(o.Object, hooks.MinJobTTLSeconds, "spec", "ttlSecondsAfterFinished")
	}
}

func setNamespace(o *unstructured.Unstructured, in Input, crdScopes map[schema.GroupKind]bool) error {
	gvk := o.GroupVersionKind()
	namespaced, known := crdScopes[gvk.GroupKind()]
	if !known && in.Scope != nil {
		var err error
		namespaced, known, err = in.Scope(gvk)
		if err != nil {
			return err
		}
	}
	switch {
	case !known:
		// The dry run names the unknown kind in the plan.
	case !namespaced:
		o.SetNamespace("")
	case o.GetNamespace() == "":
		o.SetNamespace(in.Namespace)
	}
	return nil
}

// CRDScopes returns, for each kind that a CRD among objs defines, whether it
// is namespaced.
func CRDScopes(objs []*unstructured.Unstructured) map[schema.GroupKind]bool {
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

// RenderedRefs are the references of the prepared objects that the render
// holds, for the prune: every one but the Namespace that
// spec.createNamespace adds (createdNamespace, as Result.CreatedNamespace
// names it). That Namespace is never pruned, and an add-on whose render
// is empty holds only it: counted as rendered, it would hide the empty
// render that must never prune everything (apply.PruneSet).
func RenderedRefs(objs []*unstructured.Unstructured, createdNamespace string) []capstanv1.ObjectRef {
	out := make([]capstanv1.ObjectRef, 0, len(objs))
	for _, o := range objs {
		if createdNamespace != "" && o.GetKind() == "Namespace" && o.GetAPIVersion() == "v1" && o.GetName() == createdNamespace {
			continue
		}
		out = append(out, capstanv1.RefOf(o))
	}
	return out
}

// Renders reports whether objs hold an object of kind and name.
func Renders(objs []*unstructured.Unstructured, kind, name string) bool {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return true
		}
	}
	return false
}
