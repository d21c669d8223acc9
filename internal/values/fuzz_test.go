package values

import (
	"strings"
	"testing"

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
