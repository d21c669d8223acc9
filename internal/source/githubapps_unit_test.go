package source

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"testing"
)

// TestGitHubAppTransportsAreBounded: a Fetcher keeps at most
// maxGitHubApps App transports, each holding a parsed private key, however
// many credentials it has seen, and reuses the one of credentials in use.
func TestGitHubAppTransportsAreBounded(t *testing.T) {
	f, err := NewFetcher(Options{})
	if err != nil {
		t.Fatal(err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	creds := func(id int64) *Credentials {
		return &Credentials{GitHubAppID: id, GitHubAppInstallationID: 1, GitHubAppPrivateKey: pemKey}
	}
	first, err := f.githubAppTransport(creds(1))
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := f.githubAppTransport(creds(1)); again != first {
		t.Error("the transport of credentials in use was built again: its token would not be reused")
	}
	for id := int64(2); id <= 3*maxGitHubApps; id++ {
		if _, err := f.githubAppTransport(creds(id)); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := f.githubApps.stats(); n > maxGitHubApps {
		t.Errorf("the Fetcher keeps %d GitHub App transports, want at most %d", n, maxGitHubApps)
	}
}
