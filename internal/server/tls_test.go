package server

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writePEM writes cert's certificate and key, PEM-encoded, to certFile and
// keyFile, either of them left out when empty.
func writePEM(t *testing.T, cert tls.Certificate, certFile, keyFile string) {
	t.Helper()
	if certFile != "" {
		data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
		if err := os.WriteFile(certFile, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if keyFile != "" {
		der, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// newPair makes a self-signed certificate and returns it with its serial.
func newPair(t *testing.T) (tls.Certificate, *big.Int) {
	t.Helper()
	cert, err := selfSigned(nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return cert, leaf.SerialNumber
}

// serve accepts TLS connections on loopback with cfg and returns the
// address; each connection ends after its handshake.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_ = conn.(*tls.Conn).Handshake()
				_ = conn.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

// served dials addr and returns the serial of the certificate it serves.
func served(t *testing.T, addr string) *big.Int {
	t.Helper()
	// The test asks which certificate is served, not whether it is trusted.
	conn, err := tls.DialWithDialer(&net.Dialer{}, "tcp", addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}

// TestTLSConfigServesARenewedCertificate rewrites the certificate and key
// files under a running server, in place and as the kubelet updates a
// mounted Secret (a symlink swapped to a new folder): the next handshake
// gets the new pair, without a restart, and a certificate written before
// its key keeps the last pair that loads.
func TestTLSConfigServesARenewedCertificate(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	first, firstSerial := newPair(t)
	writePEM(t, first, certFile, keyFile)
	cfg, err := TLSConfig(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, cfg)
	if got := served(t, addr); got.Cmp(firstSerial) != 0 {
		t.Fatalf("served %v, want the first certificate %v", got, firstSerial)
	}

	second, secondSerial := newPair(t)
	writePEM(t, second, certFile, "")
	if got := served(t, addr); got.Cmp(firstSerial) != 0 {
		t.Errorf("with the new certificate but the old key, served %v, want the last pair that loads, %v", got, firstSerial)
	}
	writePEM(t, second, "", keyFile)
	if got := served(t, addr); got.Cmp(secondSerial) != 0 {
		t.Errorf("after the pair was rewritten in place, served %v, want the new certificate %v", got, secondSerial)
	}

	// The kubelet's layout: tls.crt -> ..data/tls.crt, ..data -> a folder
	// of the Secret's version, swapped by renaming a new symlink over it.
	mount := t.TempDir()
	version := func(name string, cert tls.Certificate) {
		if err := os.Mkdir(filepath.Join(mount, name), 0o700); err != nil {
			t.Fatal(err)
		}
		writePEM(t, cert, filepath.Join(mount, name, "tls.crt"), filepath.Join(mount, name, "tls.key"))
		if err := os.Symlink(name, filepath.Join(mount, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(mount, "..data_tmp"), filepath.Join(mount, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("v1", first)
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(mount, f)); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err = TLSConfig(filepath.Join(mount, "tls.crt"), filepath.Join(mount, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	addr = serve(t, cfg)
	if got := served(t, addr); got.Cmp(firstSerial) != 0 {
		t.Fatalf("served %v from the mounted Secret, want %v", got, firstSerial)
	}
	version("v2", second)
	if got := served(t, addr); got.Cmp(secondSerial) != 0 {
		t.Errorf("after the Secret's folder was swapped, served %v, want the new certificate %v", got, secondSerial)
	}
}

// TestCertFilesSettle checks that a pair read more than a second after
// its files were written is not read again by every handshake.
func TestCertFilesSettle(t *testing.T) {
	dir := t.TempDir()
	f := &certFiles{certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key")}
	cert, _ := newPair(t)
	writePEM(t, cert, f.certFile, f.keyFile)
	if err := f.load(); err != nil {
		t.Fatal(err)
	}
	if !f.racy() {
		t.Errorf("a pair read as soon as it was written must be read again")
	}
	f.loaded = f.loaded.Add(2 * time.Second)
	if f.racy() {
		t.Errorf("a pair read two seconds after it was written is read again")
	}
}
