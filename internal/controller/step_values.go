package controller

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/values"
)

// resolveValues merges the add-on's values in Capstan's precedence and
// validates them. Values problems do not stop the reconcile: they go into
// the plan, which blocks.
func (r *AddonReconciler) resolveValues(ctx context.Context, s *scope) (bool, error) {
	s.valuesErrors = append(s.valuesErrors, values.FieldErrors(&s.addon.Spec, s.artifact.IsChart())...)
	if !s.artifact.IsChart() {
		vars, err := values.ReadVariables(ctx, r.APIReader, s.addon, s.profile)
		if err != nil {
			s.noInputs = true
			return false, s.valuesProblem(err)
		}
		s.variables = vars
		return false, r.decryptFolder(ctx, s)
	}
	sources, err := values.Read(ctx, r.APIReader, s.addon, s.profile)
	if err != nil {
		return false, s.valuesProblem(err)
	}
	// The schemas of the chart as the user's values resolve its
	// dependencies: a disabled subchart has nothing generated, an aliased
	// one has it under its alias.
	schema, err := values.SchemaFor(s.artifact.Chart.Chart, sources)
	if err != nil {
		s.valuesErrors = append(s.valuesErrors, capstanv1.ValuesError{Path: values.SchemaErrorPath, Rule: "schema", Message: err.Error()})
		return false, nil
	}
	// NOTE: a plan on demand writes nothing: generated values not kept yet
	// are drawn in memory, and the values objects are adopted by the next
	// sync instead.
	var generated map[string]any
	if s.readOnly {
		generated, err = values.PreviewGenerated(ctx, r.APIReader, s.addon, s.profile, schema)
	} else {
		generated, err = values.EnsureGenerated(ctx, r.Client, s.addon, s.profile, schema)
	}
	if err != nil {
		return false, s.valuesProblem(err)
	}
	if s.profile == capstanv1.ProfileRestricted && !s.readOnly {
		// Label and own the values objects this add-on reads, so cleanup
		// and keep-on-remove find them.
		if _, err := values.Adopt(ctx, r.Client, s.addon, s.profile); err != nil {
			return false, err
		}
	}
	// NOTE: the namespace fact is the controller's, where the platform
	// runs; the add-on's own is .Release.Namespace already.
	reader := r.PlatformReader
	if reader == nil {
		reader = r.APIReader
	}
	s.platform, err = values.LoadPlatform(ctx, reader, types.NamespacedName{Namespace: r.Config.Namespace, Name: r.Config.PlatformConfigMap}, r.Config.Namespace)
	if err != nil {
		return false, err
	}
	res, err := values.Compose(values.Inputs{
		Chart: s.artifact.Chart.Chart, Generated: generated, Sources: sources,
		Platform: s.platform.Values(), PlatformKey: r.Config.PlatformKey,
	})
	if err != nil {
		return false, s.valuesProblem(err)
	}
	s.values = res
	s.valuesErrors = append(s.valuesErrors, res.Errors...)
	return false, nil
}

// valuesProblem records a person's values problem in the plan, which then
// blocks, and returns any other error.
func (s *scope) valuesProblem(err error) error {
	var inv *values.InvalidError
	if errors.As(err, &inv) {
		s.valuesErrors = append(s.valuesErrors, inv.Errors...)
		return nil
	}
	return err
}
