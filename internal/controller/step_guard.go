package controller

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/guard"
	"capstan.dev/capstan/internal/prepare"
)

// checkGuardrails refuses sync waves that are not numbers, and runs the
// guardrails on restricted add-ons, hooks included.
// The platform's Secrets count as handed over only when the chart was given
// the platform's facts.
func (r *AddonReconciler) checkGuardrails(ctx context.Context, s *scope) (bool, error) {
	s.violations = append(s.violations, apply.WaveViolations(s.objects)...)
	if s.profile != capstanv1.ProfileRestricted || s.render == nil {
		return false, nil
	}
	all := guarded(s)
	s.violations = append(s.violations, prepare.RandomValues(s.generated, s.objects, s.hooks, s.namespace)...)
	if s.artifact != nil && s.artifact.IsChart() && s.artifact.Chart.Chart.Metadata != nil {
		md := s.artifact.Chart.Chart.Metadata
		s.violations = append(s.violations, guard.CheckChart(s.addon, guard.ChartMetadata{APIVersion: md.APIVersion, Type: md.Type, Annotations: md.Annotations})...)
	}
	s.violations = append(s.violations, guard.Check(ctx, all, r.guardContext(s))...)
	return false, nil
}

// guarded are the objects the guardrails check: every rendered object and
// hook, but the tests.
func guarded(s *scope) []*unstructured.Unstructured {
	all := append([]*unstructured.Unstructured{}, s.objects...)
	for _, h := range s.hooks {
		if h.TestOnly() {
			// NOTE: a test runs only when asked, and is checked then
			// (runTests): a test that breaks a guardrail must not hold
			// the add-on's sync.
			continue
		}
		all = append(all, h.Object)
	}
	return all
}

// guardContext is what the guardrails know of a restricted add-on.
func (r *AddonReconciler) guardContext(s *scope) guard.Context {
	var handedOver []string
	if s.values == nil || !s.values.PlatformWithheld {
		handedOver = s.platform.HandedOverSecrets()
	}
	return guard.Context{
		Namespace: s.addon.Namespace,
		AddonName: s.addon.Name,
		Platform:  guard.PlatformRefs{Secrets: handedOver},
		Lookup:    guard.ClientLookup(r.APIReader, s.addon),
	}
}
