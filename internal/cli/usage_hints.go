package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// addUsageHints makes the errors of a command's words and flags name the
// command, its usage line and where its help is, as kubectl's do: cobra's
// own ("accepts 1 arg(s), received 0", "unknown flag: --bogus") name
// neither, and the usage is not printed (SilenceUsage), so that a failure
// of the command itself is not buried under it. A command that groups
// others has no usage line of its own that helps (capstan addon [flags]
// hides that it takes a subcommand): its errors name it and its help.
func addUsageHints(root *cobra.Command) {
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError(cmd, err)
	})
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
		// NOTE: a command that groups others says its own unknown
		// subcommand (refuseUnknownSubcommands), with its help.
		if cmd.Args == nil || !cmd.Runnable() || cmd.HasSubCommands() {
			return
		}
		check := cmd.Args
		cmd.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError(cmd, err)
			}
			return nil
		}
	}
	walk(root)
}

// usageError is err, said with cmd's path, its usage line (unless cmd
// groups others) and where its help is.
func usageError(cmd *cobra.Command, err error) error {
	if cmd.HasSubCommands() {
		return fmt.Errorf("%s: %w\nSee '%s --help'", cmd.CommandPath(), err, cmd.CommandPath())
	}
	return fmt.Errorf("%s: %w; usage: %s\nSee '%s --help'", cmd.CommandPath(), err, cmd.UseLine(), cmd.CommandPath())
}
