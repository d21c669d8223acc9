package controller

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/guard"
)

// checkGuardrails refuses sync waves that are not numbers, and runs the
// guardrails on restricted add-ons, hooks included.
// The platform's Secrets count as handed over only when the chart was given
// the platform's facts.
func (r *AddonReconciler) checkGuardrails(ctx context.Context, s *scope) (bool, error) {
	s.violations = append(s.violations, waveViolations(s.objects)...)
	if s.profile != capstanv1.ProfileRestricted || s.render == nil {
		return false, nil
	}
	all := guarded(s)
	// A tenant's chart must render the same every time: a value it makes
	// at random (genCA, randAlphaNum, now) would change on every sync, and
	// a name it makes at random would create another object, or run
	// another hook, on every sync.
	checked := make(map[*unstructured.Unstructured]bool, len(all))
	for _, o := range all {
		checked[o] = true
	}
	for _, g := range s.render.Generated {
		if !checked[s.renderedObject(g)] {
			continue // marked never to be applied (apply.Ignored), or a test, checked when it runs
		}
		ref := capstanv1.ObjectRef{APIVersion: g.APIVersion, Kind: g.Kind, Namespace: s.namespace, Name: g.Name}
		if g.RandomName() {
			s.violations = append(s.violations, capstanv1.Violation{Object: ref, Path: "metadata.name", Rule: "random-values",
				Message: "the chart names this object differently each time (randAlphaNum, uuidv4, now…), so every sync would create another; give it a fixed name"})
			continue
		}
		for _, p := range g.Paths {
			s.violations = append(s.violations, capstanv1.Violation{Object: ref, Path: strings.Join(p, "."), Rule: "random-values",
				Message: "the chart renders this field differently each time (genCA, randAlphaNum, now…); declare the value in values.schema.json with x-capstan-generate, which Capstan generates once and keeps"})
		}
	}
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
