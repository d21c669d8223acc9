package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestUnknownSubcommandsFail: a mistyped subcommand of any command that
// groups others printed the help and exited 0, so a script went on as if
// `capstan addon remov blog` had removed the add-on.
func TestUnknownSubcommandsFail(t *testing.T) {
	var parents []string
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() {
			parents = append(parents, strings.TrimPrefix(c.CommandPath(), "capstan"))
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewRootCommand())
	for _, want := range []string{"", " addon", " completion"} {
		if !strings.Contains(strings.Join(parents, ","), want) {
			t.Errorf("the parent commands %q lack %q", parents, want)
		}
	}
	run := func(args ...string) (string, error) {
		root := NewRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(args)
		err := root.ExecuteContext(t.Context())
		return out.String(), err
	}
	for _, parent := range parents {
		args := append(strings.Fields(parent), "nosuch")
		if _, err := run(args...); err == nil || !strings.Contains(err.Error(), `unknown command "nosuch" for "capstan`+parent+`"`) {
			t.Errorf("capstan %s: %v; want cobra's unknown command error", strings.Join(args, " "), err)
		}
		if out, err := run(strings.Fields(parent)...); err != nil || !strings.Contains(out, "Available Commands") {
			t.Errorf("capstan%s alone: %v; want its help\n%s", parent, err, out)
		}
	}
	if _, err := run("addon", "remov", "blog"); err == nil || !strings.Contains(err.Error(), "Did you mean this?\n\tremove") {
		t.Errorf("capstan addon remov blog: %v; want the error to suggest remove", err)
	}
}
