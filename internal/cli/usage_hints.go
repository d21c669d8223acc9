package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// addUsageHints makes the errors of a command's words and flags name the
// command, its usage line and where its help is, as kubectl's do: cobra's
// own ("accepts 1 arg(s), received 0", "unknown flag: --bogus") name
// neither, and the usage is not printed (SilenceUsage), so that a failure
// of the command itself is not buried under it.
func addUsageHints(root *cobra.Command) {
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%s: %w\nSee '%s --help'", cmd.CommandPath(), err, cmd.CommandPath())
	})
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
		if cmd.Args == nil || !cmd.Runnable() {
			return
		}
		check := cmd.Args
		cmd.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return fmt.Errorf("%s: %w; usage: %s\nSee '%s --help'", cmd.CommandPath(), err, cmd.UseLine(), cmd.CommandPath())
			}
			return nil
		}
	}
	walk(root)
}
