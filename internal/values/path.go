package values

import (
	"fmt"
	"strconv"
	"strings"
)

// The limits of a targetPath.
const (
	// MaxPathIndex is the largest list index a targetPath may name. A larger
	// one would make the setter allocate a long list of nulls.
	MaxPathIndex = 4096
	// MaxPathSegments is the deepest a targetPath may reach.
	MaxPathSegments = 64
)

// segment is one step of a targetPath: a map key or a list index.
type segment struct {
	key     string
	index   int
	isIndex bool
}

// targetPath is a parsed valuesFrom targetPath.
type targetPath []segment

// parseTargetPath parses Helm's --set path syntax: keys separated by dots,
// "[n]" list indexes after a key or another index, and a backslash that
// makes the next character part of the key ("a\.b" is the one key "a.b").
// Unlike Helm's own parser, an empty key or an unclosed bracket is an error
// rather than being dropped silently, and the path must start with a key
// because values are a map.
func parseTargetPath(s string) (targetPath, error) {
	if s == "" {
		return nil, fmt.Errorf("targetPath is empty")
	}
	var (
		out     targetPath
		key     strings.Builder
		haveKey bool // key holds at least one character, or an escape
		// afterIndex is true right after "]": only ".", "[" or the end may follow.
		afterIndex bool
	)
	endKey := func(pos int) error {
		if !haveKey {
			return fmt.Errorf("targetPath %q has an empty segment at offset %d", s, pos)
		}
		out = append(out, segment{key: key.String()})
		key.Reset()
		haveKey = false
		return nil
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if afterIndex && c != '.' && c != '[' {
			return nil, fmt.Errorf("targetPath %q: expected '.' or '[' after ']' at offset %d", s, i)
		}
		switch c {
		case '\\':
			if i+1 >= len(s) {
				return nil, fmt.Errorf("targetPath %q ends with a lone backslash", s)
			}
			i++
			key.WriteByte(s[i])
			haveKey = true
		case '.':
			if afterIndex {
				afterIndex = false
				if i+1 >= len(s) {
					return nil, fmt.Errorf("targetPath %q has an empty segment at its end", s)
				}
				continue
			}
			if err := endKey(i); err != nil {
				return nil, err
			}
			if i+1 >= len(s) {
				return nil, fmt.Errorf("targetPath %q has an empty segment at its end", s)
			}
		case '[':
			if !afterIndex {
				if len(out) == 0 && !haveKey {
					return nil, fmt.Errorf("targetPath %q starts with a list index; values are a map, so it must start with a key", s)
				}
				if err := endKey(i); err != nil {
					return nil, err
				}
			}
			end := strings.IndexByte(s[i+1:], ']')
			if end < 0 {
				return nil, fmt.Errorf("targetPath %q has an unclosed '[' at offset %d", s, i)
			}
			digits := s[i+1 : i+1+end]
			n, err := parseIndex(digits)
			if err != nil {
				return nil, fmt.Errorf("targetPath %q: list index at offset %d %v", s, i, err)
			}
			out = append(out, segment{index: n, isIndex: true})
			i += end + 1
			afterIndex = true
		case ']':
			return nil, fmt.Errorf("targetPath %q has a ']' without '[' at offset %d; write \\] for a key that holds one", s, i)
		default:
			key.WriteByte(c)
			haveKey = true
		}
		if len(out) > MaxPathSegments {
			return nil, fmt.Errorf("targetPath %q is deeper than %d segments", s, MaxPathSegments)
		}
	}
	if !afterIndex {
		if err := endKey(len(s)); err != nil {
			return nil, err
		}
	}
	if len(out) > MaxPathSegments {
		return nil, fmt.Errorf("targetPath %q is deeper than %d segments", s, MaxPathSegments)
	}
	return out, nil
}

// PathSegments parses a targetPath (auth.password, users[0].password,
// a\.b) into the segments Lookup takes: a map's key, or a list's index in
// decimal.
func PathSegments(path string) ([]string, error) {
	tp, err := parseTargetPath(path)
	if err != nil {
		return nil, err
	}
	return tp.strings(), nil
}

// PathIndexes is PathSegments with, for each segment, whether the path
// writes it as a list's index ([n]) rather than a map's key: set as a
// targetPath, a key replaces a list in its way with a map.
func PathIndexes(path string) (segs []string, index []bool, err error) {
	tp, err := parseTargetPath(path)
	if err != nil {
		return nil, nil, err
	}
	index = make([]bool, len(tp))
	for i, s := range tp {
		index[i] = s.isIndex
	}
	return tp.strings(), index, nil
}

// parseIndex parses the digits of a list index.
func parseIndex(digits string) (int, error) {
	if digits == "" {
		return 0, fmt.Errorf("is empty")
	}
	for _, r := range digits {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("is not a non-negative whole number")
		}
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n > MaxPathIndex {
		return 0, fmt.Errorf("is larger than %d", MaxPathIndex)
	}
	return n, nil
}

// set puts value at the path in values, creating the maps and lists on the
// way. A later source wins, as in a merge: a scalar in the way is replaced
// by the map or list the path needs, and a list is extended with nulls up to
// the index. Lists are copied before they change, so a list shared with
// another source is never modified.
func (p targetPath) set(values map[string]any, value any) {
	if len(p) == 0 {
		return
	}
	first := p[0]
	values[first.key] = setIn(values[first.key], p[1:], value)
}

func setIn(container any, p targetPath, value any) any {
	if len(p) == 0 {
		return value
	}
	s := p[0]
	if s.isIndex {
		old, _ := container.([]any)
		n := max(len(old), s.index+1)
		list := make([]any, n)
		copy(list, old)
		list[s.index] = setIn(list[s.index], p[1:], value)
		return list
	}
	m, ok := container.(map[string]any)
	if !ok {
		m = map[string]any{}
	}
	m[s.key] = setIn(m[s.key], p[1:], value)
	return m
}

// strings returns the path as the segments of a JSON pointer.
func (p targetPath) strings() []string {
	out := make([]string, len(p))
	for i, s := range p {
		if s.isIndex {
			out[i] = strconv.Itoa(s.index)
		} else {
			out[i] = s.key
		}
	}
	return out
}
