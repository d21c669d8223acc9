// Package cli holds the capstan command line: one file per command.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
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
		// What a command prints for a person goes through terminalText;
		// `capstan render`'s output is the chart's manifests, byte for
		// byte, for kubectl, and only its messages on stderr are. `addon
		// get --gitops` writes its file past it too when redirected (rawOut).
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			cmd.SetErr(terminalText(cmd.ErrOrStderr()))
			if cmd.Name() != "render" {
				cmd.SetOut(terminalText(cmd.OutOrStdout()))
			}
			if cmd.Name() != "controller" && cmd.Name() != "dev" {
				// NOTE: controller-runtime's logger, which the plan's
				// pipeline and the clients log through, says nothing to
				// a person at a terminal; left unset, its first use past
				// 30 s prints a stack trace that looks like a crash. The
				// API server's warnings are printed by the clients'
				// handler (clusterFlags.config) instead.
				ctrl.SetLogger(logr.Discard())
			}
		},
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
	// NOTE: cobra adds its completion command only when the command line
	// runs; added now, it is checked as every other parent command is.
	root.InitDefaultCompletionCmd()
	refuseUnknownSubcommands(root)
	addUsageHints(root)
	return root
}

// refuseUnknownSubcommands makes every command that only groups others
// (capstan addon, capstan completion) fail on a word that names none of
// them. Cobra does so only for the root: a mistyped `capstan addon remov
// blog` would print the help and exit 0, and a script would go on as if
// the add-on were removed. Without a word, such a command prints its help.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("%s: unknown command %q for %q", cmd.CommandPath(), args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t") + "\n"
		}
		return fmt.Errorf("%s\nSee '%s --help'", msg, cmd.CommandPath())
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
}

// Execute runs the command line and returns the process's exit code.
// Ctrl-C (or SIGTERM) cancels the command's context, so every command can
// stop cleanly; a second one ends the process at once.
func Execute() int {
	ctx, stop := interruptible(os.Stderr)
	defer stop()
	err := NewRootCommand().ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	fmt.Fprintln(terminalText(os.Stderr), "Error:", err)
	return 1
}

// interruptible returns a context that the first Ctrl-C or SIGTERM
// cancels. From then on, and once the context is done for any other
// reason, the signals take their default action again: the next Ctrl-C
// ends the process at once.
//
// NOTE: a context cannot stop everything. Helm's template engine never
// reads it, so a chart that loops for ever (`range until 2000000000`)
// would hold `capstan render` past any number of Ctrl-Cs if the signals
// stayed caught for the whole run.
func interruptible(stderr io.Writer) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-sigs:
			signal.Stop(sigs)
			fmt.Fprintln(stderr, "Interrupted: stopping; press Ctrl-C again to quit at once.")
			cancel()
		case <-ctx.Done():
			signal.Stop(sigs)
		}
	}()
	return ctx, cancel
}
