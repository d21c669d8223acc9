package values

import capstanv1 "capstan.dev/capstan/api/v1alpha1"

// FieldErrors are the Addon's inputs that its kind of source has no use
// for: values for a git folder, which is used as it is, and substitute or
// decryption for a chart, which takes values. Each Blocks the add-on
// rather than be dropped without a word. The controller and capstan render
// both report them.
func FieldErrors(spec *capstanv1.AddonSpec, chart bool) []capstanv1.ValuesError {
	var out []capstanv1.ValuesError
	if !chart {
		if spec.Values != nil || len(spec.ValuesFrom) > 0 {
			out = append(out, capstanv1.ValuesError{Path: "spec.values", Rule: "git-source",
				Message: "values and valuesFrom apply to Helm charts only; a git folder is used as it is, with spec.substitute for its ${variables}"})
		}
		return out
	}
	if spec.Substitute != nil || len(spec.SubstituteFrom) > 0 {
		out = append(out, capstanv1.ValuesError{Path: "spec.substitute", Rule: "chart-source",
			Message: "substitute and substituteFrom apply to git folders only; a chart takes values and valuesFrom"})
	}
	if spec.Decryption != nil {
		out = append(out, capstanv1.ValuesError{Path: "spec.decryption", Rule: "chart-source",
			Message: "decryption applies to git folders only; a chart takes secret values from valuesFrom"})
	}
	return out
}
