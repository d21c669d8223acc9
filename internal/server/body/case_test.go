package body

import (
	"errors"
	"strings"
	"testing"
)

// TestDecodeMatchesFieldsInTheirOwnCase: a key that spells a field in
// another letter case is an unknown field named by its path, with the
// field's spelling suggested, rather than taken as that field (past the
// check of keys given twice, which compares keys exactly); the keys of
// secretInputs are targetPaths, distinct in any case.
func TestDecodeMatchesFieldsInTheirOwnCase(t *testing.T) {
	for _, tc := range []struct {
		name, body, field, suggest string
		into                       func() any
	}{
		{"the name twice in two cases", `{"name":"blog","Name":"other","spec":{}}`, "Name", "name", func() any { return &Add{} }},
		{"the name in another case only", `{"NAME":"other"}`, "NAME", "name", func() any { return &Add{} }},
		{"spec.deletionPolicy twice in two cases", `{"name":"blog","spec":{"deletionPolicy":"Orphan","DeletionPolicy":"Delete"}}`, "spec.DeletionPolicy", "deletionPolicy", func() any { return &Add{} }},
		{"a field of the chart", `{"name":"blog","spec":{"chart":{"URL":"https://charts.example/a-1.0.0.tgz"}}}`, "spec.chart.URL", "url", func() any { return &Add{} }},
		{"secretInputs in another case", `{"name":"blog","SecretInputs":{"a":"x"}}`, "SecretInputs", "secretInputs", func() any { return &Add{} }},
		{"the spec patch's key", `{"Spec":{"suspend":true}}`, "Spec", "spec", func() any { return &Change{} }},
		{"an edit's generation", `{"generation":1,"Generation":2}`, "Generation", "generation", func() any { return &Edit{} }},
		{"the plan's hash", `{"hash":"sha256:a","Hash":"sha256:b"}`, "Hash", "hash", func() any { return &Approval{} }},
		{"the token", `{"Token":"a"}`, "Token", "token", func() any { return &SignIn{} }},
	} {
		err := Decode(strings.NewReader(tc.body), tc.into())
		var bad *Error
		want := "the request body is not the JSON this endpoint takes: unknown field \"" + tc.field + "\": did you mean " + tc.suggest + "? field names are case-sensitive"
		if !errors.As(err, &bad) || bad.Field != tc.field || bad.Message != want {
			t.Errorf("%s: %v (field %q); want %s refused as an unknown field:\n%s", tc.name, err, fieldOf(bad), tc.field, want)
		}
	}

	var add Add
	if err := Decode(strings.NewReader(`{"name":"blog","spec":{"deletionPolicy":"Orphan"},"secretInputs":{"auth.password":"a","auth.Password":"b"}}`), &add); err != nil {
		t.Fatalf("secret inputs whose paths differ in case: %v; want two inputs", err)
	}
	if add.Name != "blog" || add.Spec.DeletionPolicy != "Orphan" || len(add.SecretInputs) != 2 || add.SecretInputs["auth.password"] != "a" || add.SecretInputs["auth.Password"] != "b" {
		t.Errorf("decoded %+v; want the name, the policy and both secret inputs as sent", add)
	}
	var change Change
	if err := Decode(strings.NewReader(`{"spec":{"values":{"Replicas":1,"replicas":2}},"secretInputs":{"A":"x","a":"y"}}`), &change); err != nil || len(change.SecretInputs) != 2 {
		t.Errorf("keys of spec.values and secret inputs that differ in case: %v, %+v; want both kept", err, change)
	}
	err := Decode(strings.NewReader(`{"name":"blog","colour":"blue"}`), &Add{})
	if bad := (*Error)(nil); !errors.As(err, &bad) || bad.Field != "colour" || bad.Message != `the request body is not the JSON this endpoint takes: unknown field "colour"` {
		t.Errorf("an unknown field no field resembles: %v; want it named with no suggestion", err)
	}
}
