package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/lru"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/source"
)

// fetch fetches the source, past the caches when a refresh asked for it.
// It guarantees s.artifact, and the source and version in status.
func (r *AddonReconciler) fetch(ctx context.Context, s *scope) (bool, error) {
	creds, err := r.credentials(ctx, s, source.SecretRef(s.addon.Spec))
	if err != nil {
		return false, err
	}
	fetch := r.Fetcher.Fetch
	if s.refresh != "" {
		fetch = r.Fetcher.Refetch
	}
	art, err := fetch(ctx, s.addon.Spec, creds)
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

// verifySignature checks the chart's signature when spec.chart.verify asks
// for it: the provenance file of a chart from a repository or an https
// archive, or the cosign signature of an OCI chart. A signature that is
// missing or wrong Blocks the add-on before anything is rendered.
func (r *AddonReconciler) verifySignature(ctx context.Context, s *scope, creds *source.Credentials) (bool, error) {
	c := s.addon.Spec.Chart
	if c == nil || c.Verify == nil || !s.artifact.IsChart() {
		return false, nil
	}
	chart := s.artifact.Chart
	var signer, seen string
	var err error
	switch v := c.Verify; {
	case v.Provenance != nil:
		var keyring, prov []byte
		keyring, err = r.secretKey(ctx, s, v.Provenance.SecretRef.Name, v.Provenance.Key, "keyring", "spec.chart.verify.provenance")
		if err != nil {
			return false, err
		}
		if seen = signatureKey("provenance", chart.Digest, keyring); r.signedBy(seen, s) {
			return false, nil
		}
		prov, err = r.Fetcher.Provenance(ctx, chart, creds)
		if err == nil {
			signer, err = source.VerifyProvenance(prov, keyring, chart.FileName(), chart.Digest)
		}
	case v.Cosign != nil:
		var keys []byte
		var sigs []source.CosignSignature
		keys, err = r.secretKey(ctx, s, v.Cosign.SecretRef.Name, v.Cosign.Key, "cosign.pub", "spec.chart.verify.cosign")
		if err != nil {
			return false, err
		}
		if seen = signatureKey("cosign", chart.Manifest, keys); r.signedBy(seen, s) {
			return false, nil
		}
		sigs, err = r.Fetcher.CosignSignatures(ctx, chart, creds)
		if err == nil {
			signer, err = source.VerifyCosign(sigs, keys, chart.Manifest)
		}
	default:
		return false, nil
	}
	if err == nil {
		s.signedBy = signer
		r.verifiedSignatures.store(seen, signer)
		return false, nil
	}
	var sig *source.SignatureError
	if !errors.As(err, &sig) {
		var fe *source.FetchError
		if errors.As(err, &fe) {
			// NOTE: a registry or server that is down is retried; only a
			// person can fix a bad key.
			return false, err
		}
		return false, terminal{err}
	}
	reason := "SignatureInvalid"
	if sig.Missing {
		reason = "SignatureMissing"
	}
	s.found.signature = &hold{reason: reason, blocked: true, message: sig.Error() + "; nothing from this chart is applied", err: err}
	return true, nil
}

// signatureKey names one verification: the method, the signed archive or
// manifest digest, and the keys it was checked against. A chart version's
// digest and its signature do not change, so a verification that passed
// holds until the keys do; a resync does not fetch the signature again.
func signatureKey(method, digest string, keys []byte) string {
	sum := sha256.Sum256(keys)
	return method + "\x00" + digest + "\x00" + hex.EncodeToString(sum[:])
}

// signedBy reports whether a verification passed before, and if so
// records who signed.
func (r *AddonReconciler) signedBy(key string, s *scope) bool {
	signer, ok := r.verifiedSignatures.load(key)
	if ok {
		s.signedBy = signer
	}
	return ok
}

// maxVerifiedSignatures bounds the verifications the controller remembers.
// One is a chart version and a set of keys, a few hundred bytes, and an
// add-on holds one at a time: the bound covers a fleet of that many
// verified add-ons, and past it a resync fetches a signature again.
const maxVerifiedSignatures = 1024

// signatureMemory remembers the chart signatures that verified, by
// signatureKey, with who signed: the maxVerifiedSignatures most recently
// used. Its zero value is ready to use.
//
// NOTE: bounded, since every new chart version (a version range that
// follows a busy repository, a digest that changes) and every new keyring
// adds a key, and nothing else would ever drop one.
type signatureMemory struct {
	once   sync.Once
	signed *lru.Cache
}

func (m *signatureMemory) cache() *lru.Cache {
	m.once.Do(func() { m.signed = lru.New(maxVerifiedSignatures) })
	return m.signed
}

// load returns who signed, if the verification named key passed before.
func (m *signatureMemory) load(key string) (string, bool) {
	signer, ok := m.cache().Get(key)
	if !ok {
		return "", false
	}
	return signer.(string), true
}

// store records that the verification named key passed, signed by signer.
func (m *signatureMemory) store(key, signer string) {
	m.cache().Add(key, signer)
}

// addonSecret reads a Secret of the add-on's namespace from the API server;
// a missing one is terminal, with the message missing (formatted with the
// namespace and name) that says what to fix.
func (r *AddonReconciler) addonSecret(ctx context.Context, s *scope, name, missing string) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: s.addon.Namespace, Name: name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, terminal{fmt.Errorf(missing, s.addon.Namespace, name)}
		}
		return nil, err
	}
	return secret, nil
}

// secretKey reads one key of a Secret in the add-on's namespace that the
// spec's field names; a restricted add-on reads only one labelled for it
// (labelledFor).
func (r *AddonReconciler) secretKey(ctx context.Context, s *scope, name, key, defaultKey, field string) ([]byte, error) {
	if key == "" {
		key = defaultKey
	}
	secret, err := r.addonSecret(ctx, s, name, "the Secret %s/%s that "+field+" names does not exist; create it")
	if err != nil {
		return nil, err
	}
	if err := labelledFor(s, secret, "the Secret "+s.addon.Namespace+"/"+name+" that "+field+" names"); err != nil {
		return nil, err
	}
	data, ok := secret.Data[key]
	if !ok {
		return nil, terminal{fmt.Errorf("the Secret %s/%s has no key %q; set %s.key or add it", s.addon.Namespace, name, key, field)}
	}
	return data, nil
}

// credentials reads the Secret that spec.chart.secretRef or
// spec.git.secretRef names; a restricted add-on reads only one labelled
// for it (labelledFor).
func (r *AddonReconciler) credentials(ctx context.Context, s *scope, ref *capstanv1.LocalObjectReference) (*source.Credentials, error) {
	if ref == nil {
		return nil, nil
	}
	secret, err := r.addonSecret(ctx, s, ref.Name, "the credentials Secret %s/%s does not exist; create it or remove secretRef")
	if err != nil {
		return nil, err
	}
	if err := labelledFor(s, secret, "the credentials Secret "+s.addon.Namespace+"/"+ref.Name); err != nil {
		return nil, err
	}
	creds, err := source.CredentialsFromSecret(secret)
	if err != nil {
		return nil, terminal{err}
	}
	return creds, nil
}

// labelledFor refuses, for a restricted add-on, a Secret its spec names
// that is not labelled capstan.dev/addon=<the Addon's name>, before
// anything of it is used; what names the Secret in the message. It is the
// rule valuesFrom keeps (values.claim), for every other Secret the
// controller reads on a restricted add-on's behalf: the source's
// credentials, the keys spec.chart.verify names, and spec.kubeConfig's
// (which selectCluster never reads for a restricted add-on).
//
// NOTE: the read is the controller's own, and a tenant that may write
// Addons need not be able to read the Secrets of its namespace: what the
// controller does with a Secret (credentials sent to the host the spec
// names, a keyring's signer named in the status, an error that says a key
// is missing or cannot be parsed) would otherwise tell the tenant about a
// Secret someone else keeps there. The label is the owner's consent.
func labelledFor(s *scope, secret *corev1.Secret, what string) error {
	if s.profile != capstanv1.ProfileRestricted || secret.Labels[capstanv1.AddonLabel] == s.addon.Name {
		return nil
	}
	return terminal{fmt.Errorf("%s is not labelled %s=%s: a restricted add-on reads only the Secrets labelled for it; label it (kubectl label secret -n %s %s %s=%s)",
		what, capstanv1.AddonLabel, s.addon.Name, s.addon.Namespace, secret.Name, capstanv1.AddonLabel, s.addon.Name)}
}
