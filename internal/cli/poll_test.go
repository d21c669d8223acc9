package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// TestPollSaysInterruptedNotTimedOut cancels the command's context, as
// Ctrl-C does, during a wait of ten minutes: the error says the wait was
// interrupted, not that ten minutes passed.
func TestPollSaysInterruptedNotTimedOut(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cmd := &cobra.Command{}
	cmd.SetContext(ctx)
	cmd.SetOut(&bytes.Buffer{})
	time.AfterFunc(100*time.Millisecond, cancel)
	err := poll(cmd, 10*time.Minute, func(context.Context) (bool, string, error) { return false, "OutOfSync (AwaitingApproval)", nil })
	if err == nil || !strings.Contains(err.Error(), "interrupted") || strings.Contains(err.Error(), "gave up after") {
		t.Fatalf("poll after Ctrl-C: %v; want an error that says it was interrupted", err)
	}

	cmd.SetContext(t.Context())
	err = poll(cmd, 50*time.Millisecond, func(context.Context) (bool, string, error) { return false, "x", nil })
	if err == nil || !strings.Contains(err.Error(), "gave up after 50ms") {
		t.Fatalf("poll past its bound: %v; want it to say it gave up", err)
	}
}

// TestAddRefusesFlagsOfTheOtherSource checks that capstan addon add
// refuses a git flag beside a chart source, and a chart flag beside
// --git, before it reaches any cluster, rather than dropping the flag.
func TestAddRefusesFlagsOfTheOtherSource(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--chart-url", "https://127.0.0.1:1/x.tgz", "--path", "foo"}, "--path does not go with a chart source"},
		{[]string{"--oci", "oci://127.0.0.1:1/c", "--revision", "v1"}, "--revision does not go with a chart source"},
		{[]string{"--git", "https://127.0.0.1:1/r.git", "--path", "a", "--version", "1.0.0"}, "--version does not go with --git"},
		{[]string{"--git", "https://127.0.0.1:1/r.git", "--path", "a", "--digest", "sha256:00"}, "--digest does not go with --git"},
	} {
		cmd := NewRootCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append([]string{"addon", "add", "y", "--kubeconfig", "/nonexistent"}, tc.args...))
		err := cmd.ExecuteContext(t.Context())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want %q", tc.args, err, tc.want)
		}
	}
}
