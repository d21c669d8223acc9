// Package values computes an add-on's chart values: it reads spec.values and
// the Secrets and ConfigMaps that spec.valuesFrom names, merges them over the
// generated values and the chart's defaults in Capstan's precedence, sets the
// reserved platform key, validates the result against the chart's
// values.schema.json, and keeps secret inputs out of everything that is shown.
//
// It also owns the values Secrets of an add-on: the create-only writer of
// secret inputs, the generated-once values Secret, adoption, cleanup of
// unreferenced values Secrets and their hand-back when a removal keeps values.
//
// docs/values.md describes the rules for users; the functions here implement
// them in the order the controller calls them:
//
//	sources, err := values.Read(ctx, c, addon, profile)
//	schema, err := values.SchemaFor(chart, sources)
//	generated, err := values.EnsureGenerated(ctx, c, addon, profile, schema)
//	result, err := values.Compose(values.Inputs{Chart: chart, Generated: generated, Sources: sources, Platform: platform})
//	// result.Values goes to Helm, result.Errors to the plan, values.Redact for display.
package values
