package controller

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/guard"
)

// checkGuardrails runs the guardrails on restricted add-ons, hooks included.
// The platform's Secrets count as handed over only when the chart was given
// the platform's facts.
func (r *AddonReconciler) checkGuardrails(ctx context.Context, s *scope) (bool, error) {
	if s.profile != capstanv1.ProfileRestricted || s.render == nil {
		return false, nil
	}
	var handedOver []string
	if s.values == nil || !s.values.PlatformWithheld {
		handedOver = s.platform.HandedOverSecrets()
	}
	all := append([]*unstructured.Unstructured{}, s.objects...)
	for _, h := range s.hooks {
		all = append(all, h.Object)
	}
	s.violations = append(s.violations, guard.Check(ctx, all, guard.Context{
		Namespace: s.addon.Namespace,
		AddonName: s.addon.Name,
		Platform:  guard.PlatformRefs{Secrets: handedOver},
		Lookup:    guard.ClientLookup(r.APIReader, s.addon),
	})...)
	return false, nil
}
