package values

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// FuzzTargetPath checks that any targetPath either is refused with an error
// or sets the raw string so that it can be read back, unparsed, at the path.
func FuzzTargetPath(f *testing.F) {
	for _, s := range []string{"a", "a.b", `a\.b`, "l[0]", "l[2].x", "m[1][3]", "a..b", "a[0", "[0]", `a\`, "a]", "a[0]b", "x[4096]"} {
		f.Add(s, "0123")
	}
	f.Fuzz(func(t *testing.T, path, raw string) {
		p, err := parseTargetPath(path)
		if err != nil {
			if !strings.Contains(err.Error(), "targetPath") {
				t.Fatalf("error %q does not say it is about the targetPath", err)
			}
			return
		}
		if len(p) == 0 || p[0].isIndex || len(p) > MaxPathSegments {
			t.Fatalf("parseTargetPath(%q) = %#v: must start with a key and have 1..%d segments", path, p, MaxPathSegments)
		}
		m := map[string]any{"keep": "me"}
		p.set(m, raw)
		got, ok := lookup(m, p.strings())
		if !ok || got != raw {
			t.Fatalf("after set(%q), the path holds %#v (found %v), want the raw string", path, got, ok)
		}
		if p[0].key != "keep" && m["keep"] != "me" {
			t.Fatalf("set(%q) changed a sibling", path)
		}
	})
}

// FuzzCompose merges arbitrary YAML documents and checks the merge's
// invariants: it never panics, the last document's scalars win, a null never
// survives in the effective values, and the platform key is the platform's.
func FuzzCompose(f *testing.F) {
	f.Add("a: 1\nb: {c: [1, 2]}", "b: {c: null, d: x}", "a: [x]", "auth.password", "0123")
	f.Add("capstan: {x: 1}", "x: null", "{}", "l[3].k", "true")
	f.Add("a: {b: {c: d}}", "a: {b: null}", "a: {b: {e: f}}", `a\.b`, "[a]")
	chart := testChart(f, "fuzz", "a: {b: {c: default}}\nlist: [1, 2]\nn: null", "")
	f.Fuzz(func(t *testing.T, spec, doc1, doc2, path, raw string) {
		parse := func(s string) map[string]any {
			d, err := parseDocument([]byte(s), "fuzz")
			if err != nil {
				return nil
			}
			return d
		}
		layers := []Layer{{Ref: docLayer("Secret", "s1", "").Ref, Doc: parse(doc1)}}
		if p, err := parseTargetPath(path); err == nil {
			l := pathLayer("Secret", "s2", "x", raw)
			l.path, l.Ref.TargetPath = p, path
			layers = append(layers, l)
		}
		last := parse(doc2)
		layers = append(layers, Layer{Ref: docLayer("ConfigMap", "c", "").Ref, Doc: last})
		res, err := Compose(Inputs{
			Chart:    chart,
			Sources:  Sources{Spec: parse(spec), From: indexed(layers...)},
			Platform: map[string]any{"namespace": "platform"},
		})
		if err != nil {
			t.Fatalf("Compose: %v", err)
		}
		if got := res.Effective[DefaultPlatformKey]; !equalYAML(got, map[string]any{"namespace": "platform"}) {
			t.Fatalf("the platform key holds %#v", got)
		}
		for k, v := range last {
			if k == DefaultPlatformKey {
				continue
			}
			switch v.(type) {
			case map[string]any, nil:
			default:
				if !equalYAML(res.Effective[k], v) {
					t.Fatalf("the last document's %q = %#v, but the effective value is %#v", k, v, res.Effective[k])
				}
			}
		}
		leaves(res.Effective, nil, func(p []string, v any) {
			if v == nil && (len(p) == 0 || !isListIndex(res.Effective, p)) {
				t.Fatalf("a null survived at %s", pointer(p))
			}
		})
		_ = res.Redacted()
	})
}

// isListIndex reports whether p lies inside a list; lists replace as a
// whole, so the nulls in them are kept.
func isListIndex(root map[string]any, p []string) bool {
	for i := range p {
		if v, _ := lookup(root, p[:i]); v != nil {
			if _, ok := v.([]any); ok {
				return true
			}
		}
	}
	return false
}

func equalYAML(a, b any) bool {
	x, err1 := yaml.Marshal(a)
	y, err2 := yaml.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// FuzzParseDocument feeds any document to the values parser. A document is
// either refused with a message that never quotes it (it may be a Secret's)
// or is a map that survives serialising and parsing again.
func FuzzParseDocument(f *testing.F) {
	for _, s := range []string{
		"replicas: 2\nimage: {repository: nginx, tag: \"1.25\"}\n",
		`{"auth": {"password": "s3cret"}, "list": [1, null, "x"]}`,
		"a: &a [*a, *a]\nb: *a\n", "- 1\n- 2\n", "just text", "a: 1\na: 2\n", "a: !!binary aGk=\n", "? [a]\n: b\n", "\t", "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		defer watchdog(10 * time.Second)()
		doc, ie := parseDocument(data, "fuzz")
		if ie != nil {
			if doc != nil || len(ie.Errors) != 1 {
				t.Fatalf("a refusal with values or without one problem: %v", ie)
			}
			msg := lineRE.ReplaceAllString(ie.Errors[0].Message, "line N")
			switch {
			case strings.HasPrefix(msg, "fuzz is not a map of values: "), strings.HasPrefix(msg, "fuzz is not valid YAML; "),
				strings.HasPrefix(msg, "fuzz is not valid YAML at line N; "), strings.HasPrefix(msg, "fuzz is ") && ie.Errors[0].Rule == "values.tooLarge":
			default:
				t.Fatalf("a message that is not one of the fixed ones: %q", msg)
			}
			return
		}
		if doc == nil {
			t.Fatal("no values and no error")
		}
		out, err := yaml.Marshal(doc)
		if err != nil {
			t.Fatalf("accepted values do not serialise: %v", err)
		}
		again, ie := parseDocument(out, "fuzz")
		if ie != nil {
			t.Fatalf("the serialised values are refused: %v\n%s", ie, out)
		}
		if !equalYAML(doc, again) {
			t.Fatalf("serialise and parse changed the values:\n%#v\n%#v", doc, again)
		}
	})
}

// FuzzParseSchema compiles any values.schema.json, with a second file that
// a $ref may name, and validates any values document with what it accepts.
// Compiling ends in bounded time without a panic; every validation error
// has a message; every generated field names a known alphabet and a length.
func FuzzParseSchema(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.schema.json")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, []byte(`{}`), []byte("replicas: 1\n"))
	}
	for _, s := range [][3]string{
		{`{"type":"object","properties":{"password":{"type":"string","writeOnly":true,"x-capstan-generate":{"length":32,"alphabet":"alphanumeric"}}}}`, `{}`, "password: x\n"},
		{`{"$ref":"defs.json#/definitions/a"}`, `{"definitions":{"a":{"type":"object","required":["x"]}}}`, "y: 1\n"},
		{`{"$ref":"#"}`, `{}`, "a: 1\n"},
		{`{"definitions":{"a":{"items":{"$ref":"#/definitions/a"}}},"properties":{"l":{"$ref":"#/definitions/a"}}}`, `{}`, "l: [[[[]]]]\n"},
		{`{"$ref":"https://example.com/s.json"}`, `{}`, ""},
		{`{"properties":{"a":{"oneOf":[{"type":"string"},{"type":"integer","minimum":3}]}}}`, `{}`, "a: 2\n"},
		{`{"properties":{"n":{"multipleOf":0.1,"enum":[1,"a",null]}}}`, `{}`, "n: 0.3\n"},
		{`[]`, `{}`, ""},
		{`{"$defs":{"a":{"$dynamicAnchor":"a","properties":{"s":{"writeOnly":true},"n":{"$dynamicRef":"#a"}}}},"properties":{"p":{"$ref":"defs.json#b"},"q":{"$ref":"#a"}}}`,
			`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"b":{"$id":"#b","writeOnly":true}}}`, "q: {n: {s: x}}\n"},
		{`{"$defs":{"o":{"$schema":"http://json-schema.org/draft-04/schema#","id":"o.json","definitions":{"c":{"id":"#c","writeOnly":true}},"properties":{"x":{"$ref":"#c"}}}},"properties":{"o":{"$ref":"o.json"}}}`, `{}`, "o: {x: 1}\n"},
	} {
		f.Add([]byte(s[0]), []byte(s[1]), []byte(s[2]))
	}
	f.Fuzz(func(t *testing.T, doc, defs, values []byte) {
		defer watchdog(10 * time.Second)()
		s, err := ParseSchema("fuzz", doc, map[string][]byte{"defs.json": defs})
		if err != nil {
			if s != nil {
				t.Fatalf("a schema with an error: %v", err)
			}
			return
		}
		for _, g := range s.Generated() {
			if _, ok := Alphabets[g.Alphabet]; !ok || g.Length <= 0 || len(g.Path) == 0 {
				t.Fatalf("generates %+v", g)
			}
		}
		vals, ie := parseDocument(values, "fuzz")
		if ie != nil {
			return
		}
		for _, ve := range s.Validate(vals) {
			if ve.Message == "" {
				t.Fatalf("a validation error without a message: %+v", ve)
			}
		}
	})
}

// watchdog crashes the process, with every goroutine's stack, when one
// input takes longer than d: the fuzzer then keeps the input as a failure,
// where a hang would only stall it.
func watchdog(d time.Duration) (stop func()) {
	timer := time.AfterFunc(d, func() {
		buf := make([]byte, 1<<20)
		panic(fmt.Sprintf("one input took over %s:\n%s", d, buf[:runtime.Stack(buf, true)]))
	})
	return func() { timer.Stop() }
}
