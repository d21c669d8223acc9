package values

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

func TestParseTargetPath(t *testing.T) {
	key := func(k string) segment { return segment{key: k} }
	idx := func(i int) segment { return segment{index: i, isIndex: true} }
	tests := []struct {
		path    string
		want    targetPath
		wantErr string
	}{
		{path: "a", want: targetPath{key("a")}},
		{path: "auth.password", want: targetPath{key("auth"), key("password")}},
		{path: `annotations.example\.com/key`, want: targetPath{key("annotations"), key("example.com/key")}},
		{path: `a\\b`, want: targetPath{key(`a\b`)}},
		{path: `a\[0\]`, want: targetPath{key("a[0]")}},
		{path: "list[0]", want: targetPath{key("list"), idx(0)}},
		{path: "list[2].name", want: targetPath{key("list"), idx(2), key("name")}},
		{path: "m[1][3]", want: targetPath{key("m"), idx(1), idx(3)}},
		{path: "a-b_c.0", want: targetPath{key("a-b_c"), key("0")}},

		{path: "", wantErr: "empty"},
		{path: ".a", wantErr: "empty segment"},
		{path: "a.", wantErr: "empty segment"},
		{path: "a..b", wantErr: "empty segment"},
		{path: "a.[0]", wantErr: "empty segment"},
		{path: "[0]", wantErr: "starts with a list index"},
		{path: "a[0", wantErr: "unclosed '['"},
		{path: "a[", wantErr: "unclosed '['"},
		{path: "a[]", wantErr: "is empty"},
		{path: "a[-1]", wantErr: "non-negative"},
		{path: "a[x]", wantErr: "non-negative"},
		{path: "a[99999]", wantErr: "larger than"},
		{path: "a[0]b", wantErr: "expected '.' or '['"},
		{path: "a[0].", wantErr: "empty segment"},
		{path: "a]", wantErr: "']' without '['"},
		{path: `a\`, wantErr: "lone backslash"},
		{path: strings.Repeat("a.", MaxPathSegments) + "a", wantErr: "deeper than"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, err := parseTargetPath(tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseTargetPath(%q) error = %v, want one containing %q", tt.path, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseTargetPath(%q): %v", tt.path, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("parseTargetPath(%q) = %#v, want %#v", tt.path, got, tt.want)
			}
		})
	}
}

func TestTargetPathSet(t *testing.T) {
	tests := []struct {
		name  string
		start map[string]any
		path  string
		value string
		want  map[string]any
	}{
		{name: "creates maps", start: map[string]any{}, path: "a.b", value: "x",
			want: map[string]any{"a": map[string]any{"b": "x"}}},
		{name: "keeps siblings", start: map[string]any{"a": map[string]any{"c": 1.0}}, path: "a.b", value: "x",
			want: map[string]any{"a": map[string]any{"b": "x", "c": 1.0}}},
		{name: "extends a list with nulls", start: map[string]any{}, path: "l[2]", value: "x",
			want: map[string]any{"l": []any{nil, nil, "x"}}},
		{name: "sets into a list element", start: map[string]any{"l": []any{map[string]any{"n": "a"}}}, path: "l[0].v", value: "x",
			want: map[string]any{"l": []any{map[string]any{"n": "a", "v": "x"}}}},
		{name: "replaces a scalar in the way", start: map[string]any{"a": "s"}, path: "a.b", value: "x",
			want: map[string]any{"a": map[string]any{"b": "x"}}},
		{name: "replaces a map with a list when indexed", start: map[string]any{"a": map[string]any{"k": 1.0}}, path: "a[0]", value: "x",
			want: map[string]any{"a": []any{"x"}}},
		{name: "escaped dot is one key", start: map[string]any{}, path: `a\.b`, value: "x",
			want: map[string]any{"a.b": "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := parseTargetPath(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			p.set(tt.start, tt.value)
			if !reflect.DeepEqual(tt.start, tt.want) {
				t.Fatalf("set(%q) = %#v, want %#v", tt.path, tt.start, tt.want)
			}
		})
	}
}

func TestTargetPathSetDoesNotChangeSharedLists(t *testing.T) {
	shared := []any{"a", "b"}
	m := map[string]any{"l": shared}
	p, _ := parseTargetPath("l[0]")
	p.set(m, "x")
	if shared[0] != "a" {
		t.Fatalf("set changed a list another source still holds: %v", shared)
	}
	if m["l"].([]any)[0] != "x" {
		t.Fatalf("set did not set the element: %v", m)
	}
}

// TestPathSegments: a targetPath reads as the segments Lookup takes, so a
// secret input named users[0].password or a\.b is found where it is.
func TestPathSegments(t *testing.T) {
	vals := map[string]any{"users": []any{map[string]any{"password": "p"}}, "a.b": "d"}
	for path, want := range map[string]any{"users[0].password": "p", `a\.b`: "d", "users.0.password": "p"} {
		segs, err := PathSegments(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if got, ok := Lookup(vals, segs); !ok || got != want {
			t.Errorf("%s: %v %v; want %v", path, got, ok, want)
		}
	}
	if _, err := PathSegments("users[x]"); err == nil {
		t.Error("users[x] parsed; want an error")
	}
}

// TestSecretInputPathsRoundTrip: every path of a secret input that
// findSecretInputs finds is named by a targetPath that reads back as the
// same segments and, set as a targetPath, lands where the value is,
// leaving the rest of the tree as it was: a map's key of digits (a port,
// a uid, a key with leading zeros) is written as a key, not as a list's
// index. A path with an empty key, which no targetPath names, says so.
func TestSecretInputPathsRoundTrip(t *testing.T) {
	s, err := ParseSchema("app", []byte(`{"type": "object", "properties": {
		"users": {"type": "object", "additionalProperties": {"type": "object", "properties": {"password": {"type": "string", "writeOnly": true}}}},
		"ports": {"type": "object", "additionalProperties": {"type": "string", "writeOnly": true}},
		"pins": {"type": "object", "additionalProperties": {"type": "string", "writeOnly": true}},
		"servers": {"type": "array", "items": {"type": "object", "properties": {"pin": {"type": "string", "writeOnly": true}}}},
		"grid": {"type": "array", "items": {"type": "array", "items": {"type": "string", "writeOnly": true}}},
		"a.b": {"type": "object", "additionalProperties": {"type": "string", "writeOnly": true}}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]any{}
	if err := json.Unmarshal([]byte(`{
		"users": {"10001": {"password": "p1", "shell": "sh"}, "7": {"password": "p2"}},
		"ports": {"80": "s80", "8080": "s8080"},
		"pins": {"007": "s007", "": "sempty"},
		"servers": [{"pin": "s0"}, {"pin": "s1"}],
		"grid": [["g00"], ["g10", "g11"]],
		"a.b": {"0": "sab"}}`), &vals); err != nil {
		t.Fatal(err)
	}
	var names []string
	unnamed := 0
	s.findSecretInputs(vals, nil, nil, func(p []string) {
		name, ok := TargetPathIn(vals, p)
		if !ok {
			unnamed++
			if !slices.Contains(p, "") {
				t.Errorf("%q: no targetPath names it; want one", p)
			}
			return
		}
		names = append(names, name)
		segs, err := PathSegments(name)
		if err != nil || !slices.Equal(segs, p) {
			t.Errorf("%q is named %s, which reads back as %q (%v)", p, name, segs, err)
		}
		tp, err := parseTargetPath(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := copyMap(vals)
		tp.set(got, "NEW")
		want := copyMap(vals)
		parent, _ := lookup(want, p[:len(p)-1])
		switch c := parent.(type) {
		case map[string]any:
			c[p[len(p)-1]] = "NEW"
		case []any:
			i, _ := strconv.Atoi(p[len(p)-1])
			c[i] = "NEW"
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s set as a targetPath gives %v; want %v", name, got, want)
		}
	})
	slices.Sort(names)
	want := []string{`a\.b.0`, "grid[0][0]", "grid[1][0]", "grid[1][1]", "pins.007", "ports.80", "ports.8080", "servers[0].pin", "servers[1].pin", "users.10001.password", "users.7.password"}
	if !slices.Equal(names, want) || unnamed != 1 {
		t.Errorf("secret inputs named %q and %d unnamed; want %q and the one with an empty key", names, unnamed, want)
	}

	errs := s.checkWriteOnly(Sources{Spec: vals}, nil)
	setPaths, _, _ := WriteOnlyPaths(errs, vals, nil)
	var set []string
	for _, p := range setPaths {
		set = append(set, p.Name)
	}
	if !slices.Contains(set, "ports.8080") || !slices.Contains(set, "users.10001.password") {
		t.Errorf("WriteOnlyPaths names %q; want ports.8080 and users.10001.password", set)
	}
	for _, e := range errs {
		if e.Path == "/ports/8080" && !strings.HasPrefix(e.Message, "ports.8080 is a secret input") {
			t.Errorf("the error at %s says %q; want it to name ports.8080", e.Path, e.Message)
		}
		if e.Path == "/pins/" && !strings.Contains(e.Message, "no targetPath can name") {
			t.Errorf("the error at %s says %q; want it to say no targetPath names it", e.Path, e.Message)
		}
	}
}

// TestWriteOnlyPathsNameAPathOnce: spec.values and a ConfigMap layered
// over it that both set a writeOnly path each give an error there; the
// refusal names the path once.
func TestWriteOnlyPathsNameAPathOnce(t *testing.T) {
	s, err := ParseSchema("app", []byte(`{"type": "object", "properties": {
		"ldap": {"type": "object", "properties": {"bindPassword": {"type": "string", "writeOnly": true}}}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]any{"ldap": map[string]any{"bindPassword": "a"}}
	cm := Layer{Ref: capstanv1.ValuesReference{Kind: "ConfigMap", Name: "app-values"}, Doc: map[string]any{"ldap": map[string]any{"bindPassword": "b"}}}
	errs := s.checkWriteOnly(Sources{Spec: vals, From: []Layer{cm}}, nil)
	if len(errs) != 2 {
		t.Fatalf("checkWriteOnly gave %d errors; want one for spec.values and one for the ConfigMap: %v", len(errs), errs)
	}
	for _, before := range []map[string]any{nil, vals} {
		set, held, _ := WriteOnlyPaths(errs, vals, before)
		var names []string
		for _, p := range append(set, held...) {
			names = append(names, p.Name)
		}
		if !slices.Equal(names, []string{"ldap.bindPassword"}) {
			t.Errorf("with values before %v, WriteOnlyPaths names %q; want ldap.bindPassword once", before, names)
		}
	}
}
