package values

import (
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// An UnknownInput is a secret input at a path that the chart's schema
// neither marks writeOnly nor defines: a misspelt name, most often, whose
// value the chart never reads, so that it renders its default instead.
type UnknownInput struct {
	// Path is the input's targetPath, as given.
	Path string
	// Closed is true when the schema refuses the path (additionalProperties
	// false), so that the controller Blocks the Addon for it.
	Closed bool
	// Closest is the path the schema marks writeOnly that is nearest to
	// Path, or "" when it marks none.
	Closest string
}

// UnknownInputs returns the secret inputs of paths (targetPaths) that the
// schema does not know: no schema that validation applies along the path
// names the path's keys (properties, a matching patternProperties, an
// additionalProperties schema, items), and none is writeOnly on the way.
// A path the schema defines without writeOnly is known: a Secret may hold
// any value. A schema that cannot be followed to the end ($dynamicRef, past
// maxSchemaDepth) counts as knowing the path, so nothing is said in doubt.
// A nil schema (a chart without one) knows every path.
func (s *Schema) UnknownInputs(paths []string) []UnknownInput {
	if s == nil {
		return nil
	}
	var out []UnknownInput
	var marked []string
	for _, p := range slices.Sorted(slices.Values(paths)) {
		segs, index, err := PathIndexes(p)
		if err != nil {
			continue
		}
		known, closed := false, false
		for _, part := range s.parts {
			if len(part.prefix) > len(segs) || !slices.Equal(part.prefix, segs[:len(part.prefix)]) {
				continue
			}
			k, c := knows(part.compiled, segs[len(part.prefix):], index[len(part.prefix):], 0)
			known = known || k
			closed = closed || c
		}
		if known {
			continue
		}
		if marked == nil {
			marked = s.writeOnlyNames()
		}
		out = append(out, UnknownInput{Path: p, Closed: closed, Closest: closest(p, marked)})
	}
	return out
}

// knows tells whether sch defines the path segs (index says which are a
// list's index), or is writeOnly on the way; closed, when it does not,
// whether an additionalProperties false on the way refuses it.
func knows(sch *jsonschema.Schema, segs []string, index []bool, depth int) (known, closed bool) {
	if sch == nil {
		return false, false
	}
	if depth > maxSchemaDepth || sch.DynamicRef != nil || sch.RecursiveRef != nil {
		return true, false
	}
	if sch.WriteOnly || len(segs) == 0 {
		return true, false
	}
	// The schemas that apply to the same value.
	for _, o := range sameValue(sch) {
		k, c := knows(o, segs, index, depth+1)
		if k {
			return true, false
		}
		closed = closed || c
	}
	key, rest, restIndex := segs[0], segs[1:], index[1:]
	var next []*jsonschema.Schema
	if index[0] {
		switch items := sch.Items.(type) {
		case *jsonschema.Schema:
			next = append(next, items)
		case []*jsonschema.Schema:
			next = append(next, items...)
		}
		if s, ok := sch.AdditionalItems.(*jsonschema.Schema); ok {
			next = append(next, s)
		}
		next = append(next, sch.PrefixItems...)
		if sch.Items2020 != nil {
			next = append(next, sch.Items2020)
		}
	} else {
		if p, ok := sch.Properties[key]; ok {
			next = append(next, p)
		}
		for re, p := range sch.PatternProperties {
			if re.MatchString(key) {
				next = append(next, p)
			}
		}
		switch ap := sch.AdditionalProperties.(type) {
		case *jsonschema.Schema:
			if len(next) == 0 {
				next = append(next, ap)
			}
		case bool:
			if !ap && len(next) == 0 {
				closed = true
			}
		}
	}
	for _, n := range next {
		if n.Bool != nil && *n.Bool && len(rest) > 0 {
			// NOTE: true takes anything and defines nothing within.
			continue
		}
		k, c := knows(n, rest, restIndex, depth+1)
		if k {
			return true, false
		}
		closed = closed || c
	}
	return false, closed
}

// sameValue returns the schemas that apply to the value sch applies to.
func sameValue(sch *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{sch.Ref, sch.If, sch.Then, sch.Else}
	out = append(out, sch.AllOf...)
	out = append(out, sch.AnyOf...)
	out = append(out, sch.OneOf...)
	for _, d := range sch.DependentSchemas {
		out = append(out, d)
	}
	for _, d := range sch.Dependencies {
		if ds, ok := d.(*jsonschema.Schema); ok {
			out = append(out, ds)
		}
	}
	return slices.DeleteFunc(out, func(s *jsonschema.Schema) bool { return s == nil })
}

// writeOnlyNames returns the targetPaths of the properties the schema
// marks writeOnly (auth.password, users[0].pin), those under a subchart's
// key too.
func (s *Schema) writeOnlyNames() []string {
	var out []string
	for _, part := range s.parts {
		seen := map[*jsonschema.Schema]bool{}
		var walk func(sch *jsonschema.Schema, name string, depth int)
		walk = func(sch *jsonschema.Schema, name string, depth int) {
			if sch == nil || seen[sch] || depth > maxSchemaDepth {
				return
			}
			seen[sch] = true
			defer delete(seen, sch)
			if sch.WriteOnly && name != "" {
				out = append(out, name)
				return
			}
			for _, o := range sameValue(sch) {
				walk(o, name, depth+1)
			}
			for k, p := range sch.Properties {
				key, _ := TargetPathIn(nil, []string{k})
				if name != "" {
					key = name + "." + key
				}
				walk(p, key, depth+1)
			}
			var items []*jsonschema.Schema
			switch it := sch.Items.(type) {
			case *jsonschema.Schema:
				items = append(items, it)
			case []*jsonschema.Schema:
				items = append(items, it...)
			}
			items = append(items, sch.PrefixItems...)
			items = append(items, sch.Items2020)
			for _, it := range items {
				walk(it, name+"[0]", depth+1)
			}
		}
		prefix := ""
		if len(part.prefix) > 0 {
			prefix, _ = TargetPathIn(nil, part.prefix)
		}
		walk(part.compiled, prefix, 0)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// closest returns the one of names nearest to p by edit distance, the
// first in order among equals, or "" for no names.
func closest(p string, names []string) string {
	best, bestD := "", -1
	for _, n := range names {
		d := editDistance(strings.ToLower(p), strings.ToLower(n))
		if bestD < 0 || d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
