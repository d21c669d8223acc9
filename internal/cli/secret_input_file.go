package cli

import "strings"

// secretInputValue is the value a --secret-input file gives: its content
// byte for byte, as helm --set-file and kubectl create secret --from-file
// keep it, except that a file of one line (echo pw > file) loses its one
// line ending, "\n" or "\r\n". A file of more lines (an SSH key, a PEM
// bundle) is kept whole, its last newline too: a key without it is
// refused by OpenSSH.
func secretInputValue(data []byte) string {
	s := string(data)
	line, ok := strings.CutSuffix(s, "\n")
	if !ok || strings.Contains(line, "\n") {
		return s
	}
	return strings.TrimSuffix(line, "\r")
}
