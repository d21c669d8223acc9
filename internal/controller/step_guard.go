package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/guard"
	"capstan.dev/capstan/internal/prepare"
	"capstan.dev/capstan/internal/render"
)

// checkGuardrails refuses sync waves that are not numbers and a chart's
// hooks without a name, and runs the guardrails on restricted add-ons,
// hooks included.
// The platform's Secrets count as handed over only when the chart was given
// the platform's facts.
func (r *AddonReconciler) checkGuardrails(ctx context.Context, s *scope) (bool, error) {
	found := r.renderViolations(ctx, s)
	if len(found) > 0 && onlyReadsFailed(append(slices.Clone(s.violations), found...)) {
		// NOTE: a live object that could not be read (a timeout, an API
		// server under load) is no fault of the chart's: the reconcile is
		// retried with backoff, rather than Blocked and Stalled until the
		// next resync. Beside another violation, the plan is Blocked for
		// that one anyway, and shows both.
		v := found[0]
		return false, fmt.Errorf("checking the guardrails of %s: %s", v.Object.Describe(), v.Message)
	}
	s.violations = append(s.violations, found...)
	return false, nil
}

// renderViolations adds to s.violations those of the render that need no
// live read, and returns those guard.Check finds, a read that failed
// (ownership-unknown) among them, for the caller to judge: the sync
// retries such a read, and the uninstall lets refusedDeleteHooks decide,
// as only the delete hooks' reads matter to it.
func (r *AddonReconciler) renderViolations(ctx context.Context, s *scope) []capstanv1.Violation {
	s.violations = append(s.violations, apply.WaveViolations(s.objects)...)
	unnamed := unnamedHooks(s.hooks)
	s.violations = append(s.violations, unnamed...)
	if s.profile != capstanv1.ProfileRestricted || s.render == nil {
		return nil
	}
	all := guarded(s)
	s.violations = append(s.violations, prepare.RandomValues(s.generated, s.objects, s.hooks, s.namespace)...)
	if s.artifact != nil && s.artifact.IsChart() && s.artifact.Chart.Chart.Metadata != nil {
		md := s.artifact.Chart.Chart.Metadata
		s.violations = append(s.violations, guard.CheckChart(s.addon, guard.ChartMetadata{APIVersion: md.APIVersion, Type: md.Type, Annotations: md.Annotations})...)
	}
	// NOTE: the guardrails' own name-invalid of such a hook says less
	// (no template): unnamedHooks has it already.
	return slices.DeleteFunc(guard.Check(ctx, all, r.guardContext(s)), func(v capstanv1.Violation) bool {
		return v.Rule == guard.RuleNameInvalid && slices.ContainsFunc(unnamed, func(u capstanv1.Violation) bool { return u.Object == v.Object })
	})
}

// unnamedHooks are the violations of a chart's hooks that have a
// metadata.generateName and no name, in both profiles. Capstan runs a hook
// by its name: status.hook names it before it is made, the run that goes
// on after a restart finds it again by it, and its delete policies delete
// it by it; server-side apply, too, needs a name (Helm v4 fails on such a
// hook as well). Without this, such a hook would fail only when it runs:
// a pre-delete hook at the uninstall, which would then stop for ever. A
// folder's hook is named by the render (render.generatedHookName), a test
// is checked when it runs, and a hook of no known event never runs.
func unnamedHooks(hs []render.Hook) []capstanv1.Violation {
	var out []capstanv1.Violation
	for _, h := range hs {
		if h.Object.GetName() != "" || !h.Runnable() || h.TestOnly() {
			continue
		}
		fix := "render a fixed metadata.name, such as {{ .Release.Name }}-" + strings.TrimSuffix(h.Object.GetGenerateName(), "-")
		if h.Object.GetGenerateName() == "" {
			fix = "render a fixed metadata.name"
		}
		out = append(out, capstanv1.Violation{Object: capstanv1.RefOf(h.Object), Path: "metadata.name", Rule: guard.RuleNameInvalid, Message: fmt.Sprintf(
			"the %s hook %s in %s has no metadata.name (generateName %q is not supported for a chart's hooks: Capstan runs a hook by its name, to wait for it, find it again and delete it by its policies); %s",
			strings.Join(h.Events, ","), h.Object.GetKind(), h.Template, h.Object.GetGenerateName(), fix)})
	}
	return out
}

// onlyReadsFailed reports whether every violation of vs is a live read
// that failed (ownership-unknown): no fault of the chart's, but one to
// retry.
func onlyReadsFailed(vs []capstanv1.Violation) bool {
	return !slices.ContainsFunc(vs, func(v capstanv1.Violation) bool { return v.Rule != guard.RuleOwnershipUnknown })
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
