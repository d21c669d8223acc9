package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCACertsNamesTheBundle builds with -ca-certs naming a bundle that is
// not there: the build stops before compiling anything, naming that file
// rather than a default one.
func TestCACertsNamesTheBundle(t *testing.T) {
	bundle := filepath.Join(t.TempDir(), "ca-bundle.crt")
	err := run(filepath.Join(t.TempDir(), "layout"), []string{"linux/amd64"}, "v0.0.0-test", "", bundle)
	if err == nil || !strings.Contains(err.Error(), bundle) {
		t.Fatalf("a build with a missing -ca-certs bundle: %v; want an error naming %s", err, bundle)
	}
}
