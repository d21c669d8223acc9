package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/source"
)

// fetch fetches the source. It guarantees s.artifact, and the source and
// version in status.
func (r *AddonReconciler) fetch(ctx context.Context, s *scope) (bool, error) {
	creds, err := r.credentials(ctx, s, source.SecretRef(s.addon.Spec))
	if err != nil {
		return false, err
	}
	art, err := r.Fetcher.Fetch(ctx, s.addon.Spec, creds)
	if errors.Is(err, source.ErrNoSource) {
		return false, terminal{err}
	}
	if err != nil {
		return false, err
	}
	s.artifact = art
	s.addon.Status.Source = art.Display
	s.addon.Status.Version = art.Version
	return false, nil
}

func (r *AddonReconciler) credentials(ctx context.Context, s *scope, ref *capstanv1.LocalObjectReference) (*source.Credentials, error) {
	if ref == nil {
		return nil, nil
	}
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: s.addon.Namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, terminal{fmt.Errorf("the credentials Secret %s/%s does not exist; create it or remove secretRef", s.addon.Namespace, ref.Name)}
		}
		return nil, err
	}
	creds, err := source.CredentialsFromSecret(secret)
	if err != nil {
		return nil, terminal{err}
	}
	return creds, nil
}
