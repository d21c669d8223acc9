package values

import (
	"maps"
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
	// Path, or "" when none is near enough (suggestionDistance).
	Closest string
}

// maxInputVisits bounds the schemas that UnknownInputs steps to for all
// the paths of one call together; the paths left when it is spent count as
// known. Each $ref is followed where it is used, so refs that branch wide
// several levels deep would otherwise cost work exponential in the size of
// a chart's schema, for a chart that whoever may add an Addon picks.
const maxInputVisits = 10 * maxSchemaVisits

// maxWriteOnlyNames bounds the writeOnly paths collected to suggest from;
// a schema that marks more suggests none.
const maxWriteOnlyNames = 1000

// maxSuggestedPath is the longest path, in bytes, that gets a suggestion,
// and maxSuggestions how many of the unknown paths of one call get one:
// each suggestion costs an edit distance to every writeOnly path.
const (
	maxSuggestedPath = 256
	maxSuggestions   = 10
)

// maxInputPath is the longest secret-input path, in bytes, that is
// looked for in the schema; a longer one counts as known. Each step of
// the walk hashes the path's key and runs the patternProperties over it,
// so the walk's bound on steps bounds its work only with the key's
// length bounded too; no chart names a key this long by mistake.
const maxInputPath = 1024

// maxNamePath is the longest writeOnly path worth collecting: a path that
// differs in length from every suggested one (at most maxSuggestedPath)
// by more than suggestionDistance can never be suggested, and a chart's
// long property names must not cost a copy at every path below them.
var maxNamePath = maxSuggestedPath + suggestionDistance(maxSuggestedPath)

// UnknownInputs returns the secret inputs of paths (targetPaths) that the
// schema does not know: no schema that validation applies along the path
// names the path's keys (properties, a matching patternProperties, an
// additionalProperties schema, items), and none is writeOnly on the way.
// A path the schema defines without writeOnly is known: a Secret may hold
// any value. So is a path below an open object (type object naming no
// keys), which takes any key. A global.* path is known to a subchart's
// schema too, as Helm gives each subchart the top-level global. A schema
// that cannot be followed to the end ($dynamicRef, past maxSchemaDepth or
// maxInputVisits) counts as knowing the path, so nothing is said in doubt,
// and so does a path longer than maxInputPath. A nil schema (a chart without one) knows every path.
func (s *Schema) UnknownInputs(paths []string) []UnknownInput {
	if s == nil {
		return nil
	}
	var out []UnknownInput
	var marked, lowered []string
	named := false
	w := &inputWalk{}
	for _, p := range slices.Sorted(slices.Values(paths)) {
		if len(p) > maxInputPath {
			continue
		}
		segs, index, err := PathIndexes(p)
		if err != nil {
			continue
		}
		known, closed := false, false
		for _, part := range s.parts {
			at := len(part.prefix)
			if at > len(segs) || !slices.Equal(part.prefix, segs[:at]) {
				if at == 0 || segs[0] != "global" || index[0] {
					continue
				}
				// Helm gives every subchart the top-level global as its
				// own global, so a subchart's schema applies there too.
				at = 0
			}
			k, c := w.knowsValue(part.compiled, segs[at:], index[at:], 0)
			known = known || k
			closed = closed || c
		}
		if known {
			continue
		}
		u := UnknownInput{Path: p, Closed: closed}
		if len(out) < maxSuggestions && len(p) <= maxSuggestedPath {
			if !named {
				marked, named = s.writeOnlyNames(), true
				lowered = make([]string, len(marked))
				for i, n := range marked {
					lowered[i] = strings.ToLower(n)
				}
			}
			u.Closest = closest(p, marked, lowered)
		}
		out = append(out, u)
	}
	return out
}

// inputWalk follows paths through compiled schemas, counting the schemas
// it steps to against maxInputVisits.
type inputWalk struct {
	visits int
}

// knowsValue tells, as knows does, whether sch, a schema that applies to a
// value, defines the path segs within the value. A value that an open
// object takes is known whatever its key.
func (w *inputWalk) knowsValue(sch *jsonschema.Schema, segs []string, index []bool, depth int) (known, closed bool) {
	if sch != nil && len(segs) > 0 && !index[0] && w.open(sch) {
		return true, false
	}
	return w.knows(sch, segs, index, depth)
}

// open tells whether the schemas that apply to the value sch applies to
// (sch, its $refs and combinators) take it as an object with any key: one
// of them has type object, and none names a key (properties,
// patternProperties, an additionalProperties schema or false,
// unevaluatedProperties false), as a free-form map (secretEnv: {type:
// object}) a chart ranges over does.
func (w *inputWalk) open(sch *jsonschema.Schema) bool {
	object, names := false, false
	seen := map[*jsonschema.Schema]bool{}
	stack := []*jsonschema.Schema{sch}
	for len(stack) > 0 && !names {
		o := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[o] {
			continue
		}
		if w.visits++; w.visits > maxInputVisits {
			return false
		}
		seen[o] = true
		if o.Types != nil && slices.Contains(o.Types.ToStrings(), "object") {
			object = true
		}
		ap, isBool := o.AdditionalProperties.(bool)
		names = len(o.Properties) > 0 || len(o.PatternProperties) > 0 ||
			o.AdditionalProperties != nil && (!isBool || !ap) ||
			o.UnevaluatedProperties != nil && o.UnevaluatedProperties.Bool != nil && !*o.UnevaluatedProperties.Bool
		stack = append(stack, sameValue(o)...)
	}
	return object && !names
}

// knows tells whether sch defines the path segs (index says which are a
// list's index), or is writeOnly on the way; closed, when it does not,
// whether an additionalProperties false on the way refuses it.
func (w *inputWalk) knows(sch *jsonschema.Schema, segs []string, index []bool, depth int) (known, closed bool) {
	if sch == nil {
		return false, false
	}
	if w.visits++; w.visits > maxInputVisits {
		return true, false
	}
	if depth > maxSchemaDepth || sch.DynamicRef != nil || sch.RecursiveRef != nil {
		return true, false
	}
	if sch.WriteOnly || len(segs) == 0 {
		return true, false
	}
	// The schemas that apply to the same value.
	for _, o := range sameValue(sch) {
		k, c := w.knows(o, segs, index, depth+1)
		if k {
			return true, false
		}
		closed = closed || c
	}
	key, rest, restIndex := segs[0], segs[1:], index[1:]
	var next []*jsonschema.Schema
	if index[0] {
		next = itemSchemas(sch)
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
		k, c := w.knowsValue(n, rest, restIndex, depth+1)
		if k {
			return true, false
		}
		closed = closed || c
	}
	return false, closed
}

// sameValue returns the schemas that apply to the value sch applies to.
func sameValue(sch *jsonschema.Schema) []*jsonschema.Schema {
	// NOTE: not If: a condition tests the value, it defines nothing of it
	// (a key it names, or an additionalProperties: false in it, only
	// chooses Then or Else).
	out := []*jsonschema.Schema{sch.Ref, sch.Then, sch.Else}
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

// itemSchemas are the schemas that apply to an item of a list: items in
// every draft's form, additionalItems and prefixItems.
func itemSchemas(sch *jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	switch items := sch.Items.(type) {
	case *jsonschema.Schema:
		out = append(out, items)
	case []*jsonschema.Schema:
		out = append(out, items...)
	}
	if s, ok := sch.AdditionalItems.(*jsonschema.Schema); ok {
		out = append(out, s)
	}
	out = append(out, sch.PrefixItems...)
	if sch.Items2020 != nil {
		out = append(out, sch.Items2020)
	}
	return out
}

// writeOnlyNames returns the targetPaths of the properties the schema
// marks writeOnly (auth.password, users[0].pin), those under a subchart's
// key too, and a subchart's global.* ones as the top-level global, where
// Helm gives them to it. It returns none when the walk steps to more than
// maxSchemaVisits schemas ($refs are followed where they are used) or the
// schema marks more than maxWriteOnlyNames paths: a suggestion is a
// courtesy, and never worth a worker.
func (s *Schema) writeOnlyNames() []string {
	var out []string
	visits := 0
	for _, part := range s.parts {
		prefix := ""
		if len(part.prefix) > 0 {
			prefix, _ = TargetPathIn(nil, part.prefix)
		}
		seen := map[*jsonschema.Schema]bool{}
		var walk func(sch *jsonschema.Schema, name string, global bool, depth int) bool
		walk = func(sch *jsonschema.Schema, name string, global bool, depth int) bool {
			if sch == nil || seen[sch] || depth > maxSchemaDepth || len(prefix)+len(name) > maxNamePath {
				return true
			}
			if visits++; visits > maxSchemaVisits {
				return false
			}
			seen[sch] = true
			defer delete(seen, sch)
			if sch.WriteOnly && name != "" {
				full := name
				if prefix != "" && !global {
					full = prefix + "." + name
				}
				out = append(out, full)
				return len(out) <= maxWriteOnlyNames
			}
			for _, o := range sameValue(sch) {
				if !walk(o, name, global, depth+1) {
					return false
				}
			}
			for _, k := range slices.Sorted(maps.Keys(sch.Properties)) {
				if len(prefix)+len(name)+len(k)+1 > maxNamePath {
					// NOTE: before the copy: a path too long to suggest
					// is not built at every visit below it.
					continue
				}
				key, _ := TargetPathIn(nil, []string{k})
				g := global
				if name == "" {
					g = k == "global"
				} else {
					key = name + "." + key
				}
				if !walk(sch.Properties[k], key, g, depth+1) {
					return false
				}
			}
			for _, it := range itemSchemas(sch) {
				if !walk(it, name+"[0]", global, depth+1) {
					return false
				}
			}
			return true
		}
		if !walk(part.compiled, "", false, 0) {
			return nil
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// suggestionDistance is the farthest, in edits, that a writeOnly path may
// be from a path of n bytes to be suggested for it: a third of it, and at
// least 2, so that a suggestion is a likely misspelling, not any path.
func suggestionDistance(n int) int {
	return max(2, n/3)
}

// closest returns the one of names nearest to p by edit distance, ignoring
// case (lowered holds names in lower case), the first in order among
// equals, or "" for none within suggestionDistance.
func closest(p string, names, lowered []string) string {
	lp := strings.ToLower(p)
	best, bestD := "", suggestionDistance(len(p))+1
	for i, n := range lowered {
		if d := editDistance(lp, n, bestD-1); d < bestD {
			best, bestD = names[i], d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes, or k+1
// when it is more than k: only the cells within k of the diagonal are
// worked out, and the work stops once a row has none within k.
func editDistance(a, b string, k int) int {
	over := k + 1
	if len(a)-len(b) > k || len(b)-len(a) > k {
		return over
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = min(j, over)
	}
	for i := 1; i <= len(a); i++ {
		lo, hi := max(1, i-k), min(len(b), i+k)
		rowMin := over
		if lo == 1 {
			cur[0] = min(i, over)
			rowMin = cur[0]
		} else {
			cur[lo-1] = over
		}
		for j := lo; j <= hi; j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost, over)
			rowMin = min(rowMin, cur[j])
		}
		if hi < len(b) {
			cur[hi+1] = over
		}
		if rowMin >= over {
			return over
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
