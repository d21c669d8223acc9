package cli

import (
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"golang.org/x/term"
)

// terminalText is w for a person's terminal: every control character but
// the newline and the tab, and every byte that is not UTF-8, is written as
// its escape (\u001b, \x9b) instead of itself.
//
// NOTE: what the CLI prints comes in part from charts and their objects: a
// template's fail message, a hook's or a test's message, a condition that
// quotes them. A tenant's chart must not be able to write escape sequences
// to an administrator's terminal: set its clipboard (OSC 52), hide the
// rest of a plan, or move the cursor over what was printed. JSON and YAML
// output never hold such characters unescaped, and the escape that takes
// a C0 or C1 character's place is the one JSON and YAML use for it.
func terminalText(w io.Writer) io.Writer {
	if _, ok := w.(safeWriter); ok {
		return w
	}
	return safeWriter{w}
}

// rawOut is the command's standard output without terminalText's
// escapes, for output that is a file to be saved byte for byte, when it
// goes to a file or a pipe. On a terminal it is still terminalText: a
// person reads it there, and a file of a tenant's repository must not
// write escape sequences to an administrator's terminal either.
func rawOut(cmd interface{ OutOrStdout() io.Writer }) io.Writer {
	w := cmd.OutOrStdout()
	if s, ok := w.(safeWriter); ok {
		w = s.w
	}
	if isTerminal(w) {
		return terminalText(w)
	}
	return w
}

// isTerminal reports whether w is a terminal; a variable for the tests.
var isTerminal = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

type safeWriter struct{ w io.Writer }

func (s safeWriter) Write(p []byte) (int, error) {
	clean := true
	for _, b := range p {
		if b < 0x20 && b != '\n' && b != '\t' || b >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s.w.Write(p)
	}
	out := make([]byte, 0, len(p)+16)
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRune(p[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = fmt.Appendf(out, `\x%02x`, p[i])
		case r < 0x20 && r != '\n' && r != '\t', r >= 0x7f && r <= 0x9f:
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, p[i:i+size]...)
		}
		i += size
	}
	if _, err := s.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}
