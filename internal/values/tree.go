package values

import (
	"sort"
	"strconv"
	"strings"
)

// This file holds small helpers over values trees: the maps, lists and
// scalars that YAML and JSON decode into.

// deepCopy copies the maps and lists of a values tree; scalars are shared.
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = deepCopy(e)
		}
		return out
	default:
		return v
	}
}

// copyMap deep-copies a values map; nil becomes an empty map.
func copyMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return deepCopy(m).(map[string]any)
}

// pointer encodes path segments as a JSON pointer, such as /persistence/size.
// The root is "/".
func pointer(segs []string) string {
	if len(segs) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, s := range segs {
		b.WriteByte('/')
		s = strings.ReplaceAll(s, "~", "~0")
		b.WriteString(strings.ReplaceAll(s, "/", "~1"))
	}
	return b.String()
}

// splitPointer decodes a JSON pointer made by pointer.
func splitPointer(p string) []string {
	if p == "" || p == "/" {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, s := range parts {
		s = strings.ReplaceAll(s, "~1", "/")
		parts[i] = strings.ReplaceAll(s, "~0", "~")
	}
	return parts
}

// dotted writes path segments the way a person reads them: auth.password,
// image.pullSecrets[0], or a\.b for a key that holds a dot. Without the
// values tree it cannot tell a list's index from a map's key made of
// digits, and writes a segment of digits after the first as an index: it
// names a path in a message. A path a person sends back, as a secret
// input, is written by TargetPathIn.
func dotted(segs []string) string {
	var b strings.Builder
	for i, s := range segs {
		if i > 0 && s != "" && strings.Trim(s, "0123456789") == "" {
			if _, err := strconv.Atoi(s); err == nil {
				b.WriteString("[" + s + "]")
				continue
			}
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(targetPathEscaper.Replace(s))
	}
	return b.String()
}

// TargetPathIn writes the path segments of a value of tree as a targetPath
// that reads back as the same segments and, set as a valuesFrom entry's
// targetPath, lands where the value is: a segment is a list index, [n],
// only where its container in tree is a list, and a key otherwise, digits
// and leading zeros included (ports.8080, users.10001.password, pins.007).
// ok is false for a path that no targetPath can name, one with an empty
// key; its name is then the path's JSON pointer (/a/), which a message
// says is given in a values Secret without a targetPath.
func TargetPathIn(tree any, segs []string) (name string, ok bool) {
	for _, s := range segs {
		if s == "" {
			return pointer(segs), false
		}
	}
	var b strings.Builder
	v := tree
	for i, s := range segs {
		list, isList := v.([]any)
		switch {
		case isList && i > 0:
			b.WriteString("[" + s + "]")
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 || n >= len(list) {
				v = nil
			} else {
				v = list[n]
			}
			continue
		case i > 0:
			b.WriteByte('.')
		}
		b.WriteString(targetPathEscaper.Replace(s))
		if m, isMap := v.(map[string]any); isMap {
			v = m[s]
		} else {
			v = nil
		}
	}
	return b.String(), true
}

// targetPathEscaper escapes the characters a targetPath's key cannot hold
// bare.
var targetPathEscaper = strings.NewReplacer(`\`, `\\`, ".", `\.`, "[", `\[`, "]", `\]`)

// PointerSegments returns the segments of a JSON pointer as Compose's
// errors place a value (/servers/0/pin), as Lookup takes them.
func PointerSegments(p string) []string { return splitPointer(p) }

// Lookup returns the value at path segments of a values tree (a key of a
// map, an index of a list) and whether it exists.
func Lookup(v any, segs []string) (any, bool) { return lookup(v, segs) }

// lookup returns the value at path segments and whether it exists.
func lookup(v any, segs []string) (any, bool) {
	for _, s := range segs {
		switch t := v.(type) {
		case map[string]any:
			e, ok := t[s]
			if !ok {
				return nil, false
			}
			v = e
		case []any:
			i, err := strconv.Atoi(s)
			if err != nil || i < 0 || i >= len(t) {
				return nil, false
			}
			v = t[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// leaves calls fn with the path of every scalar, null, empty map and empty
// list of a values tree.
func leaves(v any, path []string, fn func(path []string, v any)) {
	switch t := v.(type) {
	case map[string]any:
		if len(t) == 0 {
			fn(path, v)
			return
		}
		for _, k := range sortedKeys(t) {
			leaves(t[k], append(path[:len(path):len(path)], k), fn)
		}
	case []any:
		if len(t) == 0 {
			fn(path, v)
			return
		}
		for i, e := range t {
			leaves(e, append(path[:len(path):len(path)], strconv.Itoa(i)), fn)
		}
	default:
		fn(path, v)
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
