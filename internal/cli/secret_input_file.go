package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"

	addonvalues "capstan.dev/capstan/internal/values"
)

// readSecretInputFile reads a --secret-input file, or says why it cannot,
// in words that never name the file (a person may have typed the secret
// after =@). Any file but a directory is read, pipes too, so that
// @/dev/stdin and @<(command) give a secret that touches neither the
// command line nor the disk; it is read only up to what a Secret holds,
// so a device such as /dev/zero is refused by its size, before the
// cluster is called.
func readSecretInputFile(name string) (data []byte, why string) {
	// NOTE: stat before open, to refuse a directory without opening it. A
	// named pipe no one writes waits at the open, as cat waits for it.
	info, err := os.Stat(name)
	if err == nil && info.IsDir() {
		return nil, "it is a directory, not a file"
	}
	var f *os.File
	if err == nil {
		f, err = os.Open(name)
	}
	if err == nil {
		defer func() { _ = f.Close() }()
		data, err = io.ReadAll(io.LimitReader(f, addonvalues.MaxDocumentBytes+1))
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, "there is no such file"
	case errors.Is(err, fs.ErrPermission):
		return nil, "it may not be read"
	case err != nil:
		return nil, "it cannot be read"
	case len(data) > addonvalues.MaxDocumentBytes:
		return nil, fmt.Sprintf("it holds more than %d bytes (1 MiB), more than a Secret holds", addonvalues.MaxDocumentBytes)
	case len(data) == 0 && !info.Mode().IsRegular():
		// NOTE: an empty regular file is an empty secret, as helm
		// --set-file takes it; a pipe that gives nothing was most likely
		// read already (-f - before @/dev/stdin, or @/dev/stdin twice),
		// and an empty password stored without a word would be found only
		// when the software refuses it.
		return nil, "it is a pipe or device that gave nothing: was it read already (by -f - or another @/dev/stdin)?"
	}
	return data, ""
}

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

// givenTwice names a path, the first in order, that both vals (the values
// of -f and --set) and inputs (the secret inputs) set, or is "". The value
// of -f or --set would stay in spec.values, readable by anyone who may
// view the Addon, beside the secret input that overrides it.
func givenTwice(vals map[string]any, inputs map[string]string) string {
	for _, p := range slices.Sorted(maps.Keys(inputs)) {
		if _, ok := valueAt(vals, p); ok {
			return p
		}
	}
	return ""
}
