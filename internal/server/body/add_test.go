package body

import (
	"errors"
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

// TestDecodeRefusesNotUTF8 checks that a body with bytes that are not UTF-8
// is refused, naming where, rather than decoded with them replaced by
// U+FFFD: a secret input would otherwise reach its Secret as other bytes
// than were sent.
func TestDecodeRefusesNotUTF8(t *testing.T) {
	for _, tc := range []struct {
		body string
		at   string
	}{
		{"{\"name\":\"x\",\"secretInputs\":{\"a\":\"p\xe4ss\"}}", "byte 34"},
		{"{\"name\":\"x\",\"spec\":{\"values\":{\"a\":\"\xff\"}}}", "byte 35"},
	} {
		var a Add
		err := Decode(strings.NewReader(tc.body), &a)
		var bad *Error
		if !errors.As(err, &bad) || !strings.Contains(bad.Message, "not UTF-8 at "+tc.at) {
			t.Errorf("%q: %v", tc.body, err)
		}
	}
	var a Add
	if err := Decode(strings.NewReader(`{"name":"x","secretInputs":{"a":"pässwörd"}}`), &a); err != nil || a.SecretInputs["a"] != "pässwörd" {
		t.Errorf("a UTF-8 body: %v, %q", err, a.SecretInputs["a"])
	}
}
