package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
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
	// NOTE: the suggestion ends its line: the usage line of a command
	// that groups others (capstan addon [flags]) was glued onto it.
	if _, err := run("addon", "remov", "blog"); err == nil || !strings.Contains(err.Error(), "Did you mean this?\n\tremove\n") ||
		strings.Contains(err.Error(), "usage:") || strings.Count(err.Error(), "capstan addon:") != 1 || !strings.HasSuffix(err.Error(), "\nSee 'capstan addon --help'") {
		t.Errorf("capstan addon remov blog: %q; want the error to suggest remove on a line of its own, name capstan addon once and end with its help", err)
	}
}

// TestCommandsSetControllerRuntimesLogger: a command of the command line
// leaves no controller-runtime logger unset, whose first use past 30 s
// prints a stack trace that looks like a crash. The logger is set once per
// process, so the command runs in a process of its own.
func TestCommandsSetControllerRuntimesLogger(t *testing.T) {
	if os.Getenv("CAPSTAN_TEST_LOGGER") == "1" {
		root := NewRootCommand()
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		root.SetArgs([]string{"version"})
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		// NOTE: until a logger is set, the root logger's named loggers
		// are promises, which a logger set later fulfils.
		if _, promise := ctrllog.Log.WithName("t").GetSink().(interface{ Fulfill(logr.LogSink) }); promise {
			t.Fatal("capstan version left controller-runtime's logger unset")
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCommandsSetControllerRuntimesLogger$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CAPSTAN_TEST_LOGGER=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestArgumentAndFlagErrorsNameTheCommand: a wrong number of words or an
// unknown flag names the command and its usage line, and where its help
// is; a command that groups others has no usage line that helps, and is
// named with its help only.
func TestArgumentAndFlagErrorsNameTheCommand(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		cmd   string
		usage string
	}{
		{[]string{"addon", "get"}, "capstan addon get", "; usage: capstan addon get "},
		{[]string{"render", "demo", "ch", "extra"}, "capstan render", "; usage: capstan render "},
		{[]string{"addon", "get", "x", "--bogus"}, "capstan addon get", "; usage: capstan addon get "},
		{[]string{"plan", "--bogus"}, "capstan plan", "; usage: capstan plan "},
		{[]string{"version", "--bogus"}, "capstan version", "; usage: capstan version"},
		{[]string{"addon", "--bogus"}, "capstan addon", ""},
	} {
		root := NewRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(tc.args)
		err := root.ExecuteContext(t.Context())
		want := "See '" + tc.cmd + " --help'"
		if err == nil || !strings.HasPrefix(err.Error(), tc.cmd+": ") || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("capstan %v: %v; want it to start with %q and end with %q", tc.args, err, tc.cmd+":", want)
		}
		if err != nil && (tc.usage == "") == strings.Contains(err.Error(), "usage:") || !strings.Contains(fmt.Sprint(err), tc.usage) {
			t.Errorf("capstan %v: %v; want its usage line %q (none for a command that groups others)", tc.args, err, tc.usage)
		}
	}
}
