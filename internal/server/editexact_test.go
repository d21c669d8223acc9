package server

import (
	"encoding/json"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestKeepExact saves values of which one, in a nested map, changed: the
// numbers a float64 does not hold, beside it and elsewhere, keep the
// digits spec.values had, and a changed value and a null are the form's.
func TestKeepExact(t *testing.T) {
	raw := `{"bot":{"chatId":1234567890123456789,"enabled":false},"big":100000000000000000000000,"gone":7,"n":null}`
	a := &capstanv1.Addon{}
	a.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(raw)}
	current, err := specValues(a)
	if err != nil {
		t.Fatal(err)
	}
	exact, err := exactValues(a)
	if err != nil {
		t.Fatal(err)
	}
	next, _ := specValues(a)
	next["bot"].(map[string]any)["enabled"] = true
	next["n"] = nil
	next["added"] = int64(3)
	delete(next, "gone")
	out, err := json.Marshal(keepExact(exact, current, next))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"added":3,"big":100000000000000000000000,"bot":{"chatId":1234567890123456789,"enabled":true},"n":null}`
	if string(out) != want {
		t.Errorf("the values saved: %s; want %s", out, want)
	}
}
