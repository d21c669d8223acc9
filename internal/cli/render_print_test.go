package cli

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"capstan.dev/capstan/internal/render"
	"capstan.dev/capstan/internal/source"
)

// TestMarshalObjectMatchesSigsYAML checks that the printed YAML is, byte for
// byte, what sigs.k8s.io/yaml.Marshal prints, for values that take the direct
// path and for those that take the JSON round trip.
func TestMarshalObjectMatchesSigsYAML(t *testing.T) {
	long := strings.Repeat("word ", 40)
	cases := map[string]map[string]any{
		"strings that look like other types": {
			"a": "1e3", "b": "yes", "c": "null", "d": "", "e": "~", "f": "0x1F", "g": "012", "h": "+1",
			"i": "true", "j": "1:20", "k": "-", "l": ".inf", "m": "2001-12-14", "n": "<<", "o": "@x", "p": "*a",
		},
		"awkward strings": {
			"multi": "line one\nline two\n", "trailing": "a \n b\t\n", "tab": "a\tb", "long": long,
			"unicode": "héllo → 世界", "control": "a\x01b", "quote": `it's "quoted"`, "colon": "a: b", "hash": "a #b",
			"crlf": "a\r\nb", "leading space": " a", "nbsp": "a\u00a0b", "bom": "\ufeffa",
		},
		"awkward keys": {"a: b": 1, "-": 2, "?": 3, "<<": 4, "yes": 5, "1": 6, "": 7, "x y": 8, "#": 9, "é": 10},
		"numbers and nulls": {
			"max": int64(math.MaxInt64), "min": int64(math.MinInt64), "zero": int64(0), "t": true, "f": false, "nil": nil,
		},
		"nesting": {
			"emptyMap": map[string]any{}, "emptyList": []any{}, "lists": []any{[]any{int64(1), "a"}, map[string]any{"b": nil}},
			"deep": map[string]any{"a": map[string]any{"b": map[string]any{"c": []any{map[string]any{}}}}},
		},
		"floats take the round trip": {
			"half": 0.5, "big": 1.5e19, "huge": 1e21, "negzero": math.Copysign(0, -1), "whole": 2.0, "tiny": 1e-7,
		},
		"invalid UTF-8 takes the round trip": {"s": "a\xffb", "k\xfe": "v"},
		"other types take the round trip":    {"int": 3, "strings": []string{"a"}, "map": map[string]string{"a": "b"}},
	}
	for name, obj := range cases {
		t.Run(name, func(t *testing.T) {
			assertMarshalsAsSigsYAML(t, obj)
		})
	}
}

// TestMarshalObjectMatchesSigsYAMLOnCharts checks every object of the test
// charts, which are what capstan render prints.
func TestMarshalObjectMatchesSigsYAMLOnCharts(t *testing.T) {
	dirs, err := os.ReadDir(charts)
	if err != nil {
		t.Fatal(err)
	}
	direct := 0
	for _, d := range dirs {
		loaded, err := source.LoadChart(filepath.Join(charts, d.Name()))
		if err != nil {
			t.Fatal(err)
		}
		res, err := render.Helm(context.Background(), loaded.Chart, nil, render.Options{ReleaseName: "r", Namespace: "ns",
			Capabilities: &render.Capabilities{KubeVersion: "v1.33.2", APIVersions: []string{"example.com/v1"}}})
		if err != nil {
			continue // a chart that needs values; the others cover the printer
		}
		for _, obj := range res.Objects {
			assertMarshalsAsSigsYAML(t, obj.Object)
			if encodesAsJSON(obj.Object) {
				direct++
			}
		}
	}
	if direct < 300 {
		t.Errorf("%d objects took the direct path, want the large chart's 330 at least", direct)
	}
}

func assertMarshalsAsSigsYAML(t *testing.T, obj map[string]any) {
	t.Helper()
	want, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	got, err := marshalObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("marshalObject differs from sigs.k8s.io/yaml.Marshal:\n--- got\n%s\n--- want\n%s", got, want)
	}
}

// FuzzMarshalObject checks the printer against sigs.k8s.io/yaml.Marshal on
// objects decoded from any YAML, with int64 and float64 numbers, as a render
// decodes them.
func FuzzMarshalObject(f *testing.F) {
	f.Add("a: 1e3\nb: [1, 2.5, -0.0, 15000000000000000000]\nc: {d: ~, e: 'x\\ty'}\n")
	f.Add("k: |+\n  text\n\n\"1\": yes\n")
	f.Fuzz(func(t *testing.T, doc string) {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			return
		}
		var obj map[string]any
		if err := utiljson.Unmarshal(j, &obj); err != nil || obj == nil {
			return
		}
		assertMarshalsAsSigsYAML(t, obj)
	})
}

// TestShowHooksSourceStaysOneComment checks that a hook's template file
// name, which a chart archive chooses, is written as one comment line
// whatever it holds: a newline in it must not put a document of the
// chart's choosing into the stream, nor an escape reach the terminal.
func TestShowHooksSourceStaysOneComment(t *testing.T) {
	names := map[string]string{
		"document":          "evil/templates/a\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: injected\n---\n# b.yaml",
		"carriage return":   "evil/templates/a\r---\rkind: Namespace",
		"escape":            "evil/templates/\x1b]0;PWNED\x07a.yaml",
		"C1":                "evil/templates/\u009b2Ja.yaml",
		"line separator":    "evil/templates/a\u2028kind: Namespace",
		"invalid UTF-8":     "evil/templates/a\xff.yaml",
		"next line (UTF-8)": "evil/templates/a\u0085kind: Namespace",
	}
	for name, template := range names {
		t.Run(name, func(t *testing.T) {
			hook := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "hook", "annotations": map[string]any{"helm.sh/hook": "pre-install"}},
			}}
			res := &render.Result{Hooks: []render.Hook{{Object: hook, Events: []string{"pre-install"}, Template: template}}}
			var out, errs bytes.Buffer
			if err := (&renderOptions{showHooks: true, stdout: &out, stderr: &errs}).print(res); err != nil {
				t.Fatal(err)
			}
			r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out.Bytes())))
			var docs []string
			for {
				doc, err := r.Read()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if strings.TrimSpace(string(doc)) != "" {
					docs = append(docs, string(doc))
				}
			}
			if len(docs) != 1 {
				t.Fatalf("the output holds %d documents, want the hook's alone:\n%s", len(docs), out.String())
			}
			comment, body, _ := strings.Cut(strings.TrimPrefix(docs[0], "---\n"), "\n")
			if !strings.HasPrefix(comment, "# Source: ") || !utf8.ValidString(comment) ||
				strings.ContainsFunc(comment, func(r rune) bool { return unicode.IsControl(r) || r == '\u2028' }) {
				t.Errorf("the comment is not one line of printable text: %q", comment)
			}
			if got, err := strconv.Unquote(strings.TrimPrefix(comment, "# Source: ")); err != nil || got != template {
				t.Errorf("the comment %q does not quote the file name %q", comment, template)
			}
			if !strings.HasPrefix(body, "apiVersion: v1\n") {
				t.Errorf("the document is not the hook after its comment:\n%s", docs[0])
			}
		})
	}
	for _, plain := range []string{"mychart/templates/job.yaml", "chart/templates/héllo wörld.yaml"} {
		if got := commentText(plain); got != plain {
			t.Errorf("commentText(%q) = %q, want the name as it is", plain, got)
		}
	}
}
