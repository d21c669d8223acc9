package controller

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"

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
	return r.verifySignature(ctx, s, creds)
}

// verifySignature checks the chart's provenance file when
// spec.chart.verify asks for it. A signature that is missing or wrong
// Blocks the add-on before anything is rendered.
func (r *AddonReconciler) verifySignature(ctx context.Context, s *scope, creds *source.Credentials) (bool, error) {
	c := s.addon.Spec.Chart
	if c == nil || c.Verify == nil || c.Verify.Provenance == nil || !s.artifact.IsChart() {
		return false, nil
	}
	p := c.Verify.Provenance
	key := p.Key
	if key == "" {
		key = "keyring"
	}
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: s.addon.Namespace, Name: p.SecretRef.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return false, terminal{fmt.Errorf("the keyring Secret %s/%s that spec.chart.verify names does not exist; create it", s.addon.Namespace, p.SecretRef.Name)}
		}
		return false, err
	}
	keyring, ok := secret.Data[key]
	if !ok {
		return false, terminal{fmt.Errorf("the keyring Secret %s/%s has no key %q", s.addon.Namespace, p.SecretRef.Name, key)}
	}
	chart := s.artifact.Chart
	prov, err := r.Fetcher.Provenance(ctx, chart, creds)
	if err == nil {
		filename := path.Base(chart.URL)
		if u, perr := url.Parse(chart.URL); perr == nil {
			filename = path.Base(u.Path)
		}
		var signer string
		signer, err = source.VerifyProvenance(prov, keyring, filename, chart.Digest)
		if err == nil {
			s.signedBy = signer
			return false, nil
		}
	}
	var sig *source.SignatureError
	if !errors.As(err, &sig) {
		return false, terminal{err}
	}
	reason := "SignatureInvalid"
	if sig.Missing {
		reason = "SignatureMissing"
	}
	s.found.signature = &hold{reason: reason, blocked: true, message: sig.Error() + "; nothing from this chart is applied"}
	return true, nil
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
