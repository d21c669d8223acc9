package values

import (
	"reflect"
	"strings"
	"testing"
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
