package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/provenance"
)

// A chart's provenance file is a PGP clear-signed document that names the
// chart archive's SHA-256 sum; Helm writes it beside the archive, at the
// archive's URL with ".prov" (helm package --sign). A chart is verified
// when the file is signed by a key of the keyring and names the very
// archive that was fetched, by its digest. The archive is known by its
// digest already, so the file is checked against it.

// maxProvenanceBytes bounds a provenance file.
const maxProvenanceBytes = 64 << 10

// SignatureError is a chart signature that is missing or wrong: only a
// person can fix it, and nothing from the chart is applied.
type SignatureError struct {
	// Missing is true when there is no provenance file.
	Missing bool
	Err     error
}

func (e *SignatureError) Error() string { return e.Err.Error() }
func (e *SignatureError) Unwrap() error { return e.Err }

// Provenance fetches the provenance file of a chart fetched from a chart
// repository or an https archive, with the same credentials, sent to the
// same host as for the chart: the repository's, never the host an
// index.yaml names for the archive.
func (f *Fetcher) Provenance(ctx context.Context, c *Chart, creds *Credentials) ([]byte, error) {
	if strings.HasPrefix(c.URL, "oci://") || c.URL == "" {
		return nil, &SignatureError{Err: errors.New("a provenance file is checked for charts from a chart repository or an https archive; this chart comes from an OCI registry: use verify.cosign")}
	}
	addr := c.fetchURL
	if addr == "" {
		addr = c.URL
	}
	u, err := url.Parse(addr)
	if err != nil {
		return nil, err
	}
	prov := *u
	prov.Path += ".prov"
	data, err := f.get(ctx, prov.String(), chartAuth(creds, c.credHost), maxProvenanceBytes, "the chart's provenance file")
	var fe *FetchError
	if errors.As(err, &fe) {
		switch fe.Status {
		case http.StatusNotFound, http.StatusGone:
			return nil, &SignatureError{Missing: true, Err: fmt.Errorf("the chart has no provenance file (%s.prov): it is not signed; sign it with helm package --sign", path.Base(u.Path))}
		case http.StatusUnauthorized, http.StatusForbidden:
			// NOTE: still retried, as the credentials may be at fault; but
			// a bucket that may not be listed (S3, GCS) answers 403 for a
			// file it does not hold, so the hint names both causes.
			fe.Hint = fmt.Sprintf("the server refused the chart's provenance file %s.prov; a bucket that may not be listed (S3, GCS) answers so for a file it does not hold: sign the chart with helm package --sign, or check the Secret named in secretRef", path.Base(u.Path))
		}
	}
	return data, err
}

// VerifyProvenance checks a provenance file against an armored keyring and
// the archive's digest ("sha256:<hex>") and file name, and returns who
// signed it.
func VerifyProvenance(prov, keyring []byte, filename, digest string) (string, error) {
	ring, err := readArmoredKeyRing(keyring)
	if err != nil {
		return "", fmt.Errorf("the keyring cannot be read: %w (it holds ASCII-armored public keys, from gpg --export --armor)", err)
	}
	block, _ := clearsign.Decode(prov)
	if block == nil {
		return "", &SignatureError{Err: errors.New("the provenance file is not a PGP clear-signed document")}
	}
	signer, err := openpgp.CheckDetachedSignature(ring, bytes.NewReader(block.Bytes), block.ArmoredSignature.Body, nil)
	if err != nil {
		return "", &SignatureError{Err: fmt.Errorf("the provenance file is not signed by a key of the keyring: %v", err)}
	}
	sums := &provenance.SumCollection{}
	if err := provenance.ParseMessageBlock(block.Plaintext, &chartv2.Metadata{}, sums); err != nil {
		return "", &SignatureError{Err: fmt.Errorf("the signed provenance file cannot be read: %v", err)}
	}
	switch got := sums.Files[filename]; {
	case got == "":
		return "", &SignatureError{Err: fmt.Errorf("the provenance file signs no file named %s", filename)}
	case got != digest:
		return "", &SignatureError{Err: fmt.Errorf("the provenance file signs %s with %s, and the archive fetched is %s: the archive was changed after it was signed", filename, got, digest)}
	}
	for name := range signer.Identities {
		return name, nil
	}
	return fmt.Sprintf("key %X", signer.PrimaryKey.KeyId), nil
}

// readArmoredKeyRing reads every armored key block in data, so a keyring
// made by concatenating exports works as GnuPG imports it.
func readArmoredKeyRing(data []byte) (openpgp.EntityList, error) {
	var ring openpgp.EntityList
	r := bytes.NewReader(data)
	for {
		block, err := armor.Decode(r)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		entities, err := openpgp.ReadKeyRing(block.Body)
		if err != nil {
			return nil, err
		}
		ring = append(ring, entities...)
	}
	if len(ring) == 0 {
		return nil, errors.New("no key found")
	}
	return ring, nil
}
