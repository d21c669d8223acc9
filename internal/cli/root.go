// Package cli holds the capstan command line: one file per command.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// exitError carries an exit code other than 1 out of a command, for commands
// such as `capstan validate` whose findings are not failures of the command.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// NewRootCommand builds the capstan command and every subcommand.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "capstan",
		Short:         "Capstan installs cluster software as Addons: rendered, previewed, gated and applied",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newVersionCommand(),
		newValidateCommand(),
		newControllerCommand(),
		newDevCommand(),
		newAddonCommand(),
		newPlanCommand(),
		newRenderCommand(),
	)
	return root
}

// Execute runs the command line and returns the process's exit code.
// Ctrl-C cancels the command's context, so every command can stop cleanly.
func Execute() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := NewRootCommand().ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	fmt.Fprintln(os.Stderr, "Error:", err)
	return 1
}
