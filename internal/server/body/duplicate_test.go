package body

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// TestDecodeRefusesAKeyGivenTwice: a key given twice in one object, at any
// depth, is refused naming its path, rather than the last one taken
// silently; the same key in two objects, and keys that differ, are not.
func TestDecodeRefusesAKeyGivenTwice(t *testing.T) {
	for _, tc := range []struct {
		name, body, field string
		into              func() any
	}{
		{"the name", `{"name":"blog","name":"other","spec":{}}`, "name", func() any { return &Add{} }},
		{"spec.deletionPolicy", `{"name":"blog","spec":{"deletionPolicy":"Orphan","deletionPolicy":"Delete"}}`, "spec.deletionPolicy", func() any { return &Add{} }},
		{"a secret input", `{"name":"blog","secretInputs":{"auth.password":"first","auth.password":"second"}}`, `secretInputs["auth.password"]`, func() any { return &Add{} }},
		{"a key of spec.values", `{"name":"blog","spec":{"values":{"a":{"b":1,"c":[{"d":1},{"d":2,"d":3}],"b":2}}}}`, "spec.values.a.c[1].d", func() any { return &Add{} }},
		{"an escaped spelling of the same key", `{"name":"blog","spec":{"values":{"replicas":1,"r\u0065plicas":2}}}`, "spec.values.replicas", func() any { return &Add{} }},
		{"a key of the spec patch", `{"spec":{"values":{"x":1},"values":{"x":2}}}`, "spec.values", func() any { return &Change{} }},
		{"deep in the spec patch", `{"spec":{"values":{"a.b":{"k":1,"k":null}}}}`, `spec.values["a.b"].k`, func() any { return &Edit{} }},
		{"the plan's hash", `{"hash":"sha256:a","hash":"sha256:b"}`, "hash", func() any { return &Approval{} }},
		{"the token", `{"token":"a","token":"b"}`, "token", func() any { return &SignIn{} }},
		{"a long key", `{"spec":{"values":{"` + strings.Repeat("k", 100) + `":1,"` + strings.Repeat("k", 100) + `":2}}}`, `spec.values["` + strings.Repeat("k", maxShownKey) + `"…]`, func() any { return &Change{} }},
	} {
		err := Decode(strings.NewReader(tc.body), tc.into())
		var bad *Error
		if !errors.As(err, &bad) || bad.Field != tc.field || bad.Message != tc.field+" is given twice in the request body: keep one" {
			t.Errorf("%s: %v (field %q); want %s refused as given twice", tc.name, err, fieldOf(bad), tc.field)
		}
	}
	for _, ok := range []string{
		`{"spec":{"values":{"name":"a","a":{"name":"b"},"list":[{"k":1},{"k":2}],"K":3,"k":4}}}`,
		`{"spec":{"values":{"a":{"x":1},"b":{"x":1}}},"secretInputs":{"a":"x","A":"y"}}`,
	} {
		if err := Decode(strings.NewReader(ok), &Change{}); err != nil {
			t.Errorf("%s: %v; want each key taken once", ok, err)
		}
	}
}

// TestDuplicateKeyFindsAKeyInALargeOrDeepBody: a key given twice after
// 50000 others, or 5000 objects deep, is found and named; the check keeps
// each key once and spells out no path until it refuses one.
func TestDuplicateKeyFindsAKeyInALargeOrDeepBody(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"spec":{"values":{`)
	for i := range 50000 {
		b.WriteString(`"k` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strconv.Itoa(i) + `":0,`)
	}
	b.WriteString(`"k":1,"k":2}}}`)
	if err := duplicateKey([]byte(b.String())); err == nil || !strings.Contains(err.Error(), "spec.values.k is given twice") {
		t.Errorf("50000 keys and then one given twice: %v", err)
	}
	deep := strings.Repeat(`{"a":`, 5000) + `{"k":1,"k":2}` + strings.Repeat(`}`, 5000)
	err := duplicateKey([]byte(deep))
	var bad *Error
	if !errors.As(err, &bad) || bad.Field != strings.Repeat("a.", 5000)+"k" {
		t.Errorf("a key given twice 5000 objects deep: %v", err)
	}
}

func fieldOf(e *Error) string {
	if e == nil {
		return ""
	}
	return e.Field
}
