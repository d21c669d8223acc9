package server

import (
	"encoding/json"
	"testing"
)

// TestChangesSpec: only a patch with a field in it is a change, which
// takes the right to patch the Addon; anything that is not an object is
// treated as one, so that it is never planned unreviewed.
func TestChangesSpec(t *testing.T) {
	for _, tc := range []struct {
		patch string
		want  bool
	}{
		{"", false},
		{"null", false},
		{"{}", false},
		{" { } ", false},
		{`{"suspend": true}`, true},
		{`{"chart": {"url": "https://charts.example/a.tgz"}}`, true},
		{`{"chart": null}`, true},
		{`[1]`, true},
		{`"text"`, true},
	} {
		if got := changesSpec(json.RawMessage(tc.patch)); got != tc.want {
			t.Errorf("changesSpec(%q) = %v; want %v", tc.patch, got, tc.want)
		}
	}
}
