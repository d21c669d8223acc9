package body

import (
	"strings"
	"testing"
)

// TestAddCheckSaysWhatTheBodyLacks checks an empty body's refusal: it says
// the body names no add-on and what to send, not that "" is a bad name.
func TestAddCheckSaysWhatTheBodyLacks(t *testing.T) {
	var a Add
	if err := Decode(strings.NewReader(""), &a); err != nil {
		t.Fatal(err)
	}
	err := a.Check()
	if err == nil || !strings.Contains(err.Error(), "the body names no add-on") {
		t.Fatalf("an empty body: %v", err)
	}
	a.Name = "Bad_Name"
	if err := a.Check(); err == nil || !strings.Contains(err.Error(), `name "Bad_Name"`) {
		t.Fatalf("a bad name: %v", err)
	}
}
