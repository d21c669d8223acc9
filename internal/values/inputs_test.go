package values

import (
	"fmt"
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
	    "strict": {"type": "object", "additionalProperties": false, "properties": {"key": {"type": "string", "writeOnly": true}}},
	    "tested": {"type": "object", "properties": {"mode": {"type": "string"}},
	      "if": {"properties": {"probe": {"const": "x"}}, "additionalProperties": false}, "then": {"properties": {"key": {"type": "string"}}}}
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
		{"named only by a condition", []string{"tested.probe"}, []UnknownInput{{Path: "tested.probe"}}},
		{"defined by a then", []string{"tested.key"}, nil},
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

// branchingRefs returns a schema whose property deep refers to $defs d0,
// each d_i naming width properties that each refer to d_{i+1}, levels
// deep, the last a writeOnly string: width^levels writeOnly paths in a few
// KB; and whose property dag is an allOf of width refs to d'_0 and so on,
// each d'_i an allOf of width refs to d'_{i+1}, the last naming only y:
// width^levels ways to the same few schemas.
func branchingRefs(width, levels int) string {
	var b strings.Builder
	b.WriteString(`{"type": "object", "properties": {"adminPassword": {"type": "string", "writeOnly": true}, "deep": {"$ref": "#/$defs/d0"}, "dag": {"$ref": "#/$defs/a0"}}, "$defs": {`)
	for i := range levels {
		fmt.Fprintf(&b, `"d%d": {"type": "object", "properties": {`, i)
		for j := range width {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `"p%d": {"$ref": "#/$defs/d%d"}`, j, i+1)
		}
		fmt.Fprintf(&b, `}}, "a%d": {"allOf": [`, i)
		for j := range width {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `{"$ref": "#/$defs/a%d"}`, i+1)
		}
		b.WriteString(`]}, `)
	}
	fmt.Fprintf(&b, `"d%d": {"type": "string", "writeOnly": true}, "a%d": {"type": "object", "properties": {"y": {"type": "string"}}}}}`, levels, levels)
	return b.String()
}

// TestUnknownInputsBoundTheWalkOfBranchingRefs: a chart whose $refs branch
// 4 wide 16 levels deep (4^16 paths in under 3 KB) must cost a bounded
// walk, not one exponential in the schema: the writeOnly paths to suggest
// from are given up past maxSchemaVisits, and a path whose schemas cannot
// be followed within maxInputVisits counts as known.
func TestUnknownInputsBoundTheWalkOfBranchingRefs(t *testing.T) {
	s, err := ParseSchema("app", []byte(branchingRefs(4, 16)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.writeOnlyNames(); got != nil {
		t.Errorf("writeOnlyNames gave %d paths of a schema past its bound, want none", len(got))
	}
	got := s.UnknownInputs([]string{"adminPasword", "deep.p0.p1.kye", "dag.x"})
	want := []UnknownInput{{Path: "adminPasword"}, {Path: "deep.p0.p1.kye"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("UnknownInputs = %+v, want %+v", got, want)
	}
	// A schema small enough to walk still suggests.
	small, err := ParseSchema("app", []byte(branchingRefs(2, 3)), nil)
	if err != nil {
		t.Fatal(err)
	}
	got = small.UnknownInputs([]string{"deep.p0.p1.p2", "dag.x", "adminPasword"})
	want = []UnknownInput{{Path: "adminPasword", Closest: "adminPassword"}, {Path: "dag.x"}, {Path: "deep.p0.p1.p2", Closest: "deep.p0.p1.p0"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("UnknownInputs of a small schema = %+v, want %+v", got, want)
	}
}

// TestUnknownInputsBoundTheWorkOfLongNames: a secret-input path longer
// than maxInputPath is not looked for (each step of the walk would hash
// it and run the patternProperties over it), and a schema's property name
// too long ever to be suggested is not copied into the paths below it.
func TestUnknownInputsBoundTheWorkOfLongNames(t *testing.T) {
	long := strings.Repeat("k", 4*maxNamePath)
	s, err := ParseSchema("app", []byte(`{"type": "object", "properties": {
		"token": {"type": "string", "writeOnly": true},
		"`+long+`": {"type": "object", "properties": {"a": {"type": "string", "writeOnly": true}, "b": {"type": "string", "writeOnly": true}}}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.writeOnlyNames(); !reflect.DeepEqual(got, []string{"token"}) {
		t.Errorf("writeOnlyNames = %d paths (%.40q...), want only token", len(got), got)
	}
	longest := strings.Repeat("y", maxInputPath)
	got := s.UnknownInputs([]string{longest + "z", longest, "tokn"})
	want := []UnknownInput{{Path: "tokn", Closest: "token"}, {Path: longest}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("UnknownInputs = %d inputs, want the path of %d bytes and tokn", len(got), maxInputPath)
	}
}

// TestUnknownInputsSuggestOnlyNearPaths: a path is suggested only when it
// is within a third of the path's length in edits (at least 2), so that
// the suggestion is a likely misspelling; a path longer than
// maxSuggestedPath, and unknown paths past the first maxSuggestions, get
// none, as each costs an edit distance to every writeOnly path.
func TestUnknownInputsSuggestOnlyNearPaths(t *testing.T) {
	s, err := ParseSchema("app", []byte(`{"type": "object", "properties": {"adminPassword": {"type": "string", "writeOnly": true}, "token": {"type": "string", "writeOnly": true}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", maxSuggestedPath) + "adminPassword"
	many := []string{}
	for i := range maxSuggestions + 2 {
		many = append(many, "token"+string(rune('a'+i)))
	}
	for _, tc := range []struct {
		name  string
		paths []string
		want  map[string]string
	}{
		{"near", []string{"adminpasword", "tokn"}, map[string]string{"adminpasword": "adminPassword", "tokn": "token"}},
		{"far", []string{"replicaCount", "db", "a.b.c"}, map[string]string{"replicaCount": "", "db": "", "a.b.c": ""}},
		{"too long", []string{long, "xadminPassword"}, map[string]string{long: "", "xadminPassword": "adminPassword"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]string{}
			for _, u := range s.UnknownInputs(tc.paths) {
				got[u.Path] = u.Closest
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("UnknownInputs(%q) suggests %q, want %q", tc.paths, got, tc.want)
			}
		})
	}
	suggested := 0
	for _, u := range s.UnknownInputs(many) {
		if u.Closest != "" {
			suggested++
		}
	}
	if suggested != maxSuggestions {
		t.Errorf("%d unknown paths got %d suggestions, want %d", len(many), suggested, maxSuggestions)
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		k    int
		want int
	}{
		{"kitten", "sitting", 5, 3},
		{"kitten", "sitting", 3, 3},
		{"kitten", "sitting", 2, 3},
		{"", "abc", 5, 3},
		{"abc", "", 1, 2},
		{"same", "same", 0, 0},
		{"abcdef", "badcfe", 10, 4},
		{"abcdef", "badcfe", 3, 4},
		{"abcdefgh", "xyzabcdefgh", 2, 3},
		{"abcdefgh", "xyzabcdefgh", 3, 3},
	} {
		if got := editDistance(tc.a, tc.b, tc.k); got != tc.want {
			t.Errorf("editDistance(%q, %q, %d) = %d, want %d", tc.a, tc.b, tc.k, got, tc.want)
		}
	}
	// Within the band it is the whole Levenshtein distance.
	words := []string{"", "a", "ab", "ba", "abc", "acb", "cab", "abab", "baba", "aabbcc", "abcabc", "cbacba"}
	for _, a := range words {
		for _, b := range words {
			full := editDistance(a, b, len(a)+len(b))
			for k := 0; k <= len(a)+len(b); k++ {
				if got := editDistance(a, b, k); got != min(full, k+1) {
					t.Errorf("editDistance(%q, %q, %d) = %d, want %d", a, b, k, got, min(full, k+1))
				}
			}
		}
	}
}

// TestUnknownInputsOfASubchartGlobal: Helm gives every subchart the
// top-level global as its own, and the controller and the API take a
// global.* path a subchart's schema marks writeOnly as a secret input:
// given by that path it is known, and a misspelling of it is suggested
// by that path, not under the subchart's key.
func TestUnknownInputsOfASubchartGlobal(t *testing.T) {
	sub := testChart(t, "sub", "", `{"type": "object", "properties": {"global": {"type": "object", "properties": {"token": {"type": "string", "writeOnly": true}}}, "pin": {"type": "string", "writeOnly": true}}}`)
	s, err := SchemaForChart(testChart(t, "app", "", `{"type": "object", "properties": {"replicas": {"type": "integer"}}}`, sub))
	if err != nil {
		t.Fatal(err)
	}
	got := s.UnknownInputs([]string{"global.token", "global.tokn", "sub.pni"})
	want := []UnknownInput{{Path: "global.tokn", Closest: "global.token"}, {Path: "sub.pni", Closest: "sub.pin"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("UnknownInputs = %+v, want %+v", got, want)
	}
}

// TestUnknownInputsUnderAnOpenObject: an object schema that names no keys
// and does not refuse others (secretEnv: {type: object}) takes any key,
// as a chart that ranges over it into a Secret reads them all: a path
// below it is known. One that refuses other keys, or is no object, is not.
func TestUnknownInputsUnderAnOpenObject(t *testing.T) {
	s, err := ParseSchema("app", []byte(`{"type": "object", "properties": {
	  "secretEnv": {"type": "object"},
	  "config": {"$ref": "#/$defs/free"},
	  "none": {"type": "object", "additionalProperties": false},
	  "title": {"type": "string"},
	  "named": {"type": "object", "allOf": [{"properties": {"key": {"type": "string", "writeOnly": true}}}]}
	}, "$defs": {"free": {"type": "object", "additionalProperties": true}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := s.UnknownInputs([]string{"secretEnv.DB_PASSWORD", "config.a.b", "none.key", "title.key", "named.kye"})
	want := []UnknownInput{{Path: "named.kye", Closest: "named.key"}, {Path: "none.key", Closed: true}, {Path: "title.key"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("UnknownInputs = %+v, want %+v", got, want)
	}
}
