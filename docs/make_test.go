package docs_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestMakeTargetsAreInTheReadme checks that README.md names every target
// the Makefile documents (a "## " comment, what `make help` lists).
func TestMakeTargetsAreInTheReadme(t *testing.T) {
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	targets := regexp.MustCompile(`(?m)^([a-z][a-z-]*):[^\n]*## `).FindAllStringSubmatch(string(makefile), -1)
	if len(targets) < 10 {
		t.Fatalf("found %d documented targets in the Makefile; the test no longer reads it", len(targets))
	}
	for _, m := range targets {
		if !strings.Contains(string(readme), "make "+m[1]+"`") {
			t.Errorf("README.md does not name make %s", m[1])
		}
	}
}
