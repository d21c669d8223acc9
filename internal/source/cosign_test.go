package source

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// signedDigest is the chart manifest the cosign fixture signs (see
// testdata/cosign/README.md).
const signedDigest = "sha256:3befc615b7aea07c47a00b7ce84c0f6e6b5477e5483bb18862d5fb2645d7e80b"

// rawManifest is a manifest pushed byte for byte as cosign wrote it.
type rawManifest struct {
	data      []byte
	mediaType types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.data, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mediaType, nil }

func fixture(t *testing.T, file string) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/cosign/" + file)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestVerifyCosign reads a signature that the real cosign CLI made, from a
// loopback registry, and verifies it: with its public key and the manifest
// it signs it passes; with another key, or for another manifest, it fails
// with a SignatureError that says why; a chart with no signature is
// Missing.
func TestVerifyCosign(t *testing.T) {
	r := newOCIRegistry(t, "", "")
	pool := x509.NewCertPool()
	pool.AddCert(r.Certificate())
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	repo := r.host + "/charts/signed-demo"
	for _, blob := range []struct{ file, mediaType string }{
		{"config.json", "application/vnd.oci.image.config.v1+json"},
		{"payload.json", "application/vnd.dev.cosign.simplesigning.v1+json"},
	} {
		ref, err := name.NewRepository(repo)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.WriteLayer(ref, static.NewLayer(fixture(t, blob.file), types.MediaType(blob.mediaType)), remote.WithTransport(tr)); err != nil {
			t.Fatal(err)
		}
	}
	tag, err := name.NewTag(repo + ":" + strings.Replace(signedDigest, ":", "-", 1) + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Put(tag, rawManifest{fixture(t, "manifest.json"), types.OCIManifestSchema1}, remote.WithTransport(tr)); err != nil {
		t.Fatal(err)
	}

	f := newTestFetcher(t, Options{}, r.Server)
	ctx := context.Background()
	chart := &Chart{URL: "oci://" + repo + ":1.0.0", Manifest: signedDigest}
	sigs, err := f.CosignSignatures(ctx, chart, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub := fixture(t, "cosign.pub")
	signer, err := VerifyCosign(sigs, pub, signedDigest)
	if err != nil || !strings.HasPrefix(signer, "key sha256:") {
		t.Fatalf("cosign's own signature did not verify: %q, %v", signer, err)
	}

	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&other.PublicKey)
	otherPub := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	cases := []struct {
		name     string
		keys     []byte
		manifest string
		says     string
	}{
		{"another key", otherPub, signedDigest, "no signature is made by a key"},
		{"another manifest", pub, "sha256:" + strings.Repeat("0", 64), "changed after it was signed"},
		{"both keys, another manifest", append(otherPub, pub...), "sha256:" + strings.Repeat("1", 64), "changed after it was signed"},
	}
	for _, tc := range cases {
		_, err := VerifyCosign(sigs, tc.keys, tc.manifest)
		var se *SignatureError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: got %v, want a SignatureError saying %q", tc.name, err, tc.says)
		}
	}
	if _, err := VerifyCosign(sigs, []byte("not a key"), signedDigest); err == nil || !strings.Contains(err.Error(), "PEM public keys") {
		t.Errorf("a Secret without a key: got %v", err)
	}
	if _, err := VerifyCosign(sigs, append(otherPub, pub...), signedDigest); err != nil {
		t.Errorf("a rotation (two keys, the second signs) failed: %v", err)
	}

	_, err = f.CosignSignatures(ctx, &Chart{URL: chart.URL, Manifest: "sha256:" + strings.Repeat("2", 64)}, nil)
	var se *SignatureError
	if !errors.As(err, &se) || !se.Missing {
		t.Errorf("an unsigned chart: got %v, want a missing signature", err)
	}
	_, err = f.CosignSignatures(ctx, &Chart{URL: "https://charts.example.com/demo-1.0.0.tgz"}, nil)
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "verify.provenance") {
		t.Errorf("cosign on a chart from an https archive: got %v", err)
	}
}

// TestMissingCosignSignatureMessage: the message of a chart with no
// signature tag names the tag Capstan read and how to sign in the legacy
// format that it reads, for a person whose cosign v3 signed in the bundle
// format.
func TestMissingCosignSignatureMessage(t *testing.T) {
	const shown = "oci://registry.example/charts/wiki:sha256-ab.sig"
	err := missingCosignSignature(shown)
	var sig *SignatureError
	if !errors.As(err, &sig) || !sig.Missing {
		t.Fatalf("missingCosignSignature = %#v; want a missing SignatureError", err)
	}
	for _, tc := range []struct{ what, says string }{
		{"the tag it read", shown},
		{"that it reads the legacy tag only", "legacy signature tag"},
		{"how to sign", "cosign sign --key"},
		{"why cosign v3's signature is not found", "cosign v3 signs in the Sigstore bundle format by default"},
		{"the flags of the legacy format", "--new-bundle-format=false --use-signing-config=false"},
	} {
		if !strings.Contains(err.Error(), tc.says) {
			t.Errorf("the message %q does not say %s (%q)", err, tc.what, tc.says)
		}
	}
}
