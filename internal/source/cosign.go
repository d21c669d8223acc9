package source

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	orasregistry "oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
)

// A chart in an OCI registry is signed with cosign (cosign sign --key): the
// signature is an OCI manifest of its own, tagged "sha256-<hex>.sig" after
// the chart manifest's digest, in the chart's repository. Each of its layers
// is a small JSON payload that names the signed manifest by its digest,
// with the signature over the payload in the layer's annotation. A chart is
// verified when one payload names the very manifest that was pulled and is
// signed by one of the public keys. The transparency log is not consulted:
// the key alone decides, so verification works on clusters with no way out.

const (
	// maxSignatureBytes bounds a signature manifest and each payload.
	maxSignatureBytes = 64 << 10
	// maxSignatureLayers bounds the signatures read for one manifest.
	maxSignatureLayers = 32

	cosignPayloadType     = "application/vnd.dev.cosign.simplesigning.v1+json"
	cosignSignatureKey    = "dev.cosignproject.cosign/signature"
	cosignCriticalType    = "cosign container image signature"
	cosignSignatureSuffix = ".sig"
)

// CosignSignature is one signed payload of a chart's signature manifest.
type CosignSignature struct {
	Payload   []byte
	Signature []byte
}

// CosignSignatures fetches the cosign signatures of an OCI chart's
// manifest, with the chart's credentials.
func (f *Fetcher) CosignSignatures(ctx context.Context, c *Chart, creds *Credentials) ([]CosignSignature, error) {
	raw, ok := strings.CutPrefix(c.URL, "oci://")
	if !ok || c.Manifest == "" {
		return nil, &SignatureError{Err: errors.New("a cosign signature is checked for charts from an OCI registry; this chart does not come from one (use verify.provenance for a chart repository or an https archive)")}
	}
	ref, err := orasregistry.ParseReference(raw)
	if err != nil {
		return nil, err
	}
	repo, err := remote.NewRepository(ref.Registry + "/" + ref.Repository)
	if err != nil {
		return nil, err
	}
	repo.Client = f.registryAuth(ref.Registry, creds)
	repo.ManifestMediaTypes = []string{ocispec.MediaTypeImageManifest, "application/vnd.docker.distribution.manifest.v2+json"}
	tag := strings.Replace(c.Manifest, ":", "-", 1) + cosignSignatureSuffix
	shown := "oci://" + ref.Registry + "/" + ref.Repository + ":" + tag

	desc, rc, err := repo.FetchReference(ctx, tag)
	if errors.Is(err, errdef.ErrNotFound) {
		return nil, missingCosignSignature(shown)
	}
	if err != nil {
		return nil, ociError(ref.Registry, shown, "fetching the chart's signature", creds != nil, err)
	}
	if desc.Size > maxSignatureBytes {
		rc.Close()
		return nil, &SignatureError{Err: fmt.Errorf("the signature manifest %s is %d bytes, over the limit of %d", shown, desc.Size, maxSignatureBytes)}
	}
	data, err := content.ReadAll(rc, desc)
	rc.Close()
	if err != nil {
		return nil, ociError(ref.Registry, shown, "reading the chart's signature", creds != nil, err)
	}
	var manifest ocispec.Manifest
	if err := json.Unmarshal(data, &manifest); err != nil {
		return nil, &SignatureError{Err: fmt.Errorf("the signature manifest %s is not an OCI manifest: %v", shown, err)}
	}
	var sigs []CosignSignature
	for _, layer := range manifest.Layers {
		if layer.MediaType != cosignPayloadType {
			continue
		}
		if len(sigs) == maxSignatureLayers {
			break
		}
		sig, err := base64.StdEncoding.DecodeString(layer.Annotations[cosignSignatureKey])
		if err != nil || len(sig) == 0 {
			continue
		}
		if layer.Size > maxSignatureBytes {
			continue
		}
		blob, err := repo.Blobs().Fetch(ctx, layer)
		if err != nil {
			return nil, ociError(ref.Registry, shown, "fetching a signed payload", creds != nil, err)
		}
		p, err := content.ReadAll(blob, layer)
		blob.Close()
		if err != nil {
			return nil, ociError(ref.Registry, shown, "reading a signed payload", creds != nil, err)
		}
		sigs = append(sigs, CosignSignature{Payload: p, Signature: sig})
	}
	if len(sigs) == 0 {
		return nil, &SignatureError{Missing: true, Err: fmt.Errorf("the signature manifest %s holds no cosign signature", shown)}
	}
	return sigs, nil
}

// missingCosignSignature says that the signature tag shown is not in the
// chart's repository. Capstan reads only cosign's legacy signature, the
// manifest tagged sha256-<hex>.sig; cosign v3 signs in the Sigstore bundle
// format by default, attached as an OCI referrer that Capstan does not
// read, so the message names the flags that sign in the legacy format for
// the person who just signed and still sees this.
func missingCosignSignature(shown string) error {
	return &SignatureError{Missing: true, Err: fmt.Errorf("the chart has no cosign signature in the legacy signature tag %s, the only format Capstan reads: "+
		"sign it with cosign sign --key; cosign v3 signs in the Sigstore bundle format by default, which Capstan does not read, so add --new-bundle-format=false --use-signing-config=false", shown)}
}

// VerifyCosign checks cosign signatures against PEM public keys and the
// manifest digest ("sha256:<hex>") that was pulled, and returns the
// fingerprint of the key that signed it.
func VerifyCosign(sigs []CosignSignature, publicKeys []byte, manifest string) (string, error) {
	keys, err := readPublicKeys(publicKeys)
	if err != nil {
		return "", fmt.Errorf("the public key cannot be read: %w (it holds PEM public keys, as cosign generate-key-pair writes to cosign.pub)", err)
	}
	var lastErr error = &SignatureError{Err: errors.New("no signature is made by a key of the Secret")}
	for _, s := range sigs {
		signer := ""
		for _, k := range keys {
			if k.verifier.VerifySignature(bytes.NewReader(s.Signature), bytes.NewReader(s.Payload)) == nil {
				signer = k.fingerprint
				break
			}
		}
		if signer == "" {
			continue
		}
		var p payload.SimpleContainerImage
		if err := json.Unmarshal(s.Payload, &p); err != nil {
			lastErr = &SignatureError{Err: fmt.Errorf("the signed payload cannot be read: %v", err)}
			continue
		}
		if p.Critical.Type != cosignCriticalType {
			lastErr = &SignatureError{Err: fmt.Errorf("the signed payload is a %q, not a cosign container image signature", p.Critical.Type)}
			continue
		}
		if got := p.Critical.Image.DockerManifestDigest; got != manifest {
			lastErr = &SignatureError{Err: fmt.Errorf("the signature signs manifest %s, and the chart pulled is %s: the chart was changed after it was signed", got, manifest)}
			continue
		}
		return signer, nil
	}
	return "", lastErr
}

type publicKey struct {
	verifier    signature.Verifier
	fingerprint string
}

// readPublicKeys reads every PEM public key in data, so several keys (a
// rotation) may sign.
func readPublicKeys(data []byte) ([]publicKey, error) {
	var keys []publicKey
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		pub, err := cryptoutils.UnmarshalPEMToPublicKey(pem.EncodeToMemory(block))
		if err != nil {
			return nil, err
		}
		v, err := signature.LoadVerifier(pub, crypto.SHA256)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(block.Bytes)
		keys = append(keys, publicKey{verifier: v, fingerprint: "key sha256:" + hex.EncodeToString(sum[:])[:16]})
	}
	if len(keys) == 0 {
		return nil, errors.New("no PEM public key found")
	}
	return keys, nil
}
