package testcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity is how long every certificate of a test cluster is valid. A
// test cluster lives for minutes; a week leaves room for a long `capstan dev`.
const certValidity = 7 * 24 * time.Hour

// authority is the cluster's certificate authority. It signs the serving
// certificates of the components and the client certificates of every user.
type authority struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

// keyPair is a PEM certificate and its PEM private key.
type keyPair struct {
	certPEM []byte
	keyPEM  []byte
}

// newAuthority creates a self-signed certificate authority.
func newAuthority() (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the cluster CA key: %w", err)
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber:          serialNumber(),
		Subject:               pkix.Name{CommonName: "capstan-testcluster-ca"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("signing the cluster CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing the cluster CA certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &authority{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  keyPEM,
	}, nil
}

// serving issues a TLS serving certificate for the given host names and IPs.
func (a *authority) serving(name string, hosts []string, ips []net.IP) (keyPair, error) {
	return a.issue(pkix.Name{CommonName: name}, x509.ExtKeyUsageServerAuth, hosts, ips)
}

// client issues a client certificate. The API server takes the common name
// as the user name and each organization as a group.
func (a *authority) client(user string, groups []string) (keyPair, error) {
	return a.issue(pkix.Name{CommonName: user, Organization: groups}, x509.ExtKeyUsageClientAuth, nil, nil)
}

func (a *authority) issue(subject pkix.Name, usage x509.ExtKeyUsage, hosts []string, ips []net.IP) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, fmt.Errorf("generating a key for %q: %w", subject.CommonName, err)
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber: serialNumber(),
		Subject:      subject,
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     hosts,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, a.cert, key.Public(), a.key)
	if err != nil {
		return keyPair{}, fmt.Errorf("signing a certificate for %q: %w", subject.CommonName, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  keyPEM,
	}, nil
}

// write stores the pair as <dir>/<name>.crt and <dir>/<name>.key and returns
// both paths.
func (p keyPair) write(dir, name string) (certFile, keyFile string, err error) {
	certFile = filepath.Join(dir, name+".crt")
	keyFile = filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, p.certPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, p.keyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// newServiceAccountKey creates the key that the API server signs service
// account tokens with, and returns it and its public half as PEM.
func newServiceAccountKey() (private, public []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating the service account signing key: %w", err)
	}
	private, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the service account public key: %w", err)
	}
	return private, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding a private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// serialNumber returns a random 128-bit certificate serial number.
func serialNumber() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		// NOTE: crypto/rand.Reader does not fail on Linux; a fixed serial is
		// still a valid certificate, so this is not worth an error path.
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}
