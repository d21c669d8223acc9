package values

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// Redacted replaces a secret value wherever values are shown.
const Redacted = "(redacted)"

// matches reports whether a schema path pattern matches concrete path
// segments exactly.
func matches(pat []patSeg, segs []string) bool {
	if len(pat) != len(segs) {
		return false
	}
	for i, p := range pat {
		if !p.any && p.name != segs[i] {
			return false
		}
	}
	return true
}

// findWriteOnly calls fn with the path of every non-null value of v that a
// writeOnly schema of some part may apply to, once each, without looking
// below one: a schema under additionalProperties, patternProperties or
// items is taken to apply to every key and index, and every conditional
// branch (anyOf, oneOf, then, else, dependentSchemas) to apply, so that
// what is hidden errs on the side of hiding. A subchart's schema applies
// to the top-level global too, which Helm gives it as its own.
func (s *Schema) findWriteOnly(v map[string]any, fn func(path []string)) {
	s.matchWriteOnly(v, nil, nil, false, fn)
}

// findSecretInputs calls fn with the path of every non-null value of v that
// a writeOnly schema applies to as validation applies it: additionalProperties
// to the keys that properties and patternProperties do not take, a pattern
// to the keys it matches, a tuple's schemas to their index, a conditional
// branch where it applies to the value (branchEdge.applies), so that a
// value is refused as a secret input only where the schema says it is one.
//
// eff, when not nil, is what validation sees (the effective values, of
// which v is one source): a conditional branch is also followed where it
// applies to eff's value at the same path, as a condition that the chart's
// defaults or another source meet makes the value a secret input for
// validation too. v alone decides which values are found. seen keeps what
// validation said of eff against each branch, for another call with the
// same eff to reuse; nil keeps it for this call only.
func (s *Schema) findSecretInputs(v, eff map[string]any, seen effVerdicts, fn func(path []string)) {
	if seen == nil {
		seen = effVerdicts{}
	}
	s.matchWriteOnly(v, eff, seen, true, fn)
}

// effVerdicts holds what validation said of the effective values at a path
// against a branch's schemas (effVerdictKey), so that each is asked of the
// validator once for the passes over spec.values and each ConfigMap that
// read the same effective values.
//
// NOTE: the effective values hold the chart's defaults, which may be large,
// and an anyOf or oneOf branch is decided by validating against it and then
// against each branch beside it: without this a combinator of K branches
// cost up to K² validations of the whole effective subtree per pass.
type effVerdicts map[effVerdictKey]verdict

type effVerdictKey struct {
	schema *jsonschema.Schema
	// at is the JSON pointer of the effective value; for a subchart's
	// values with the top-level global as its own, "+global" before it.
	at string
}

func (s *Schema) matchWriteOnly(v, eff map[string]any, seen effVerdicts, exact bool, fn func(path []string)) {
	var found [][]string
	parts := 0
	add := func(path []string) { found = append(found, path) }
	for _, p := range s.parts {
		if p.writeOnly == nil {
			continue
		}
		m := matcher{g: p.writeOnly, stamp: make([]int, len(p.writeOnly.nodes)), exact: exact, effSeen: seen}
		sub, ok := lookup(v, p.prefix)
		var effSub any
		if eff != nil {
			effSub, _ = lookup(eff, p.prefix)
		}
		if ok {
			set, wo := m.closure([]int{0}, sub, effSub, p.prefix, "")
			m.find(sub, effSub, slices.Clone(p.prefix), set, wo, add)
			parts++
		}
		// Helm gives every subchart the top-level global as its own
		// global, so a subchart's schema applies there too.
		if g := v["global"]; len(p.prefix) > 0 && g != nil {
			set, wo := m.closure([]int{0}, withGlobal(sub, g), withGlobal(effSub, eff["global"]), p.prefix, "+global")
			if wo {
				add([]string{"global"})
			} else {
				m.find(map[string]any{"global": g}, map[string]any{"global": eff["global"]}, nil, set, false, add)
			}
			parts++
		}
	}
	// Within one part no path is below another: the walk stops at a
	// writeOnly value.
	var drop []bool
	if parts > 1 {
		drop = belowOthers(found)
	}
	for i, f := range found {
		if drop == nil || !drop[i] {
			fn(f)
		}
	}
}

// withGlobal returns a subchart's values sub, as its schema reads them, with
// the top-level global g as its own global: nil when there are neither.
func withGlobal(sub, g any) any {
	own, isMap := sub.(map[string]any)
	if !isMap && g == nil {
		return nil
	}
	seen := map[string]any{}
	if isMap {
		seen = maps.Clone(own)
	}
	if g != nil {
		seen["global"] = g
	}
	return seen
}

// belowOthers marks the paths that are below another of paths or the same
// as one before them: a part's path below another's is hidden with it (a
// subchart's property under a parent's writeOnly key).
//
// NOTE: in the order of their segments a path comes right after the paths
// it is below, and after those below it too, so each path is compared with
// the last kept one only: O(n log n), where comparing each path with every
// other cost seconds on the 75000 list items a tenant's 1 MiB of values
// can hold, on every reconcile.
func belowOthers(paths [][]string) []bool {
	order := make([]int, len(paths))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return slices.Compare(paths[a], paths[b]) })
	drop := make([]bool, len(paths))
	var kept []string
	for n, i := range order {
		p := paths[i]
		if n > 0 && len(kept) <= len(p) && slices.Equal(kept, p[:len(kept)]) {
			drop[i] = true
			continue
		}
		kept = p
	}
	return drop
}

// matcher walks values along a schemaGraph: each value is met with the set
// of schemas that apply to it, closed over $refs and combinators, and each
// value within it with the schemas its key or index leads to. Each value is
// visited once, whatever the schema's refs and recursion.
type matcher struct {
	g     *schemaGraph
	stamp []int
	round int
	// exact follows an edge to a value within only where validation
	// applies it (graphNode.takes); otherwise every anyKey edge is taken.
	exact bool
	// effSeen keeps the verdicts on the effective values, exact.
	effSeen effVerdicts
}

// closure returns the schemas that apply to v, a value that the schemas
// seeds apply to, and whether one of them is writeOnly. Exact, it follows a
// conditional branch (anyOf, oneOf, then, else, dependentSchemas) only
// where it applies to v or to eff (branchEdge.applies), the value that
// validation sees at the same path, nil when there is none; otherwise
// every one. path is where eff is in the effective values, and tag what
// effVerdictKey puts before it.
func (m *matcher) closure(seeds []int, v, eff any, path []string, tag string) (set []int, writeOnly bool) {
	var onV, onEff func(*jsonschema.Schema) verdict
	m.round++
	stack := slices.Clone(seeds)
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if m.stamp[id] == m.round {
			continue
		}
		m.stamp[id] = m.round
		n := &m.g.nodes[id]
		set = append(set, id)
		writeOnly = writeOnly || n.writeOnly
		if !m.exact {
			stack = append(stack, n.same...)
			continue
		}
		stack = append(stack, n.always...)
		for i := range n.branches {
			b := &n.branches[i]
			if m.stamp[b.to] == m.round {
				continue
			}
			if onV == nil {
				onV, onEff = m.judges(v, eff, path, tag)
			}
			if b.applies(v, onV) || eff != nil && b.applies(eff, onEff) {
				stack = append(stack, b.to)
			}
		}
	}
	return set, writeOnly
}

// judges returns what validation says of v against a schema (onV) and of
// eff, the effective value at path (onEff, which m.effSeen keeps), asking the
// validator once for each schema: the branches of one anyOf or oneOf are
// each decided against all of them.
func (m *matcher) judges(v, eff any, path []string, tag string) (onV, onEff func(*jsonschema.Schema) verdict) {
	seen := map[*jsonschema.Schema]verdict{}
	onV = func(s *jsonschema.Schema) verdict {
		r, ok := seen[s]
		if !ok {
			r = judgeOnce(s, v)
			seen[s] = r
		}
		return r
	}
	at, named := "", false
	onEff = func(s *jsonschema.Schema) verdict {
		if !named {
			// NOTE: the root is the tag alone: pointer gives "/" for the
			// root and for the top-level empty key alike, and a verdict on
			// one must never stand for the other.
			at, named = tag, true
			if len(path) > 0 {
				at = tag + pointer(path)
			}
		}
		k := effVerdictKey{schema: s, at: at}
		r, ok := m.effSeen[k]
		if !ok {
			r = judgeOnce(s, eff)
			m.effSeen[k] = r
		}
		return r
	}
	return onV, onEff
}

// find calls fn with the path of each writeOnly value within v, which set
// applies to (writeOnly says whether one of set is writeOnly); eff is the
// value at the same path that validation sees, nil when there is none.
func (m *matcher) find(v, eff any, path []string, set []int, writeOnly bool, fn func(path []string)) {
	if v == nil || len(set) == 0 {
		return
	}
	if writeOnly {
		fn(path)
		return
	}
	child := func(key string, index bool, e any) {
		var seeds []int
		for _, id := range set {
			n := &m.g.nodes[id]
			seeds = append(seeds, n.named[key]...)
			if !m.exact {
				seeds = append(seeds, n.anyKey...)
				continue
			}
			for _, k := range n.keyed {
				if n.takes(k, key, index) {
					seeds = append(seeds, k.to)
				}
			}
		}
		if len(seeds) > 0 {
			var effE any
			if eff != nil {
				effE, _ = lookup(eff, []string{key})
			}
			at := append(path[:len(path):len(path)], key)
			cs, wo := m.closure(seeds, e, effE, at, "")
			m.find(e, effE, at, cs, wo, fn)
		}
	}
	switch t := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(t) {
			child(k, false, t[k])
		}
	case []any:
		for i, e := range t {
			child(strconv.Itoa(i), true, e)
		}
	}
}

// findPatterns calls fn with the path of every non-null value of v that a
// pattern matches, without looking below a match.
func findPatterns(v any, path []string, pats [][]patSeg, fn func(path []string)) {
	if v == nil || len(pats) == 0 {
		return
	}
	for _, p := range pats {
		if matches(p, path) {
			fn(path)
			return
		}
	}
	// Only descend where some pattern is longer and agrees so far.
	var deeper [][]patSeg
	for _, p := range pats {
		if len(p) > len(path) && matches(p[:len(path)], path) {
			deeper = append(deeper, p)
		}
	}
	if len(deeper) == 0 {
		return
	}
	switch t := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(t) {
			findPatterns(t[k], append(path[:len(path):len(path)], k), deeper, fn)
		}
	case []any:
		for i, e := range t {
			findPatterns(e, append(path[:len(path):len(path)], strconv.Itoa(i)), deeper, fn)
		}
	}
}

// checkWriteOnly reports every writeOnly value that spec.values or a
// ConfigMap supplies: secret inputs are accepted only from Secrets. eff
// holds the effective values that validation sees, nil when they are not
// known: a conditional branch that applies to them applies here too
// (findSecretInputs).
func (s *Schema) checkWriteOnly(src Sources, eff map[string]any) []capstanv1.ValuesError {
	if s == nil {
		return nil
	}
	var errs errorList
	seen := effVerdicts{}
	s.findSecretInputs(src.Spec, eff, seen, func(p []string) {
		errs.add(pointer(p), RuleWriteOnly,
			"%s is a secret input (writeOnly in the chart's schema): remove it from spec.values, put it in a Secret and name that Secret in spec.valuesFrom", secretInputPath(src.Spec, p).Name)
	})
	for _, l := range src.From {
		if l.FromSecret() || l.Missing {
			continue
		}
		tree := l.tree()
		s.findSecretInputs(tree, eff, seen, func(p []string) {
			errs.add(pointer(p), RuleWriteOnly,
				"%s is a secret input (writeOnly in the chart's schema) but %s is a ConfigMap: move it to a Secret", secretInputPath(tree, p).Name, l.Name())
		})
	}
	return errs
}

// A SecretInputPath is where a secret input is in a values tree.
type SecretInputPath struct {
	// Segments are the path's segments, as Lookup takes them.
	Segments []string
	// Name is the targetPath that names the path (servers[0].pin, a\.b,
	// ports.8080), which secretInputs and the CLI's --secret-input take
	// back as it is, when Named; otherwise its JSON pointer, with what to
	// do instead.
	Name string
	// Named is false for a path that no targetPath can name: one with an
	// empty key.
	Named bool
}

// secretInputPath names the path segs of a value of tree (TargetPathIn).
func secretInputPath(tree any, segs []string) SecretInputPath {
	name, ok := TargetPathIn(tree, segs)
	if !ok {
		name += " (a path with an empty key, which no targetPath can name: give it in a values Secret that spec.valuesFrom names without a targetPath)"
	}
	return SecretInputPath{Segments: segs, Name: name, Named: ok}
}

// WriteOnlyPaths sorts the RuleWriteOnly errors of errs, which Compose
// found in vals (spec.values to write), against before (the values stored
// already, nil for a new Addon): set holds the secret inputs that vals sets
// or changes, which a writer refuses; held those that before holds already,
// unchanged, which a writer lets through, as refusing them would make the
// Addon impossible to edit until they are moved. rest is errs without the
// held ones. Each path is named as a targetPath written from vals
// (servers[0].pin, a\.b, ports.8080), which secretInputs and the CLI's
// --secret-input take back as it is, and which lands where the value is.
// An error at a path vals does not hold is a ConfigMap's, which the
// writer composed over vals and does not write: it stays in rest.
//
// A path is named once, though spec.values and a ConfigMap layered over it
// both set it, and each then has its own error there.
func WriteOnlyPaths(errs []capstanv1.ValuesError, vals, before map[string]any) (set, held []SecretInputPath, rest []capstanv1.ValuesError) {
	named := map[string]bool{}
	for _, e := range errs {
		if e.Rule != RuleWriteOnly {
			rest = append(rest, e)
			continue
		}
		segs := splitPointer(e.Path)
		now, inVals := lookup(vals, segs)
		if !inVals {
			// A ConfigMap's, layered over vals: the writer does not write it.
			rest = append(rest, e)
			continue
		}
		first := !named[e.Path]
		named[e.Path] = true
		if was, had := lookup(before, segs); had && sameJSON(now, was) {
			if first {
				held = append(held, secretInputPath(vals, segs))
			}
			continue
		}
		if first {
			set = append(set, secretInputPath(vals, segs))
		}
		rest = append(rest, e)
	}
	return set, held, rest
}

// sameJSON reports whether a and b encode as the same JSON.
func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// secretPaths lists the paths of effective values that must never be shown:
// the schema's writeOnly and generated properties, the generated values, and
// every value a Secret supplied.
func secretPaths(schema *Schema, in Inputs, effective map[string]any) []string {
	paths, _ := secretPathsFrom(schema, in, effective)
	return paths
}

// secretSource is where the values at a secret path come from, for a
// person to change: a writeOnly or generated path of the schema (at that
// path), the generated values, or a values Secret (at its valuesFrom
// entry).
type secretSource struct {
	// path is where a ValuesError about them goes; name says it in a
	// message.
	path, name string
}

// secretPathsFrom is secretPaths, with the source of each path: the first
// that names it, the schema before the generated values before the
// valuesFrom entries in order.
func secretPathsFrom(schema *Schema, in Inputs, effective map[string]any) ([]string, map[string]secretSource) {
	set := map[string]secretSource{}
	add := func(p string, src secretSource) {
		if _, ok := set[p]; !ok {
			set[p] = src
		}
	}
	addTree := func(m map[string]any, src secretSource) {
		leaves(m, nil, func(p []string, _ any) {
			if len(p) > 0 {
				add(pointer(p), src)
			}
		})
	}
	atPath := func(p []string) { add(pointer(p), secretSource{path: pointer(p), name: pointer(p)}) }
	if schema != nil {
		schema.findWriteOnly(effective, atPath)
		var pats [][]patSeg
		for _, g := range schema.Generated() {
			pat := make([]patSeg, len(g.Path))
			for i, s := range g.Path {
				pat[i] = patSeg{name: s}
			}
			pats = append(pats, pat)
		}
		findPatterns(effective, nil, pats, atPath)
	}
	addTree(in.Generated, secretSource{path: "spec.values", name: "the generated values"})
	for _, l := range in.Sources.From {
		switch {
		case !l.FromSecret() || l.Missing:
		case l.path != nil:
			// Only the one value the targetPath set: the list elements
			// and keys around it came from other sources.
			add(pointer(l.path.strings()), secretSource{path: l.field(), name: l.Name()})
		default:
			addTree(l.tree(), secretSource{path: l.field(), name: l.Name()})
		}
	}
	// Keep only paths that exist in the effective values, and drop those
	// below another: masking the parent masks them.
	var out []string
	for p := range set {
		if _, ok := lookup(effective, splitPointer(p)); ok {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	kept := out[:0]
	for _, p := range out {
		if len(kept) > 0 && strings.HasPrefix(p, kept[len(kept)-1]+"/") {
			continue
		}
		kept = append(kept, p)
	}
	return kept, set
}

// Redact returns a deep copy of values with the value at each JSON path
// replaced by Redacted. Paths that do not exist are ignored. Use it for
// anything that shows values: the plan, status, events and logs.
func Redact(values map[string]any, paths []string) map[string]any {
	out := copyMap(values)
	for _, p := range paths {
		segs := splitPointer(p)
		if len(segs) == 0 {
			return map[string]any{}
		}
		parent, ok := lookup(out, segs[:len(segs)-1])
		if !ok {
			continue
		}
		last := segs[len(segs)-1]
		switch t := parent.(type) {
		case map[string]any:
			if _, ok := t[last]; ok {
				t[last] = Redacted
			}
		case []any:
			if i, err := strconv.Atoi(last); err == nil && i >= 0 && i < len(t) {
				t[i] = Redacted
			}
		}
	}
	return out
}

// SecretPaths returns the JSON paths of values whose content the schema
// marks secret (writeOnly or x-capstan-generate). Compose's
// Result.SecretPaths adds what came from Secrets; use this one when only a
// schema and values are at hand, such as in a form that shows values back.
func (s *Schema) SecretPaths(values map[string]any) []string {
	if s == nil {
		return nil
	}
	return secretPaths(s, Inputs{}, values)
}
