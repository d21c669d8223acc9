package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// TLSConfig serves the certificate in certFile and keyFile or, when both
// are empty, a self-signed one for hosts (for `capstan dev` and tests; a
// client must then skip verification or trust it).
//
// With files it also returns their watcher, which the caller must run (the
// manager does, as a runnable): it reads the pair again when either file
// changes, so a certificate renewed in the mounted Secret (by cert-manager,
// say) is served without a restart. With a self-signed certificate the
// watcher is nil.
//
// NOTE: a renewal writes the two files one after the other, so a read may
// find a certificate that does not match its key; the watcher then keeps
// serving the last pair that loaded, until the next change. The kubelet
// updates a mounted Secret by swapping the ..data symlink and removing the
// old folder: the watch, on the file the symlink led to, sees it removed
// and is set again on the path, now the new file. The watcher also reads
// the pair every ten seconds, for a change that no event reports.
func TLSConfig(certFile, keyFile string, hosts ...string) (*tls.Config, *certwatcher.CertWatcher, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case certFile != "" && keyFile != "":
		watcher, err := certwatcher.New(certFile, keyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("the API's serving certificate: %w", err)
		}
		cfg.GetCertificate = watcher.GetCertificate
		return cfg, watcher, nil
	case certFile == "" && keyFile == "":
		cert, err := selfSigned(hosts)
		if err != nil {
			return nil, nil, fmt.Errorf("the API's serving certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
		return cfg, nil, nil
	default:
		return nil, nil, fmt.Errorf("give both --tls-cert-file and --tls-private-key-file, or neither for a self-signed certificate")
	}
}

func selfSigned(hosts []string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "capstan"},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range append(hosts, "localhost", "127.0.0.1", "::1") {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
