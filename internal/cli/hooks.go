package cli

import "capstan.dev/capstan/internal/controller"

// hookRunner is the Helm hook runner the controller uses.
func hookRunner() controller.HookRunner { return nil }
