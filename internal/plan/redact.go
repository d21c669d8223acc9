package plan

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Markers that stand in for Secret values in a diff. A changed key is shown
// as changed, with no value.
const (
	hiddenUnchanged = "(hidden)"
	hiddenOld       = "(hidden: old value)"
	hiddenNew       = "(hidden: new value)"
)

// lastApplied is kubectl's annotation that holds a whole copy of the object,
// Secret data included, on objects once applied with `kubectl apply`.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// RedactSecretPair replaces the values of a Secret's data and stringData, and
// any annotation that copies them, in both the live and the desired object,
// so that a diff of the two shows which keys are added, removed or changed
// and never a value. Objects of other kinds are returned as they are. Either
// side may be nil. The arguments are not modified.
func RedactSecretPair(live, desired *unstructured.Unstructured) (*unstructured.Unstructured, *unstructured.Unstructured) {
	if !isSecret(live) && !isSecret(desired) {
		return live, desired
	}
	if live != nil {
		live = live.DeepCopy()
	}
	if desired != nil {
		desired = desired.DeepCopy()
	}
	copies := copyingAnnotations(live, desired)
	for _, field := range []string{"data", "stringData"} {
		redactMaps(field, live, desired)
	}
	for _, key := range copies {
		redactAnnotation(key, live, desired)
	}
	return live, desired
}

// copyingAnnotations names, sorted, the annotations of either side that
// may copy a value of the Secret's data or stringData: kubectl's
// last-applied-configuration always, and any annotation whose value holds
// one of those values, as it is stored or decoded, or decoded and quoted
// in JSON, or that holds a copy of the data whatever its values
// (copiesData). Other tools keep a whole copy of the object in an
// annotation (kapp's kapp.k14s.io/original and original-diff) and a
// webhook may add its own, so no list of keys can be complete.
func copyingAnnotations(live, desired *unstructured.Unstructured) []string {
	var values []string
	for _, obj := range []*unstructured.Unstructured{live, desired} {
		if obj == nil {
			continue
		}
		for _, field := range []string{"data", "stringData"} {
			m, _ := obj.Object[field].(map[string]any)
			for _, v := range m {
				s, ok := v.(string)
				if !ok || s == "" {
					continue
				}
				values = append(append(values, s), quoted(s)...)
				if field == "data" {
					if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) > 0 {
						values = append(append(values, string(b)), quoted(string(b))...)
					}
				}
			}
		}
	}
	keys := map[string]bool{lastApplied: true}
	for _, obj := range []*unstructured.Unstructured{live, desired} {
		if obj == nil {
			continue
		}
		for k, v := range obj.GetAnnotations() {
			if !keys[k] && (slices.ContainsFunc(values, func(s string) bool { return strings.Contains(v, s) }) || copiesData(v)) {
				keys[k] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(keys))
}

// copiesData reports whether an annotation's value holds a copy of a
// Secret's data whatever values it holds: JSON or YAML of an object with
// a data or stringData member (kapp's original), or a JSON patch with a
// path under /data or /stringData (kapp's original-diff). A copy made
// before the data changed, by a rotation outside the tool that keeps it,
// holds values neither side has any more, and may still be in use.
func copiesData(v string) bool {
	var doc any
	if !strings.ContainsAny(v, ":") || yaml.Unmarshal([]byte(v), &doc) != nil {
		return false
	}
	switch d := doc.(type) {
	case map[string]any:
		_, data := d["data"]
		_, stringData := d["stringData"]
		return data || stringData
	case []any:
		for _, op := range d {
			m, _ := op.(map[string]any)
			path, _ := m["path"].(string)
			for _, field := range []string{"/data", "/stringData"} {
				if path == field || strings.HasPrefix(path, field+"/") {
					return true
				}
			}
		}
	}
	return false
}

// quoted is s as JSON writes it within a string, without the quotes, with
// HTML's characters escaped (as Go writes JSON) and as they are.
func quoted(s string) []string {
	b, _ := json.Marshal(s)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	plain := strings.TrimSuffix(buf.String(), "\n")
	return []string{string(b[1 : len(b)-1]), plain[1 : len(plain)-1]}
}

// RedactSecret hides every value of a Secret, for showing one object alone.
func RedactSecret(obj *unstructured.Unstructured) *unstructured.Unstructured {
	_, out := RedactSecretPair(nil, obj)
	return out
}

func isSecret(obj *unstructured.Unstructured) bool {
	return obj != nil && obj.GetKind() == "Secret" && (obj.GetAPIVersion() == "v1" || obj.GetAPIVersion() == "")
}

func redactMaps(field string, live, desired *unstructured.Unstructured) {
	lm := stringMap(live, field)
	dm := stringMap(desired, field)
	for k, lv := range lm {
		dv, ok := dm[k]
		switch {
		case !ok:
			lm[k] = hiddenUnchanged
		case lv == dv:
			lm[k], dm[k] = hiddenUnchanged, hiddenUnchanged
		default:
			lm[k], dm[k] = hiddenOld, hiddenNew
		}
	}
	for k := range dm {
		if _, ok := lm[k]; !ok {
			dm[k] = hiddenUnchanged
		}
	}
	// Values that are not strings (malformed data) are hidden too.
	for _, m := range []map[string]any{lm, dm} {
		for k, v := range m {
			if _, ok := v.(string); !ok {
				m[k] = hiddenUnchanged
			}
		}
	}
}

// stringMap returns obj[field] as a map that is part of obj, or an empty map
// that is not.
func stringMap(obj *unstructured.Unstructured, field string) map[string]any {
	if obj == nil {
		return map[string]any{}
	}
	m, ok := obj.Object[field].(map[string]any)
	if !ok {
		if _, present := obj.Object[field]; present {
			obj.Object[field] = hiddenUnchanged
		}
		return map[string]any{}
	}
	return m
}

func redactAnnotation(key string, live, desired *unstructured.Unstructured) {
	var lv, dv string
	var lok, dok bool
	if live != nil {
		lv, lok = live.GetAnnotations()[key]
	}
	if desired != nil {
		dv, dok = desired.GetAnnotations()[key]
	}
	set := func(obj *unstructured.Unstructured, v string) {
		a := obj.GetAnnotations()
		a[key] = v
		obj.SetAnnotations(a)
	}
	switch {
	case lok && dok && lv == dv:
		set(live, hiddenUnchanged)
		set(desired, hiddenUnchanged)
	case lok && dok:
		set(live, hiddenOld)
		set(desired, hiddenNew)
	case lok:
		set(live, hiddenUnchanged)
	case dok:
		set(desired, hiddenUnchanged)
	}
}

// HideValuesPair hides, in an object of any kind, the strings that hides
// reports as holding a value never to be shown: a value from a Secret, or a
// writeOnly or generated one, that a chart put into a ConfigMap or an
// argument. Each such string of desired, and the string at the same path of
// live, is shown as a Secret's key is: "(hidden)" when the two are equal,
// else "(hidden: old value)" and "(hidden: new value)". So a diff still
// says that the field changes, and shows neither the new value nor the old
// one, which hides cannot know (the Secret held another value then). A
// string of live that holds a value where desired has none is hidden too.
// A string that looks like base64, wrapped in lines or not, and decodes to
// one that holds a value is hidden too (decodeBase64): a chart encodes with
// b64enc a whole text that holds a value (user:password, a configuration
// file) for a field that wants base64, such as a ConfigMap's binaryData or
// a policy's generated Secret, and anyone who reads the diff can decode it.
// Either side may be nil; with a nil hides both are returned as they are.
// The arguments are not modified.
func HideValuesPair(live, desired *unstructured.Unstructured, hides func(string) bool) (*unstructured.Unstructured, *unstructured.Unstructured) {
	if hides == nil {
		return live, desired
	}
	hides = orEncoded(hides)
	var l, d any
	if live != nil {
		live = live.DeepCopy()
		l = live.Object
	}
	if desired != nil {
		desired = desired.DeepCopy()
		d = desired.Object
	}
	hidePair(l, d, hides)
	return live, desired
}

// hidePair hides in place what HideValuesPair hides, in the maps and lists
// of l and d, matched by key and index. It returns the two values to store
// in their parents: a string is replaced, a map or list is changed in place.
func hidePair(l, d any, hides func(string) bool) (any, any) {
	switch dv := d.(type) {
	case map[string]any:
		lm, _ := l.(map[string]any)
		for k, v := range dv {
			lv, inLive := lm[k]
			nl, nd := hidePair(lv, v, hides)
			dv[k] = nd
			if inLive {
				lm[k] = nl
			}
		}
		for k, v := range lm {
			if _, ok := dv[k]; !ok {
				lm[k] = hideAlone(v, hides)
			}
		}
		if lm == nil {
			return hideAlone(l, hides), d
		}
		return l, d
	case []any:
		ll, _ := l.([]any)
		for i, v := range dv {
			var lv any
			if i < len(ll) {
				lv = ll[i]
			}
			nl, nd := hidePair(lv, v, hides)
			dv[i] = nd
			if i < len(ll) {
				ll[i] = nl
			}
		}
		for i := len(dv); i < len(ll); i++ {
			ll[i] = hideAlone(ll[i], hides)
		}
		if ll == nil {
			return hideAlone(l, hides), d
		}
		return l, d
	case string:
		if !hides(dv) {
			return hideAlone(l, hides), d
		}
		switch ls, ok := l.(string); {
		case l == nil:
			return nil, hiddenUnchanged
		case ok && ls == dv:
			return hiddenUnchanged, hiddenUnchanged
		default:
			return hiddenOld, hiddenNew
		}
	default:
		return hideAlone(l, hides), d
	}
}

// hideAlone hides, in v alone, every string that holds a value.
func hideAlone(v any, hides func(string) bool) any {
	switch t := v.(type) {
	case string:
		if hides(t) {
			return hiddenUnchanged
		}
	case map[string]any:
		for k, e := range t {
			t[k] = hideAlone(e, hides)
		}
	case []any:
		for i, e := range t {
			t[i] = hideAlone(e, hides)
		}
	}
	return v
}

// Bounds of the strings a diff decodes from base64 to look for a value
// in. Eight characters are six bytes: a shorter text holds little more
// than a value alone, whose base64 the mask knows already (mask.New). No
// string of an object is longer than the API server takes in a request
// (3 MiB), so the upper bound only stops what no object holds.
const (
	minEncoded = 8
	maxEncoded = 3 << 20
)

// orEncoded is hides, and true also for a string that decodes from base64
// to one that hides reports.
func orEncoded(hides func(string) bool) func(string) bool {
	return func(s string) bool {
		if hides(s) {
			return true
		}
		d, ok := decodeBase64(s)
		return ok && hides(d)
	}
}

// decodeBase64 decodes s when it looks like base64, standard or URL-safe,
// with padding or without, once its ASCII whitespace is removed, and is
// between minEncoded and maxEncoded long; ok is false otherwise. What it
// decodes to may be binary: a value within binary data is still the value.
//
// NOTE: base64 is often wrapped in lines (76 characters in MIME, 64 in
// PEM, what `base64` and openssl write), and a chart or a person pastes it
// so; a value whose encoding a line break cuts shows in no line whole.
func decodeBase64(s string) (decoded string, ok bool) {
	if len(s) > maxEncoded || len(s) < minEncoded {
		// NOTE: taking out white space only shortens it.
		return "", false
	}
	var std, url, space bool
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '=':
		case c == '+', c == '/':
			std = true
		case c == '-', c == '_':
			url = true
		case c == ' ', c == '\t', c == '\n', c == '\r', c == '\v', c == '\f':
			space = true
		default:
			return "", false
		}
	}
	if std && url {
		return "", false
	}
	if space {
		s = strings.Join(strings.Fields(s), "")
	}
	if len(s) < minEncoded {
		return "", false
	}
	enc := base64.StdEncoding
	if url {
		enc = base64.URLEncoding
	}
	if !strings.HasSuffix(s, "=") {
		enc = enc.WithPadding(base64.NoPadding)
	}
	b, err := enc.DecodeString(s)
	if err != nil {
		return "", false
	}
	return string(b), true
}
