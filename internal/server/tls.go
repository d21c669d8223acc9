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
	"os"
	"sync"
	"time"
)

// TLSConfig serves the certificate in certFile and keyFile or, when both
// are empty, a self-signed one for hosts (for `capstan dev` and tests; a
// client must then skip verification or trust it). The files are read
// again when they change, so a certificate renewed in the mounted Secret
// (by cert-manager, say) is served without a restart.
func TLSConfig(certFile, keyFile string, hosts ...string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case certFile != "" && keyFile != "":
		files := &certFiles{certFile: certFile, keyFile: keyFile}
		if err := files.load(); err != nil {
			return nil, fmt.Errorf("the API's serving certificate: %w", err)
		}
		cfg.GetCertificate = files.GetCertificate
	case certFile == "" && keyFile == "":
		cert, err := selfSigned(hosts)
		if err != nil {
			return nil, fmt.Errorf("the API's serving certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	default:
		return nil, fmt.Errorf("give both --tls-cert-file and --tls-private-key-file, or neither for a self-signed certificate")
	}
	return cfg, nil
}

// certFiles is a certificate and key pair kept in two files, read again
// by the first handshake that finds either file changed.
type certFiles struct {
	certFile, keyFile string

	mu                sync.Mutex
	cert              *tls.Certificate
	certInfo, keyInfo os.FileInfo
	loaded            time.Time
}

// load reads the pair, and remembers the files it read it from.
func (f *certFiles) load() error {
	// The files are looked at before they are read: one that changes in
	// between is read again by the next handshake.
	certInfo, err := os.Stat(f.certFile)
	if err != nil {
		return err
	}
	keyInfo, err := os.Stat(f.keyFile)
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		return err
	}
	f.cert, f.certInfo, f.keyInfo, f.loaded = &cert, certInfo, keyInfo, time.Now()
	return nil
}

// GetCertificate returns the pair, read again first when either file
// changed since it was read.
//
// NOTE: a renewal writes the two files one after the other, and the
// kubelet swaps a Secret's files by a symlink, so a handshake may find a
// file missing or a certificate that does not match the key. It then gets
// the last pair that loaded, and the next handshake tries again.
func (f *certFiles) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.racy() && !changed(f.certInfo, f.certFile) && !changed(f.keyInfo, f.keyFile) {
		return f.cert, nil
	}
	_ = f.load()
	return f.cert, nil
}

// racy tells whether a file was written less than a second before the
// pair was read.
//
// NOTE: a file's time moves by the kernel's clock tick, so a file written
// again within a tick of its read, at the same size and in place, looks
// unchanged; such a pair is read again until its files are older than
// their read (as git treats racily clean index entries).
func (f *certFiles) racy() bool {
	edge := f.loaded.Add(-time.Second)
	return !f.certInfo.ModTime().Before(edge) || !f.keyInfo.ModTime().Before(edge)
}

// changed tells whether the file at path is no longer the one read, or was
// written since.
func changed(read os.FileInfo, path string) bool {
	now, err := os.Stat(path)
	if err != nil {
		return false
	}
	return !os.SameFile(read, now) || !read.ModTime().Equal(now.ModTime()) || read.Size() != now.Size()
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
