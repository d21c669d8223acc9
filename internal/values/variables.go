package values

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/render"
)

// Variables are what a git folder's ${name} is substituted with
// (spec.substitute and spec.substituteFrom), and which of their values
// came from a Secret, to be hidden wherever Capstan shows them.
type Variables struct {
	Values map[string]string
	Secret []string
}

// ReadVariables reads an add-on's variables: each object spec.substituteFrom
// names, in order, a later one winning, then spec.substitute over them.
// Every key of a ConfigMap's data or a Secret's data whose name is a
// variable name (letters, digits and underscores, not starting with a
// digit) is a variable; other keys, which no ${...} can name, are skipped.
// Every value, spec.substitute's too, loses its newlines (VariableValue).
// It returns nil when the add-on asks for no substitution.
//
// The restricted profile takes spec.substitute only: its objects are the
// add-on's own values objects, which the values cleanup would not know
// were in use.
//
// Problems a person must fix come back together as an *InvalidError; an
// error from the API server is returned as it is, to be retried.
func ReadVariables(ctx context.Context, r client.Reader, addon *capstanv1.Addon, profile capstanv1.Profile) (*Variables, error) {
	spec := &addon.Spec
	if spec.Substitute == nil && len(spec.SubstituteFrom) == 0 {
		return nil, nil
	}
	vars := &Variables{Values: map[string]string{}}
	secret := map[string]bool{}
	var errs errorList
	if profile != capstanv1.ProfileCluster && len(spec.SubstituteFrom) > 0 {
		errs.add("spec.substituteFrom", "substituteFrom.restricted",
			"a restricted add-on takes its variables from spec.substitute only; move them there")
		return nil, errs.err()
	}
	for i, ref := range spec.SubstituteFrom {
		field := fmt.Sprintf("spec.substituteFrom[%d]", i)
		key := types.NamespacedName{Namespace: addon.Namespace, Name: ref.Name}
		if ref.Kind != "Secret" && ref.Kind != "ConfigMap" {
			errs.add(field, "substituteFrom.kind", "kind must be Secret or ConfigMap")
			continue
		}
		data, err := objectData(ctx, r, key, ref.Kind)
		if apierrors.IsNotFound(err) {
			if !ref.Optional {
				errs.add(field, "substituteFrom.missing", "%s %s does not exist; create it, or mark the entry optional", ref.Kind, ref.Name)
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s %s for %s: %w", ref.Kind, key, field, err)
		}
		fromSecret := ref.Kind == "Secret"
		for k, v := range data {
			if !render.IsVariableName(k) {
				continue
			}
			vars.Values[k] = render.VariableValue(v)
			secret[k] = fromSecret
		}
	}
	for k, v := range spec.Substitute {
		if !render.IsVariableName(k) {
			errs.add("spec.substitute", "substitute.name", "%q is not a variable name: use letters, digits and underscores, not starting with a digit", k)
			continue
		}
		vars.Values[k] = render.VariableValue(v)
		secret[k] = false
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	var tally SecretTally
	for _, k := range slices.Sorted(maps.Keys(secret)) {
		if secret[k] {
			vars.Secret = append(vars.Secret, vars.Values[k])
			tally.Add(vars.Values[k])
		}
	}
	if !tally.Within() {
		return nil, invalid("spec.substituteFrom", RuleTooManySecrets,
			"the Secrets spec.substituteFrom names hold %d secret values (%d KiB) as variables, more than the %d values and %d KiB Capstan hides in what it shows: keep only what is secret in those Secrets, and move the rest to a ConfigMap",
			tally.Count(), tally.KiB(), MaxSecretValues, MaxSecretBytes>>10)
	}
	return vars, nil
}

// objectData reads the text data of a Secret or a ConfigMap.
func objectData(ctx context.Context, r client.Reader, key types.NamespacedName, kind string) (map[string]string, error) {
	data := map[string]string{}
	if kind == "Secret" {
		s := &corev1.Secret{}
		if err := r.Get(ctx, key, s); err != nil {
			return nil, err
		}
		for k, v := range s.Data {
			data[k] = string(v)
		}
		return data, nil
	}
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, key, cm); err != nil {
		return nil, err
	}
	maps.Copy(data, cm.Data)
	return data, nil
}
