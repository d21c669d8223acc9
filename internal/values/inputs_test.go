package values

import (
	"reflect"
	"strings"
	"testing"
)

func TestUnknownInputs(t *testing.T) {
	const doc = `{
	  "type": "object",
	  "properties": {
	    "adminPassword": {"type": "string", "writeOnly": true},
	    "replicas": {"type": "integer"},
	    "auth": {"$ref": "#/$defs/auth"},
	    "users": {"type": "array", "items": {"type": "object", "properties": {"pin": {"type": "string", "writeOnly": true}}}},
	    "extraEnv": {"type": "object", "additionalProperties": {"type": "string"}},
	    "tokens": {"type": "object", "writeOnly": true},
	    "strict": {"type": "object", "additionalProperties": false, "properties": {"key": {"type": "string", "writeOnly": true}}}
	  },
	  "$defs": {"auth": {"type": "object", "properties": {"password": {"type": "string", "writeOnly": true}}}}
	}`
	s, err := ParseSchema("app", []byte(doc), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		paths []string
		want  []UnknownInput
	}{
		{"writeOnly", []string{"adminPassword", "auth.password", "users[0].pin", "strict.key"}, nil},
		{"defined without writeOnly", []string{"replicas"}, nil},
		{"under a map of values", []string{"extraEnv.SECRET"}, nil},
		{"under a writeOnly object", []string{"tokens.github"}, nil},
		{"a misspelt name", []string{"adminPasword"}, []UnknownInput{{Path: "adminPasword", Closest: "adminPassword"}}},
		{"misspelt under a ref", []string{"auth.pasword"}, []UnknownInput{{Path: "auth.pasword", Closest: "auth.password"}}},
		{"misspelt in a list", []string{"users[1].pni"}, []UnknownInput{{Path: "users[1].pni", Closest: "users[0].pin"}}},
		{"refused by the schema", []string{"strict.kye"}, []UnknownInput{{Path: "strict.kye", Closed: true, Closest: "strict.key"}}},
		{"not a targetPath", []string{"a..b"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.UnknownInputs(tc.paths); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("UnknownInputs(%q) = %+v, want %+v", tc.paths, got, tc.want)
			}
		})
	}
	// NOTE: the controller's validation refuses the path the schema does
	// not allow, naming it, as a secret input lands there by its targetPath.
	errs := s.Validate(map[string]any{"strict": map[string]any{"kye": "x"}})
	if len(errs) != 1 || errs[0].Rule != "additionalProperties" || !strings.Contains(errs[0].Message, "strict.kye") {
		t.Errorf("validating strict.kye: %+v; want one additionalProperties error naming strict.kye", errs)
	}
	var none *Schema
	if got := none.UnknownInputs([]string{"anything"}); got != nil {
		t.Errorf("a chart without a schema: %+v, want nothing", got)
	}
}
