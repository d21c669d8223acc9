// Command capstan is the Kubernetes add-on engine: the controller, the CLI
// and the local development environment, in one binary.
package main

import (
	"os"

	"capstan.dev/capstan/internal/cli"
	"capstan.dev/capstan/internal/render"
)

func main() {
	// The controller runs chart templates in copies of this binary.
	render.ServeWorkerIfAsked()
	os.Exit(cli.Execute())
}
