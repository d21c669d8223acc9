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

// servesWithin dials addr until it serves want, and fails the test when
// it still does not after a while: longer than the watcher's ten-second
// poll, for a change its watch missed.
func servesWithin(t *testing.T, addr string, want *big.Int, what string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := served(t, addr)
		if got.Cmp(want) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s, served %v, want the new certificate %v", what, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tlsFiles serves certFile and keyFile on loopback, with their watcher
// running until the test ends, and returns the address.
func tlsFiles(t *testing.T, certFile, keyFile string) string {
	t.Helper()
	cfg, watcher, err := TLSConfig(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- watcher.Start(t.Context()) }()
	t.Cleanup(func() {
		if err := <-done; err != nil {
			t.Errorf("the certificate watcher: %v", err)
		}
	})
	return serve(t, cfg)
}

// TestTLSConfigServesARenewedCertificate rewrites the certificate and key
// files under a running server, in place and as the kubelet updates a
// mounted Secret (a symlink swapped to a new folder, the old one removed):
// a handshake soon gets the new pair, without a restart, and a certificate
// written before its key keeps the last pair that loads.
func TestTLSConfigServesARenewedCertificate(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	first, firstSerial := newPair(t)
	writePEM(t, first, certFile, keyFile)
	addr := tlsFiles(t, certFile, keyFile)
	if got := served(t, addr); got.Cmp(firstSerial) != 0 {
		t.Fatalf("served %v, want the first certificate %v", got, firstSerial)
	}

	second, secondSerial := newPair(t)
	writePEM(t, second, certFile, "")
	if got := served(t, addr); got.Cmp(firstSerial) != 0 {
		t.Errorf("with the new certificate but the old key, served %v, want the last pair that loads, %v", got, firstSerial)
	}
	writePEM(t, second, "", keyFile)
	servesWithin(t, addr, secondSerial, "after the pair was rewritten in place")

	// The kubelet's layout: tls.crt -> ..data/tls.crt, ..data -> a folder
	// of the Secret's version, swapped by renaming a new symlink over it,
	// and the old folder then removed.
	mount := t.TempDir()
	version := func(name string, cert tls.Certificate) {
		if err := os.Mkdir(filepath.Join(mount, name), 0o700); err != nil {
			t.Fatal(err)
		}
		writePEM(t, cert, filepath.Join(mount, name, "tls.crt"), filepath.Join(mount, name, "tls.key"))
		old, _ := os.Readlink(filepath.Join(mount, "..data"))
		if err := os.Symlink(name, filepath.Join(mount, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(mount, "..data_tmp"), filepath.Join(mount, "..data")); err != nil {
			t.Fatal(err)
		}
		if old != "" {
			if err := os.RemoveAll(filepath.Join(mount, old)); err != nil {
				t.Fatal(err)
			}
		}
	}
	version("v1", first)
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(mount, f)); err != nil {
			t.Fatal(err)
		}
	}
	addr = tlsFiles(t, filepath.Join(mount, "tls.crt"), filepath.Join(mount, "tls.key"))
	if got := served(t, addr); got.Cmp(firstSerial) != 0 {
		t.Fatalf("served %v from the mounted Secret, want %v", got, firstSerial)
	}
	version("v2", second)
	servesWithin(t, addr, secondSerial, "after the Secret's folder was swapped")
}
