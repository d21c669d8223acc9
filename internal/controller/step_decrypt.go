package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/sops"
	"capstan.dev/capstan/internal/values"
)

// decryptFolder reads the age keys of spec.decryption's Secret, with which
// the render decrypts each file of a git folder that SOPS encrypted as it
// reads it: only the files the folder reaches, never the rest of its
// repository. The values they held are hidden wherever the controller
// shows text. A person's problem (no Secret, no key, and at the render a
// file no key opens or that changed after it was encrypted) goes into the
// plan, which blocks, and nothing is rendered.
func (r *AddonReconciler) decryptFolder(ctx context.Context, s *scope) error {
	d := s.addon.Spec.Decryption
	if d == nil {
		return nil
	}
	problem := func(path, format string, args ...any) error {
		s.noInputs = true
		s.valuesErrors = append(s.valuesErrors, capstanv1.ValuesError{Path: path, Rule: "decryption",
			Message: fmt.Sprintf(format, args...)})
		return nil
	}
	if s.profile != capstanv1.ProfileCluster {
		return problem("spec.decryption", "a restricted add-on decrypts nothing: its secret inputs go through Capstan's values Secrets")
	}
	secret := &corev1.Secret{}
	key := types.NamespacedName{Namespace: s.addon.Namespace, Name: d.SecretRef.Name}
	if err := r.APIReader.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return problem("spec.decryption.secretRef", "Secret %s does not exist; create it with the age key of the folder's SOPS files in an entry ending in %s", key, sops.KeySuffix)
		}
		return fmt.Errorf("read the decryption Secret %s: %w", key, err)
	}
	var ids []age.Identity
	for _, name := range slices.Sorted(maps.Keys(secret.Data)) {
		if !strings.HasSuffix(name, sops.KeySuffix) {
			continue
		}
		found, err := sops.ParseKeys(name, secret.Data[name])
		if err != nil {
			return problem("spec.decryption.secretRef", "Secret %s: %v", key, err)
		}
		ids = append(ids, found...)
	}
	if len(ids) == 0 {
		return problem("spec.decryption.secretRef", "Secret %s has no entry ending in %s: put the age key (AGE-SECRET-KEY-1…) in one, such as age%s", key, sops.KeySuffix, sops.KeySuffix)
	}
	// The values the files hold are hidden with the Secret variables,
	// within the same bound as a chart's secret values.
	var tally values.SecretTally
	if s.variables != nil {
		tally.Add(s.variables.Secret...)
	}
	s.decrypter = &sops.Decrypter{IDs: ids, Admit: admitWithin(&tally)}
	return nil
}

// admitWithin admits a SOPS file's values while tally, with them, stays
// within the bound of secret values, and counts them; a file it refuses
// is not counted, so only the file that crossed the bound is named, not
// every one read after it.
func admitWithin(tally *values.SecretTally) func(secrets []string) error {
	return func(secrets []string) error {
		if count, kib, ok := tally.AddWithin(secrets...); !ok {
			return fmt.Errorf("with it the folder's SOPS files and Secret variables hold %d secret values (%d KiB), more than the %d values and %d KiB Capstan hides in what it shows: encrypt only what is secret (sops --encrypted-regex), or split the folder into several add-ons",
				count, kib, values.MaxSecretValues, values.MaxSecretBytes>>10)
		}
		return nil
	}
}

// decryptProblems puts what the render's decryption found into the plan,
// which then blocks, and reports whether there was any: a render that read
// a file it could not decrypt is no render.
func (s *scope) decryptProblems() bool {
	err := s.decrypter.Err()
	if err == nil {
		return false
	}
	s.noInputs = true
	s.valuesErrors = append(s.valuesErrors, capstanv1.ValuesError{Path: "spec.decryption", Rule: "decryption", Message: err.Error()})
	return true
}
