// Command capstan is the Kubernetes add-on engine: the controller, the CLI
// and the local development environment, in one binary.
package main

import (
	"os"

	"capstan.dev/capstan/internal/cli"
)

func main() {
	os.Exit(cli.Execute())
}
