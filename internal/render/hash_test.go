package render

import (
	"regexp"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// newObject builds an object for a test.
func newObject(apiVersion, kind, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetName(name)
	return u
}

func TestHash(t *testing.T) {
	chart := SourceIdentity{Name: "web", Version: "1.2.3", URL: "https://charts.example/"}
	pinned := SourceIdentity{Digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", URL: "https://charts.example/"}
	base := func() (SourceIdentity, map[string]any, string, string) {
		return chart, map[string]any{"a": 1, "b": map[string]any{"c": "x", "d": []any{1, 2}}}, "shop", "apps"
	}
	baseHash := mustHash(t)(base())
	if !regexp.MustCompile(`^sha256:[a-f0-9]{64}$`).MatchString(baseHash) {
		t.Fatalf("hash %q is not sha256: and 64 hex digits", baseHash)
	}
	cases := []struct {
		name   string
		src    SourceIdentity
		values map[string]any
		rel    string
		ns     string
		same   bool
	}{
		{name: "same inputs, keys built in another order", src: chart,
			values: map[string]any{"b": map[string]any{"d": []any{1, 2}, "c": "x"}, "a": 1}, rel: "shop", ns: "apps", same: true},
		{name: "int and float of one number", src: chart,
			values: map[string]any{"a": 1.0, "b": map[string]any{"c": "x", "d": []any{int64(1), float64(2)}}}, rel: "shop", ns: "apps", same: true},
		{name: "a value changes", src: chart,
			values: map[string]any{"a": 2, "b": map[string]any{"c": "x", "d": []any{1, 2}}}, rel: "shop", ns: "apps"},
		{name: "list order changes", src: chart,
			values: map[string]any{"a": 1, "b": map[string]any{"c": "x", "d": []any{2, 1}}}, rel: "shop", ns: "apps"},
		{name: "number becomes a string", src: chart,
			values: map[string]any{"a": "1", "b": map[string]any{"c": "x", "d": []any{1, 2}}}, rel: "shop", ns: "apps"},
		{name: "release name changes", src: chart,
			values: map[string]any{"a": 1, "b": map[string]any{"c": "x", "d": []any{1, 2}}}, rel: "shop2", ns: "apps"},
		{name: "namespace changes", src: chart,
			values: map[string]any{"a": 1, "b": map[string]any{"c": "x", "d": []any{1, 2}}}, rel: "shop", ns: "apps2"},
		{name: "chart version changes", src: SourceIdentity{Name: "web", Version: "1.2.4", URL: "https://charts.example/"},
			values: map[string]any{"a": 1, "b": map[string]any{"c": "x", "d": []any{1, 2}}}, rel: "shop", ns: "apps"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := mustHash(t)(tc.src, tc.values, tc.rel, tc.ns)
			if (got == baseHash) != tc.same {
				t.Errorf("hash equal to the base = %v, want %v", got == baseHash, tc.same)
			}
		})
	}

	t.Run("a digest makes the URL irrelevant", func(t *testing.T) {
		mirror := pinned
		mirror.URL = "oci://mirror.example/charts/web"
		mirror.Name, mirror.Version = "web", "1.2.3"
		if mustHash(t)(pinned, nil, "r", "n") != mustHash(t)(mirror, nil, "r", "n") {
			t.Error("the same digest from a mirror hashes differently")
		}
	})
	t.Run("nil and empty values are one", func(t *testing.T) {
		if mustHash(t)(chart, nil, "r", "n") != mustHash(t)(chart, map[string]any{}, "r", "n") {
			t.Error("nil and empty values hash differently")
		}
	})
	t.Run("git commit and path", func(t *testing.T) {
		a := mustHash(t)(SourceIdentity{Commit: "abc", Path: "apps/one"}, nil, "", "")
		if a == mustHash(t)(SourceIdentity{Commit: "abc", Path: "apps/two"}, nil, "", "") ||
			a == mustHash(t)(SourceIdentity{Commit: "abd", Path: "apps/one"}, nil, "", "") {
			t.Error("another path or commit hashes the same")
		}
	})
}

func mustHash(t *testing.T) func(SourceIdentity, map[string]any, string, string) string {
	return func(src SourceIdentity, values map[string]any, rel, ns string) string {
		t.Helper()
		h, err := Hash(src, values, rel, ns)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
}
