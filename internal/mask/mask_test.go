package mask

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestHidesLongValuesWhole(t *testing.T) {
	m := New([]string{"hunter2-long", "hunter2", "1", "true", "abc", "hunter2"})
	if got, want := m.String("a=hunter2-long b=hunter2 c=1 d=true e=abc"), "a=(hidden) b=(hidden) c=1 d=true e=abc"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if New([]string{"1", "true", "no"}) != nil {
		t.Error("a Mask of only short values and booleans should be nil, hiding nothing")
	}
	var none *Mask
	if none.String("hunter2") != "hunter2" || none.Holds("hunter2") {
		t.Error("a nil Mask should hide nothing")
	}
}

// TestHidesQuotedFormsAndKeepsHashes hides a value with a quote and
// a line break as a message quotes it, each line of a PEM-like value, and
// leaves a plan's hash whole although a value's digits are in it.
func TestHidesQuotedFormsAndKeepsHashes(t *testing.T) {
	secret := "pa\"ss\nw0rd-line-two"
	hash := "sha256:" + strings.Repeat("5432", 16)
	m := New([]string{secret, "5432"})
	for _, text := range []string{
		fmt.Sprintf("Invalid value: %q: a label must", secret),
		"in JSON: " + mustJSON(t, secret),
		"the second line alone: w0rd-line-two",
	} {
		if got := m.String(text); strings.Contains(got, "w0rd") || strings.Contains(got, "ss\\n") {
			t.Errorf("String(%q) = %q; the value shows", text, got)
		}
	}
	msg := "set spec.approvedPlan to " + hash + " on port 5432"
	if got, want := m.String(msg), "set spec.approvedPlan to "+hash+" on port (hidden)"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

func TestStringsOfAValuesTree(t *testing.T) {
	tree := map[string]any{"a": "x1", "b": []any{"y2", map[string]any{"c": "x1", "d": 3, "e": true}}}
	if got, want := Strings(tree), []string{"x1", "y2"}; !slices.Equal(got, want) {
		t.Errorf("Strings = %q, want %q", got, want)
	}
}

func mustJSON(t *testing.T, v string) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestHidesBase64OfAValueAlone: a value is hidden in base64 too, standard
// and URL-safe, padded or not, when it was encoded alone; a value too short
// to hide is not hidden in base64 either.
func TestHidesBase64OfAValueAlone(t *testing.T) {
	m := New([]string{"?>?~~pass>?", "abc", "true"})
	for _, tc := range []struct{ text, want string }{
		{"data: Pz4/fn5wYXNzPj8=", "data: (hidden)"},
		{"data: Pz4/fn5wYXNzPj8", "data: (hidden)"},
		{"data: Pz4_fn5wYXNzPj8=", "data: (hidden)"},
		{`"Pz4_fn5wYXNzPj8"`, `"(hidden)"`},
		{"too short: YWJj, a boolean: dHJ1ZQ==", "too short: YWJj, a boolean: dHJ1ZQ=="},
	} {
		if got := m.String(tc.text); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

// TestHidesOverlappingValuesWhole: where two values overlap in a text, or
// one follows the other, neither shows in part.
func TestHidesOverlappingValuesWhole(t *testing.T) {
	m := New([]string{"1234wxyz", "wxyz-s3cret-long", "abab"})
	for _, tc := range []struct{ text, want string }{
		{"token=1234wxyz-s3cret-long.", "token=(hidden)."},
		{"token=wxyz-s3cret-long1234wxyz", "token=(hidden)"},
		{"a 1234wxyz and a wxyz-s3cret-long", "a (hidden) and a (hidden)"},
		{"ababab", "(hidden)"},
	} {
		got := m.String(tc.text)
		if got != tc.want || strings.Contains(got, "s3cret") {
			t.Errorf("String(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}
