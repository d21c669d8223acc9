package cli

import (
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/hooks"
)

// hookRunner is the Helm hook runner the controller uses.
func hookRunner() controller.HookRunner { return &hooks.Runner{} }
