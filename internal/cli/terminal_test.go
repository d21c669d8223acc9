package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

func TestTerminalTextEscapesControls(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text\n\tindented, ünïcödé ✓", "plain text\n\tindented, ünïcödé ✓"},
		{"\x1b]52;c;aGk=\a\x1b[8mhidden", `\u001b]52;c;aGk=\u0007\u001b[8mhidden`},
		{"over\rwrite", `over\u000dwrite`},
		{"c1 \u009b31m and del \x7f", `c1 \u009b31m and del \u007f`},
		{"raw \x9b byte", `raw \x9b byte`},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		n, err := terminalText(&b).Write([]byte(tt.in))
		if err != nil || n != len(tt.in) {
			t.Errorf("Write(%q) = %d, %v", tt.in, n, err)
		}
		if b.String() != tt.want {
			t.Errorf("Write(%q) wrote %q, want %q", tt.in, b.String(), tt.want)
		}
	}
}

// TestAChartsMessageReachesNoTerminal: a condition that quotes a chart's
// fail message, printed by `capstan addon get` and `list`, carries none of
// its escape sequences to the terminal, and -o json still holds the
// message as it is.
func TestAChartsMessageReachesNoTerminal(t *testing.T) {
	const hostile = "render failed: \x1b]52;c;cm0gLXJmIH4=\a\x1b[8m"
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	a := newAddon(t, c, ns, "blog", func(a *capstanv1.Addon) { a.Spec.Suspend = true })
	a.Status.Conditions = []metav1.Condition{{Type: capstanv1.ConditionReady, Status: metav1.ConditionFalse, Reason: "RenderFailed",
		Message: hostile, LastTransitionTime: metav1.Now(), ObservedGeneration: a.Generation}}
	if err := c.Status().Update(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"addon", "get", "blog", "-n", ns}, {"addon", "list", "-n", ns}} {
		out, err := capstan(t, cluster, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if strings.ContainsAny(out, "\x1b\a") || !strings.Contains(out, `\u001b]52`) {
			t.Fatalf("%v: an escape sequence reached the terminal:\n%q", args, out)
		}
	}
	out, err := capstan(t, cluster, "addon", "get", "blog", "-n", ns, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got capstanv1.Addon
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Status.Conditions[0].Message != hostile {
		t.Fatalf("-o json changed the message: %v\n%s", err, out)
	}
}

// TestRawOutEscapesOnATerminal: a definition file that holds an escape
// sequence (OSC 52, which sets the clipboard) is written with the escape
// shown, not run, on a terminal, and byte for byte, CRLF and all, to a
// file or a pipe.
func TestRawOutEscapesOnATerminal(t *testing.T) {
	file := "name: web\r\n# \x1b]52;c;ZWNobyBoaQ==\x07\r\n"
	defer func(was func(io.Writer) bool) { isTerminal = was }(isTerminal)
	for _, tty := range []bool{true, false} {
		isTerminal = func(io.Writer) bool { return tty }
		var out bytes.Buffer
		cmd := &cobra.Command{}
		cmd.SetOut(terminalText(&out))
		if _, err := rawOut(cmd).Write([]byte(file)); err != nil {
			t.Fatal(err)
		}
		switch got := out.String(); {
		case tty && strings.ContainsRune(got, 0x1b):
			t.Errorf("on a terminal: %q; want the escape written as text", got)
		case tty && !strings.Contains(got, `\u001b]52`):
			t.Errorf("on a terminal: %q; want \\u001b in its place", got)
		case !tty && got != file:
			t.Errorf("redirected: %q; want %q byte for byte", got, file)
		}
	}
}
