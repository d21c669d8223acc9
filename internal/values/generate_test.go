package values

import (
	"bytes"
	"crypto/rand"
	"strings"
	"testing"
)

func TestRandomString(t *testing.T) {
	for name, alphabet := range Alphabets {
		s, err := randomString(rand.Reader, 64, alphabet)
		if err != nil {
			t.Fatal(err)
		}
		if len(s) != 64 {
			t.Fatalf("%s: length %d, want 64", name, len(s))
		}
		for _, r := range s {
			if !strings.ContainsRune(alphabet, r) {
				t.Fatalf("%s: %q is not in the alphabet", name, r)
			}
		}
	}
	// Bytes at or above the rejection limit are skipped, so the draw stays
	// uniform: with 10 digits, 250..255 are rejected.
	src := bytes.NewReader(append(bytes.Repeat([]byte{255}, 100), bytes.Repeat([]byte{13}, 100)...))
	s, err := randomString(src, 3, Alphabets["numeric"])
	if err != nil || s != "333" {
		t.Fatalf("randomString = %q, %v; want 333 after rejecting 255s", s, err)
	}
	// Every character of a small alphabet shows up: no off-by-one at its ends.
	s, _ = randomString(rand.Reader, 2000, Alphabets["hex"])
	for _, r := range Alphabets["hex"] {
		if !strings.ContainsRune(s, r) {
			t.Fatalf("%q never drawn in 2000 tries", r)
		}
	}
	if _, err := randomString(bytes.NewReader(nil), 8, "ab"); err == nil {
		t.Fatal("want an error when the random source fails")
	}
}
