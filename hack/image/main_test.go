package main

import (
	"os"
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

// TestOutMustBeALayout: -out names a folder the build replaces, so a
// folder that holds files and no OCI layout (`-out .`, the checkout) is
// refused before the build, and kept.
func TestOutMustBeALayout(t *testing.T) {
	dir := t.TempDir()
	kept := filepath.Join(dir, "go.mod")
	if err := os.WriteFile(kept, []byte("module example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := run(dir, []string{"linux/amd64"}, "v0.0.0-test", "", "")
	if err == nil || !strings.Contains(err.Error(), "no OCI layout") {
		t.Fatalf("-out %s, a folder with a file: %v; want it refused", dir, err)
	}
	if _, err := os.Stat(kept); err != nil {
		t.Fatalf("the refused folder lost its file: %v", err)
	}
}
