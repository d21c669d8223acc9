package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/guard"
	"capstan.dev/capstan/internal/ignore"
)

// keepIgnored leaves the fields spec.ignore names to whoever else manages
// them: each object that exists and that a rule selects is read, and each
// of its ignored paths takes the value it runs with, or is left out when it
// runs with none (ignore.Keep). An object that does not exist yet is
// created whole. It guarantees that the guardrails and the preview see the
// objects as they would be applied, so an ignored field is neither drift
// nor changed by an upgrade; a plan notice names the fields it kept.
//
// A restricted add-on reads only objects it applied before (its
// inventory): the read is the controller's own, and the guardrails have
// not yet judged what the render names, so a tenant's chart must not make
// it read anything else. Of those it keeps fields only of one shown to be
// its own (apply.NotOurs), since an inventory entry alone proves nothing.
// Its pod defaults (guard.Harden) are set again on
// what it kept: an ignored path never undoes them.
func (r *AddonReconciler) keepIgnored(ctx context.Context, s *scope) (bool, error) {
	rules := s.addon.Spec.Ignore
	if len(rules) == 0 || len(s.objects) == 0 {
		return false, nil
	}
	if err := ignore.Check(rules); err != nil {
		return false, terminal{err}
	}
	for i, rule := range rules {
		if !slices.ContainsFunc(s.objects, func(o *unstructured.Unstructured) bool { return ignore.Selects(rule.Target, o) }) {
			// NOTE: a kind written in lower case, or a name the chart
			// does not render, would otherwise be a rule that silently
			// does nothing.
			s.ignoreNotices = append(s.ignoreNotices, capstanv1.Notice{Path: fmt.Sprintf("spec.ignore[%d]", i),
				Message: "selects none of the objects the chart renders: check its target's group, kind, namespace and name"})
		}
	}
	kept, err := r.keepRunning(ctx, s)
	for _, k := range kept {
		path := "spec.ignore/" + k.obj.GetKind() + "/" + strings.TrimPrefix(k.obj.GetNamespace()+"/"+k.obj.GetName(), "/")
		if len(k.Kept) > 0 {
			s.ignoreNotices = append(s.ignoreNotices, capstanv1.Notice{Path: path,
				Message: strings.Join(k.Kept, ", ") + " left as the object runs, not as the chart renders it"})
		}
		if len(k.Absent) > 0 {
			s.ignoreNotices = append(s.ignoreNotices, capstanv1.Notice{Path: path,
				Message: strings.Join(k.Absent, ", ") + " is in neither the object as it runs nor as the chart renders it: check the path"})
		}
		if len(k.Moved) > 0 {
			s.ignoreNotices = append(s.ignoreNotices, capstanv1.Notice{Path: path,
				Message: strings.Join(k.Moved, ", ") + " names by its index a list item that is another one in the object as it runs than as the chart renders it (an item was put before it, such as an injected container): left as the chart renders it"})
		}
		if len(k.Unheld) > 0 {
			s.ignoreNotices = append(s.ignoreNotices, capstanv1.Notice{Path: path,
				Message: strings.Join(k.Unheld, ", ") + " names a place the chart's manifest cannot take as the object runs (a list the chart renders without, or with fewer items; a value with no fields; or a list item the object runs without, which is not removed): left as the chart renders it"})
		}
	}
	return false, err
}

// keptFields are what keepRunning found of one object's ignored paths
// (ignore.Keep).
type keptFields struct {
	obj *unstructured.Unstructured
	ignore.Result
}

// keepRunning reads each object that exists and that a rule of
// spec.ignore selects, and sets its ignored paths in s.objects to what it
// runs with (ignore.Keep). The preview's step calls it, and the apply
// calls it again just before it applies, since pre hooks may have run for
// minutes in between while an autoscaler went on scaling.
func (r *AddonReconciler) keepRunning(ctx context.Context, s *scope) ([]keptFields, error) {
	rules := s.addon.Spec.Ignore
	restricted := s.profile == capstanv1.ProfileRestricted
	applied := map[string]bool{}
	for _, ref := range capstanv1.RefsOf(s.addon.Status.Inventory) {
		applied[ref.Key()] = true
	}
	var out []keptFields
	var changed []*unstructured.Unstructured
	for _, obj := range s.objects {
		paths := ignore.Paths(rules, obj)
		if len(paths) == 0 || (restricted && !applied[capstanv1.RefOf(obj).Key()]) {
			continue
		}
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(obj.GroupVersionKind())
		err := s.applier.Client.Get(ctx, client.ObjectKeyFromObject(obj), live)
		if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
			continue // created whole; a kind whose CRD comes with the add-on has none yet
		}
		if apierrors.IsForbidden(err) {
			return out, terminal{fmt.Errorf("reading %s %s for spec.ignore was refused (%w): let Capstan's account get %s objects, or narrow the rule's target",
				obj.GetKind(), client.ObjectKeyFromObject(obj), err, obj.GetKind())}
		}
		if err != nil {
			return out, fmt.Errorf("reading %s %s for spec.ignore: %w", obj.GetKind(), client.ObjectKeyFromObject(obj), err)
		}
		if restricted && apply.NotOurs(s.addon, live) != "" {
			// NOTE: the inventory is saved before anything is applied, so
			// an install that stopped there (a pre-install hook that fails
			// on purpose) names an object someone else may create later.
			// Its fields are not kept and no notice names it: whether a
			// path is "left as the object runs" would tell the tenant
			// whether the value its chart guessed is the one it holds.
			continue
		}
		k, err := ignore.Keep(obj, live, paths)
		if err != nil {
			return out, terminal{fmt.Errorf("spec.ignore on %s %s: %w", obj.GetKind(), client.ObjectKeyFromObject(obj), err)}
		}
		if len(k.Kept) > 0 {
			changed = append(changed, obj)
		}
		if len(k.Kept) > 0 || len(k.Absent) > 0 || len(k.Moved) > 0 || len(k.Unheld) > 0 {
			out = append(out, keptFields{obj: obj, Result: k})
		}
	}
	if restricted && len(changed) > 0 {
		// NOTE: Harden's errors are malformed pod templates, which the
		// guard's Check reports as violations in the plan.
		_ = guard.Harden(changed)
	}
	return out, nil
}
