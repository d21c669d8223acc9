// Command crdstamp stamps each CRD file it is given with the hash of its
// spec (the capstan.dev/schema annotation), in place. `make generate` runs
// it after controller-gen, so the stamp is always the hash of the CRD as
// generated, and the controller, which embeds the same files, can tell a
// CRD of another version on the API server (internal/crdschema).
package main

import (
	"fmt"
	"os"

	"capstan.dev/capstan/internal/crdschema"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: crdstamp FILE.yaml...")
		os.Exit(2)
	}
	for _, name := range os.Args[1:] {
		if err := stamp(name); err != nil {
			fmt.Fprintf(os.Stderr, "crdstamp: %s: %v\n", name, err)
			os.Exit(1)
		}
	}
}

func stamp(name string) error {
	info, err := os.Stat(name)
	if err != nil {
		return err
	}
	doc, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	out, err := crdschema.Stamp(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(name, out, info.Mode().Perm())
}
