package render

import (
	"bytes"
	"context"
	"reflect"
	"slices"
	"strconv"
	"strings"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Generated is what a chart renders differently each time from the same
// inputs: certificates from genCA, passwords from randAlphaNum or hashed
// by htpasswd, times from now. Helm renders once per install or upgrade, so such a value is
// fixed when it runs; a controller that renders on every sync would
// change it on every sync. Capstan renders such a chart twice and reports
// the fields that differ, so the sync can leave them as they run.
type Generated struct {
	// APIVersion, Kind, Namespace (as rendered, often empty) and Name name
	// the object.
	APIVersion, Kind, Namespace, Name string
	// Paths are the fields that differ; a number indexes a list. A list
	// whose length differs is one path. An object that the second render
	// does not name the same (a random name) has the path metadata.name
	// (NamePath): alone, or, when it is paired with its counterpart in
	// the other render (as each render names its objects of a kind,
	// namespace and template anew in the same order), among the other
	// fields in which the two differ.
	Paths [][]string
	// Hook is true when the object is one of the render's Hooks.
	Hook bool
}

// NamePath is the path of a Generated object whose name the chart
// generates: it cannot be kept as it runs, since every render names
// another object.
var NamePath = []string{"metadata", "name"}

// RandomName reports whether the chart names the object at random.
func (g Generated) RandomName() bool {
	return slices.ContainsFunc(g.Paths, func(p []string) bool { return slices.Equal(p, NamePath) })
}

// generators are the template functions whose result differs from one
// call to the next: Sprig's random strings, numbers and lists, keys and
// certificates, bcrypt hashes (bcrypt, and htpasswd, which uses it) and
// AES encryption, each with a random salt or IV, and the clock (now, and
// ago, which reads it; date and its kin format a time they are given, and
// that time is now or fixed). derivePassword and buildCustomCert are left
// out: the same inputs give the same result. A chart whose templates name
// none of them renders the same every time, and is rendered once.
var generators = wordMatcher(
	"genCA", "genCAWithKey", "genPrivateKey", "genSelfSignedCert", "genSelfSignedCertWithKey", "genSignedCert", "genSignedCertWithKey",
	"randAlphaNum", "randAlpha", "randNumeric", "randAscii", "randBytes", "randInt", "uuidv4", "shuffle",
	"bcrypt", "htpasswd", "encryptAES", "now", "ago",
)

// tplCall matches a template that calls tpl, which renders a string from
// the values or the chart's files as a template of its own.
var tplCall = wordMatcher("tpl")

// words finds any of a few identifiers as a whole word, as the regular
// expression \b(name|...)\b would. Every render of a chart asks it of
// each template, so it looks for each name with a substring search and
// checks the bytes on either side, which is ten to a hundred times faster
// than the regular expression on large templates.
type words struct {
	names []string
	bytes [][]byte
}

func wordMatcher(names ...string) words {
	w := words{names: names}
	for _, n := range names {
		w.bytes = append(w.bytes, []byte(n))
	}
	return w
}

// Match reports whether data holds one of the names as a whole word.
func (w words) Match(data []byte) bool {
	for _, n := range w.bytes {
		for at := 0; ; {
			i := bytes.Index(data[at:], n)
			if i < 0 {
				break
			}
			i += at
			end := i + len(n)
			if (i == 0 || !wordByte(data[i-1])) && (end == len(data) || !wordByte(data[end])) {
				return true
			}
			at = i + 1
		}
	}
	return false
}

// MatchString is Match of a string.
func (w words) MatchString(s string) bool { return w.Match([]byte(s)) }

// wordByte reports whether b is a word character as \b sees one: ASCII
// letters, digits and the underscore.
func wordByte(b byte) bool {
	return b == '_' || '0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
}

// mayGenerate reports whether the chart may render differently each time
// with values: a template of the chart or of a subchart names a generator,
// or one calls tpl and a template string in values, in the chart's or a
// subchart's default values, or in their files names one (Bitnami's
// common.tplvalues.render runs values such as "{{ randAlphaNum 16 }}"
// through tpl).
func mayGenerate(c *chartv2.Chart, values map[string]any) bool {
	if namesGenerator(c) {
		return true
	}
	return callsTpl(c) && (templateGenerates(values) || tplInputGenerates(c))
}

// namesGenerator reports whether a template of c or of a subchart names a
// generator.
func namesGenerator(c *chartv2.Chart) bool {
	for _, t := range c.Templates {
		if t != nil && generators.Match(t.Data) {
			return true
		}
	}
	return slices.ContainsFunc(c.Dependencies(), namesGenerator)
}

// callsTpl reports whether a template of c or of a subchart calls tpl.
func callsTpl(c *chartv2.Chart) bool {
	for _, t := range c.Templates {
		if t != nil && tplCall.Match(t.Data) {
			return true
		}
	}
	return slices.ContainsFunc(c.Dependencies(), callsTpl)
}

// tplInputGenerates reports whether the default values or the files of c
// or of a subchart hold a template string that names a generator.
func tplInputGenerates(c *chartv2.Chart) bool {
	if templateGenerates(c.Values) {
		return true
	}
	for _, f := range c.Files {
		if f != nil && bytes.Contains(f.Data, []byte("{{")) && generators.Match(f.Data) {
			return true
		}
	}
	return slices.ContainsFunc(c.Dependencies(), tplInputGenerates)
}

// templateGenerates reports whether a string in v, a values tree, is a
// template (it holds "{{") that names a generator.
func templateGenerates(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.Contains(v, "{{") && generators.MatchString(v)
	case map[string]any:
		for _, e := range v {
			if templateGenerates(e) {
				return true
			}
		}
	case []any:
		return slices.ContainsFunc(v, templateGenerates)
	}
	return false
}

// findGenerated renders the chart a second time with the same inputs and
// compares the objects and the hooks with first's. An object the second
// render does not name the same is reported with NamePath: a random name
// is generated too, and would make a new object on every render. It is
// compared whole with its counterpart in the second render (see pair),
// when it has one.
func findGenerated(ctx context.Context, ch *chartv2.Chart, values map[string]any, opts Options, first *Result) ([]Generated, error) {
	second, err := helm(ctx, ch, values, opts)
	if err != nil {
		return nil, err
	}
	// NOTE: both renders are patched alike, so a field a patch sets is
	// the patch's, not a generated one, and a renamed object is found.
	if err := opts.PostRender.applyAll(second, opts.Mask); err != nil {
		return nil, err
	}
	var out []Generated
	compare := func(firsts, seconds []rendered, hook bool) {
		again := make(map[objectKey]*unstructured.Unstructured, len(seconds))
		for _, r := range seconds {
			again[keyOf(r.obj)] = r.obj
		}
		counterparts := pair(firsts, seconds)
		for _, r := range firsts {
			o := r.obj
			g := Generated{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(), Hook: hook}
			other, ok := again[keyOf(o)]
			if !ok {
				other, ok = counterparts[o]
			}
			if ok {
				differences(o.Object, other.Object, nil, &g.Paths)
			} else {
				g.Paths = [][]string{slices.Clone(NamePath)}
			}
			if len(g.Paths) > 0 {
				out = append(out, g)
			}
		}
	}
	objects := func(objs []*unstructured.Unstructured) []rendered {
		out := make([]rendered, 0, len(objs))
		for _, o := range objs {
			out = append(out, rendered{obj: o})
		}
		return out
	}
	compare(objects(first.Objects), objects(second.Objects), false)
	hooks := func(hs []Hook) []rendered {
		out := make([]rendered, 0, len(hs))
		for _, h := range hs {
			out = append(out, rendered{obj: h.Object, template: h.Template})
		}
		return out
	}
	compare(hooks(first.Hooks), hooks(second.Hooks), true)
	return out, nil
}

// rendered is an object of a render with the template file that rendered
// it, when the render keeps it (a hook's); "" otherwise.
type rendered struct {
	obj      *unstructured.Unstructured
	template string
}

// objectKey names an object in a render.
type objectKey struct{ apiVersion, kind, namespace, name string }

func keyOf(o *unstructured.Unstructured) objectKey {
	return objectKey{o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName()}
}

// pair returns, for each object of firsts that seconds does not name, its
// counterpart among the objects of seconds that firsts does not name: the
// i-th such object of its kind, namespace and template in firsts is the
// i-th of seconds. Compared whole, its other random fields are found too
// (a hook Job named at random with a random token), and metadata.name
// among them.
//
// NOTE: Helm's output order does not depend on names: templates by path,
// then documents in file order, then kinds in install order (a stable
// sort), so the i-th object named at random in one render is the i-th in
// the other. Where the counts differ (a template that renders an object
// only sometimes) the order says nothing, and none of that group is
// paired: each is reported with NamePath alone.
func pair(firsts, seconds []rendered) map[*unstructured.Unstructured]*unstructured.Unstructured {
	type group struct{ apiVersion, kind, namespace, template string }
	groupOf := func(r rendered) group {
		return group{r.obj.GetAPIVersion(), r.obj.GetKind(), r.obj.GetNamespace(), r.template}
	}
	unnamed := func(these, others []rendered) map[group][]*unstructured.Unstructured {
		names := make(map[objectKey]bool, len(others))
		for _, r := range others {
			names[keyOf(r.obj)] = true
		}
		out := map[group][]*unstructured.Unstructured{}
		for _, r := range these {
			if !names[keyOf(r.obj)] {
				out[groupOf(r)] = append(out[groupOf(r)], r.obj)
			}
		}
		return out
	}
	renamed := unnamed(seconds, firsts)
	out := map[*unstructured.Unstructured]*unstructured.Unstructured{}
	for g, objs := range unnamed(firsts, seconds) {
		if len(renamed[g]) != len(objs) {
			continue
		}
		for i, o := range objs {
			out[o] = renamed[g][i]
		}
	}
	return out
}

// differences appends the paths at which a and b differ, as deep as both
// have the same shape.
func differences(a, b any, path []string, out *[][]string) {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := make([]string, 0, len(av))
		for k := range av {
			keys = append(keys, k)
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			differences(av[k], bv[k], append(slices.Clip(path), k), out)
		}
		return
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			break
		}
		for i := range av {
			differences(av[i], bv[i], append(slices.Clip(path), strconv.Itoa(i)), out)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, slices.Clone(path))
	}
}

// FieldAt returns the value at path in obj; a number indexes a list.
func FieldAt(obj map[string]any, path []string) (any, bool) {
	var cur any = obj
	for _, p := range path {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[p]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, ok := listIndex(p, len(c))
			if !ok {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// IsCoreSecret reports whether obj is a core Secret (v1). The API server
// stores no stringData of one: it writes each key, base64, into data, over
// what data holds there.
func IsCoreSecret(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	return gvk.Group == "" && gvk.Kind == "Secret"
}

// SetSecretData sets data.KEY of a core Secret's manifest to v (base64, as
// data holds it) and drops stringData.KEY (and stringData, once empty),
// which the API server would otherwise write over it.
func SetSecretData(obj map[string]any, key string, v any) {
	if _, isMap := obj["data"].(map[string]any); !isMap {
		obj["data"] = map[string]any{}
	}
	obj["data"].(map[string]any)[key] = v
	stringData, _ := obj["stringData"].(map[string]any)
	delete(stringData, key)
	if len(stringData) == 0 {
		delete(obj, "stringData")
	}
}

// SetFieldAt sets the value at path in obj, where everything above it
// exists, and reports whether it did.
func SetFieldAt(obj map[string]any, path []string, v any) bool {
	if len(path) == 0 {
		return false
	}
	parent, ok := FieldAt(obj, path[:len(path)-1])
	if !ok {
		return false
	}
	last := path[len(path)-1]
	switch p := parent.(type) {
	case map[string]any:
		p[last] = v
		return true
	case []any:
		i, ok := listIndex(last, len(p))
		if !ok {
			return false
		}
		p[i] = v
		return true
	}
	return false
}

// listIndex reads p as an index into a list of n items, as RFC 6901 reads
// one: digits only, with no sign and no leading zero, so that "+1", "01"
// and "-0" name no item (a path written with one reads nothing, rather
// than an item its author may not have meant).
func listIndex(p string, n int) (int, bool) {
	i, err := strconv.Atoi(p)
	if err != nil || i < 0 || i >= n || strconv.Itoa(i) != p {
		return 0, false
	}
	return i, true
}
