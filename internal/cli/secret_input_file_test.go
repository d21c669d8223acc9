package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSecretInputFilesAreKeptByteForByte: a --secret-input file is taken
// as it is, except that a file of one line loses its one line ending, so
// that echo pw > file gives pw and a key or PEM bundle keeps its last
// newline.
func TestSecretInputFilesAreKeptByteForByte(t *testing.T) {
	const pemBlock = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	for _, tc := range []struct{ content, want string }{
		{"pw\n", "pw"},
		{"pw\r\n", "pw"},
		{"pw", "pw"},
		{"", ""},
		{"\n", ""},
		{"pw\n\n", "pw\n\n"},
		{"a\nb", "a\nb"},
		{pemBlock, pemBlock},
		{"pw\r", "pw\r"},
		{"\x00\x01\x0a\x0d\x0a", "\x00\x01\x0a\x0d\x0a"},
	} {
		file := filepath.Join(t.TempDir(), "input")
		if err := os.WriteFile(file, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		v := &valuesFlags{secretInputs: []string{"auth.password=@" + file}}
		_, inputs, err := v.read()
		if err != nil || inputs["auth.password"] != tc.want {
			t.Errorf("a file of %q: %q, %v; want %q", tc.content, inputs["auth.password"], err, tc.want)
		}
	}
}
