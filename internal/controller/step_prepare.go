package controller

import (
	"context"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/guard"
	"capstan.dev/capstan/internal/prepare"
)

// prepare makes the rendered objects and hooks ready to preview and apply
// (prepare.Prepare: namespaces, labels, Job TTL, hardening and owner
// references), and records what a restricted Addon's spec asks for beyond
// its profile as violations. It guarantees s.objects and s.hooks when the
// source rendered.
func (r *AddonReconciler) prepare(ctx context.Context, s *scope) (bool, error) {
	if s.render == nil {
		return false, nil
	}
	if s.profile == capstanv1.ProfileRestricted {
		s.violations = append(s.violations, guard.CheckSpec(s.addon)...)
	}
	res, err := prepare.Prepare(prepare.Input{
		Addon: s.addon, Profile: s.profile, Namespace: s.namespace, Render: s.render, Scope: s.cluster.kindScope,
	})
	if err != nil {
		return false, err
	}
	s.objects, s.hooks, s.left, s.createNamespace, s.generated = res.Objects, res.Hooks, res.Left, res.CreatedNamespace, res.Generated
	return false, nil
}
