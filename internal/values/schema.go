package values

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	chart "helm.sh/helm/v4/pkg/chart"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// GenerateKeyword marks a property whose value the controller generates once
// and keeps in the add-on's generated Secret.
const GenerateKeyword = "x-capstan-generate"

// schemaURL is where a chart's values.schema.json is placed for the compiler;
// a relative $ref resolves against it to another file of the same chart.
const schemaURL = "file:///values.schema.json"

// maxSchemaDepth bounds how deep the walk for writeOnly and generated
// properties follows nested and recursive schemas.
const maxSchemaDepth = 32

// maxSchemaVisits bounds the schemas the walk for x-capstan-generate
// properties steps to on its way to them, those past maxSchemaDepth
// included. Each $ref is expanded where it is used, so refs that branch
// wide several levels deep would otherwise cost work exponential in the
// size of a chart's schema, on every reconcile.
const maxSchemaVisits = 10000

// maxSchemaObjects bounds the schemas that the compiler is given for a
// chart and its subcharts together: the JSON objects and true/false values
// of their values.schema.json files and of the chart files their $refs
// load, each a schema or an upper bound on one. The compiler looks every
// new subschema up in a list of those found so far, so its time grows with
// the square of their number, and the 8 MiB a values.schema.json may hold
// could give it 280,000: a worker held for many minutes on every
// reconcile. The bound stays well above real charts, whose schemas grow
// with their options (cilium's 165 KB holds a few thousand, cert-manager's
// 789), because refusing a real chart is worse than a few seconds of a
// worker for a chart made to be slow.
const maxSchemaObjects = 20000

// Schema is a chart's values.schema.json and those of its subcharts, each
// applying to the values under the subchart's key, as Helm validates them.
type Schema struct {
	parts []*schemaPart
}

// schemaPart is the schema of one chart.
type schemaPart struct {
	chart    string
	prefix   []string
	compiled *jsonschema.Schema
	// writeOnly is the schema's graph, kept to match values against: nil
	// when the schema has no writeOnly property.
	writeOnly *schemaGraph
	generate  []Generate
}

// schemaGraph is a schema as the values are matched against it for
// writeOnly: each schema the root reaches, once, with the schemas that
// apply to the same value (its $ref and combinators) and to the values
// within it. Only the schemas from which a writeOnly one can be reached
// keep their edges.
type schemaGraph struct {
	nodes []graphNode
}

type graphNode struct {
	writeOnly bool
	same      []int // $ref, allOf, anyOf, oneOf, then, else, dependentSchemas
	always    []int // those of same that always apply: $ref, allOf
	// branches are those of same that apply only when a condition on the
	// value holds (anyOf, oneOf, then, else, dependentSchemas), each with
	// that condition.
	branches []branchEdge
	named    map[string][]int // properties, by name
	anyKey   []int            // patternProperties, additionalProperties, items and the like
	// keyed are the anyKey edges, each with the keys or indexes that
	// validation applies it to; scope holds what those rules read.
	keyed []keyedEdge
	scope *keyScope
}

// keyedEdge leads to a schema that applies to the values within a value
// whose keys or indexes its rule takes.
type keyedEdge struct {
	to   int
	rule keyRule
	re   *regexp.Regexp // rulePattern's, nil when it does not compile
}

// branchEdge leads to a schema that applies to a value only when a
// condition on the value holds, as validation decides it (applies).
type branchEdge struct {
	to   int
	kind branchKind
	key  string // branchDependent's property
	// at is where the branch is (doc#pointer); conds where the schemas
	// its condition reads are: every branch of its anyOf or oneOf, the if
	// of a then or else.
	at    string
	conds []string
	// schema and cond are them compiled (keepWriteOnly); nil where one
	// could not be, which takes the branch to apply.
	schema *jsonschema.Schema
	cond   []*jsonschema.Schema
}

type branchKind int

const (
	branchValid     branchKind = iota // anyOf, oneOf: when the value validates against it
	branchThen                        // when the value validates against the if beside it
	branchElse                        // when it does not
	branchDependent                   // dependentSchemas, dependencies: when the value is an object with key
)

// applies reports whether the branch e applies to v as validation applies
// it; judge says what validation says of v against one schema (judgeOnce
// asks the validator). Where that cannot be told (a schema that did not
// compile, a value the validator cannot read) it applies: the check errs on
// the side of taking a value as a secret input. An anyOf or oneOf branch
// that v does not validate against applies when v validates against none of
// the branches beside it either: v breaks the schema, and is a secret input
// wherever a branch could make it one.
func (e *branchEdge) applies(v any, judge func(*jsonschema.Schema) verdict) bool {
	switch e.kind {
	case branchDependent:
		obj, isMap := v.(map[string]any)
		if !isMap {
			return false
		}
		_, has := obj[e.key]
		return has
	case branchThen, branchElse:
		if len(e.cond) == 0 || e.cond[0] == nil {
			return true
		}
		switch judge(e.cond[0]) {
		case verdictValid:
			return e.kind == branchThen
		case verdictInvalid:
			return e.kind == branchElse
		}
		return true
	}
	if e.schema == nil || judge(e.schema) != verdictInvalid {
		return true
	}
	for _, c := range e.cond {
		if c == nil {
			continue
		}
		switch judge(c) {
		case verdictValid:
			return false
		case verdictUnreadable:
			return true
		}
	}
	return true
}

// verdict is what validation says of a value against one schema.
type verdict uint8

const (
	verdictInvalid    verdict = iota + 1
	verdictValid              // it validates
	verdictUnreadable         // the validator could not read the value
)

// judgeOnce validates v against s.
func judgeOnce(s *jsonschema.Schema, v any) (r verdict) {
	defer func() {
		if recover() != nil {
			r = verdictUnreadable
		}
	}()
	if s.Validate(v) == nil {
		return verdictValid
	}
	return verdictInvalid
}

// keyRule says which keys or indexes of a value a subschema applies to,
// as validation decides it.
type keyRule struct {
	kind    ruleKind
	pattern string // rulePattern's
	index   int    // ruleIndex's one index; ruleFrom's first
}

type ruleKind int

const (
	ruleAny         ruleKind = iota // every item (contains)
	rulePattern                     // the keys the pattern matches (patternProperties)
	ruleAdditional                  // the keys that properties and patternProperties do not take
	ruleUnevaluated                 // the keys that no schema applied to the value takes
	ruleIndex                       // one index (a tuple's items, prefixItems)
	ruleFrom                        // an index and those after it (items after a tuple, additionalItems)
	ruleNone                        // nothing (additionalItems without a tuple, unevaluatedItems beside items)
)

// keyScope is what a schema's additionalProperties and
// unevaluatedProperties leave to them: the names and patterns of its own
// properties and, for unevaluatedProperties, also those of the schemas
// applied in place beside it (its $refs and combinators), and whether one of
// them takes every other key itself.
type keyScope struct {
	own, evaluated                 map[string]bool
	ownPatterns, evaluatedPatterns []*regexp.Regexp
	additional                     bool
}

// takes reports whether rule's subschema applies to the key or index key
// of a value (index says which).
func (n *graphNode) takes(e keyedEdge, key string, index bool) bool {
	switch e.rule.kind {
	case ruleAny:
		return true
	case rulePattern:
		return !index && (e.re == nil || e.re.MatchString(key))
	case ruleAdditional:
		return !index && !n.scope.declares(key, n.scope.own, n.scope.ownPatterns)
	case ruleUnevaluated:
		return !index && !n.scope.additional && !n.scope.declares(key, n.scope.evaluated, n.scope.evaluatedPatterns)
	case ruleIndex, ruleFrom:
		if !index {
			return false
		}
		i, err := strconv.Atoi(key)
		return err == nil && (i == e.rule.index || e.rule.kind == ruleFrom && i >= e.rule.index)
	}
	return false
}

// declares reports whether names or patterns take key.
func (*keyScope) declares(key string, names map[string]bool, patterns []*regexp.Regexp) bool {
	if names[key] {
		return true
	}
	for _, re := range patterns {
		if re.MatchString(key) {
			return true
		}
	}
	return false
}

// patSeg is one step of a schema path: a property name, or any key or index
// (under additionalProperties, patternProperties or items).
type patSeg struct {
	name string
	any  bool
}

// Generate is one property marked x-capstan-generate.
type Generate struct {
	// Path is where the value goes, from the root of the values.
	Path []string
	// Length is how many characters are generated.
	Length int
	// Alphabet names the characters drawn from; see Alphabets.
	Alphabet string
}

// SchemaForChart compiles the values.schema.json of a chart and of every
// subchart it holds, each under the subchart's name. It returns nil when
// none of them has a schema. A schema that is not JSON, not a valid JSON
// Schema, that refers to anything outside the chart, or that misuses
// x-capstan-generate is an error.
//
// It takes the chart as it is: give it one whose dependencies are resolved
// for the values (SchemaFor and Compose do), since a chart as loaded still
// holds its disabled subcharts, and its aliased ones under their own names.
func SchemaForChart(ch chart.Charter) (*Schema, error) {
	s := &Schema{}
	if err := s.addChart(ch, nil, &schemaBudget{root: chartNameOf(ch)}); err != nil {
		return nil, err
	}
	if len(s.parts) == 0 {
		return nil, nil
	}
	return s, nil
}

// ParseSchema compiles one values.schema.json. files are the other files of
// the chart, by their path in it, that a relative $ref may name.
func ParseSchema(chartName string, doc []byte, files map[string][]byte) (*Schema, error) {
	p, err := compilePart(chartName, nil, doc, files, &schemaBudget{root: chartName})
	if err != nil {
		return nil, err
	}
	return &Schema{parts: []*schemaPart{p}}, nil
}

// chartNameOf returns the name of ch, or "" when it cannot be read.
func chartNameOf(ch chart.Charter) string {
	acc, err := chart.NewAccessor(ch)
	if err != nil {
		return ""
	}
	return acc.Name()
}

func (s *Schema) addChart(ch chart.Charter, prefix []string, budget *schemaBudget) error {
	acc, err := chart.NewAccessor(ch)
	if err != nil {
		return fmt.Errorf("read the chart: %w", err)
	}
	if doc := acc.Schema(); len(doc) > 0 {
		files := map[string][]byte{}
		for _, f := range acc.Files() {
			files[f.Name] = f.Data
		}
		p, err := compilePart(acc.Name(), prefix, doc, files, budget)
		if err != nil {
			return err
		}
		s.parts = append(s.parts, p)
	}
	for _, dep := range acc.Dependencies() {
		sub, err := chart.NewAccessor(dep)
		if err != nil {
			return fmt.Errorf("read a subchart of %s: %w", acc.Name(), err)
		}
		if err := s.addChart(dep, append(prefix[:len(prefix):len(prefix)], sub.Name()), budget); err != nil {
			return err
		}
	}
	return nil
}

// schemaBudget counts the schemas given to the compiler for one chart and
// its subcharts against maxSchemaObjects.
type schemaBudget struct {
	root string // the chart whose schemas are compiled
	used int
	// over is the error of the document that went past the bound, kept
	// because the compiler does not wrap its loader's errors.
	over error
}

// take counts the schemas of the document raw, named by where, and returns
// an error when they take the total past maxSchemaObjects.
func (b *schemaBudget) take(where string, raw any) error {
	n := countSchemas(raw)
	b.used += n
	if b.used <= maxSchemaObjects {
		return nil
	}
	with := ""
	if b.used > n {
		with = fmt.Sprintf(", %d with the other schemas of chart %s and its subcharts,", b.used, b.root)
	}
	b.over = fmt.Errorf("%s holds %d schemas (JSON objects and true/false values)%s more than the %d that Capstan compiles for a chart: "+
		"compiling takes time that grows with the square of their number, so the chart is refused; "+
		"its author should simplify the schema (one $ref to a shared definition instead of copies of it) or split the chart",
		where, n, with, maxSchemaObjects)
	return b.over
}

// countSchemas returns the JSON objects and true/false values in v: every
// schema the compiler can be given in it, a subschema being either.
func countSchemas(v any) int {
	switch v := v.(type) {
	case map[string]any:
		n := 1
		for _, e := range v {
			n += countSchemas(e)
		}
		return n
	case []any:
		n := 0
		for _, e := range v {
			n += countSchemas(e)
		}
		return n
	case bool:
		return 1
	}
	return 0
}

// chartLoader serves a $ref from the chart's own files and refuses every
// other URL, so compiling a schema never reads the network or the disk.
// Each file it loads is counted against the chart's budget.
type chartLoader struct {
	files  map[string][]byte
	budget *schemaBudget
}

func (l chartLoader) Load(u string) (any, error) {
	parsed, err := url.Parse(u)
	if err == nil && parsed.Scheme == "file" && parsed.Host == "" {
		name := strings.TrimPrefix(path.Clean(parsed.Path), "/")
		if data, ok := l.files[name]; ok {
			raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
			if err != nil {
				return nil, err
			}
			if err := l.budget.take(fmt.Sprintf("the file %s that a $ref names", name), raw); err != nil {
				return nil, err
			}
			return raw, nil
		}
		return nil, fmt.Errorf("the chart has no file %q for this $ref", name)
	}
	return nil, errors.New("a $ref outside the chart is refused: a values schema may refer only to itself and the chart's own files")
}

func compilePart(chartName string, prefix []string, doc []byte, files map[string][]byte, budget *schemaBudget) (p *schemaPart, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("the values.schema.json of chart %s could not be compiled: %v", chartName, r)
		}
	}()
	where := fmt.Sprintf("the values.schema.json of chart %s", chartName)
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("%s is not JSON: %w; fix the chart's schema", where, err)
	}
	if err := budget.take(where, raw); err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(chartLoader{files: files, budget: budget})
	if err := c.AddResource(schemaURL, raw); err != nil {
		return nil, fmt.Errorf("%s is not a valid JSON Schema: %w", where, err)
	}
	compiled, err := c.Compile(schemaURL)
	if budget.over != nil {
		return nil, fmt.Errorf("in chart %s, %w", chartName, budget.over)
	}
	if err != nil {
		return nil, fmt.Errorf("%s is not a valid JSON Schema: %w", where, err)
	}
	p = &schemaPart{chart: chartName, prefix: prefix, compiled: compiled}
	w := newSchemaWalker(p, raw, files)
	w.compile = func(loc string) *jsonschema.Schema {
		if s, err := c.Compile(fileURL("").String() + loc); err == nil && budget.over == nil {
			return s
		}
		return nil
	}
	if err := w.run(); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return p, nil
}

// schemaWalker finds the writeOnly and x-capstan-generate properties of a
// schema, following properties, items, combinators and $refs, within the
// schema and to the chart's other files, as the validator follows them.
//
// A reference is a $ref, a $recursiveRef (from draft 2019-09) or a
// $dynamicRef (2020-12), each followed to the schema it names statically:
// by a JSON pointer, or by an anchor that $anchor, $dynamicAnchor or, before
// draft 2019-09, an $id that is only a fragment declares.
//
// index visits every schema the root reaches once, numbers it and records
// which holds or refers to which: that graph is what values are matched
// against for writeOnly (schemaGraph), in time linear in the values
// whatever the schema's $refs and recursion. x-capstan-generate properties
// must be known before there are values, by their fixed paths, so walk
// expands the paths to them, and only to them: a $ref is followed wherever
// it is used, so that each property that refers to a definition gets its
// own generated value.
type schemaWalker struct {
	part *schemaPart
	// compile returns the compiled schema at a location (doc#pointer), or
	// nil when the compiler does not give one.
	compile func(loc string) *jsonschema.Schema
	root    *schemaDoc
	files   map[string][]byte
	// docs holds the schema documents read so far, by their path in the chart.
	docs map[string]*schemaDoc
	// ids holds the schemas that a URI names, without its fragment: each
	// document read so far by its file URL, and every schema within one
	// whose $id sets a URI, resolved against the URI of the schema around it.
	ids map[string]resource
	// drafts holds the draft that each URI in ids, and each schema within
	// the one it names up to another $id, is compiled in.
	drafts map[string]int
	// anchors holds the schemas that an anchor names, by the schema whose
	// URI it is relative to (anchorKey).
	anchors map[string]resource
	// looseIDs and looseAnchors hold what ids and anchors would hold if
	// every object of a document were a schema, for the URIs and anchors
	// that those do not know: the compiler learns of an $id or anchor
	// inside an object that is not a schema when a $ref points into it.
	looseIDs     map[string]resource
	looseAnchors map[string]resource
	// metas holds the chart's meta-schema files that a $schema names, as
	// read, by their path in the chart; nil for one that is not JSON.
	metas map[string]any

	// nodeIDs numbers the location of every schema index visited; nodeAt
	// and graph hold them by number, and parents, by number, the schemas
	// that hold or refer to each.
	nodeIDs map[string]int
	nodeAt  []any
	graph   schemaGraph
	parents [][]int
	// steps holds, by number, the schemas that each schema leads walk to:
	// its $refs' targets, then its subschemas, in a fixed order. After
	// index, only the steps to schemas from which an x-capstan-generate
	// property can be reached are kept.
	steps [][]walkStep
	// live holds, by number, the schemas from which an x-capstan-generate
	// property can be reached.
	live []bool

	// onPath counts the $refs being followed along the current walk, by
	// target and the length of the path so far.
	onPath map[[2]int]int
	visits int
	// generated holds the paths of the generated properties found, as JSON
	// pointers.
	generated map[string]bool
}

// schemaDoc is one JSON document of a schema: values.schema.json, or a file
// of the chart that a $ref names.
type schemaDoc struct {
	name string // its path in the chart
	root any
}

// newDoc returns the schema document raw, at name in the chart, and records
// the draft it is compiled in.
func (w *schemaWalker) newDoc(name string, raw any) *schemaDoc {
	w.drafts[fileURL(name).String()] = w.draftOf(raw, 2020, map[string]bool{name: true})
	return &schemaDoc{name: name, root: raw}
}

// draftOf returns the JSON Schema draft (4, 6, 7, 2019 or 2020) that the
// compiler compiles the schema raw in, as it picks it: the draft its
// $schema names, or the draft of the chart's meta-schema file it names, or
// else fallback. A document's fallback is 2020-12, the compiler's default
// (compilePart sets no other): each document of a chart picks its own, and
// a file without $schema is 2020-12, whatever values.schema.json says.
// seen holds the files visited, and may be nil.
func (w *schemaWalker) draftOf(raw any, fallback int, seen map[string]bool) int {
	obj, _ := raw.(map[string]any)
	s, ok := obj["$schema"].(string)
	if !ok {
		return fallback
	}
	u, frag, _ := strings.Cut(s, "#")
	if frag == "" {
		host, ok := strings.CutPrefix(u, "http://")
		if !ok {
			host, _ = strings.CutPrefix(u, "https://")
		}
		switch host {
		case "json-schema.org/schema", "json-schema.org/draft/2020-12/schema":
			return 2020
		case "json-schema.org/draft/2019-09/schema":
			return 2019
		case "json-schema.org/draft-07/schema":
			return 7
		case "json-schema.org/draft-06/schema":
			return 6
		case "json-schema.org/draft-04/schema":
			return 4
		}
	}
	if p, err := url.Parse(u); err == nil && p.Scheme == "file" && p.Host == "" {
		name := strings.TrimPrefix(path.Clean(p.Path), "/")
		if data, ok := w.files[name]; ok && !seen[name] {
			if seen == nil {
				seen = map[string]bool{}
			}
			seen[name] = true
			meta, read := w.metas[name]
			if !read {
				meta, _ = jsonschema.UnmarshalJSON(bytes.NewReader(data))
				w.metas[name] = meta
			}
			if meta != nil {
				return w.draftOf(meta, fallback, seen)
			}
		}
	}
	return fallback
}

// draftAt returns the draft of the schemas whose base URI is base.
func (w *schemaWalker) draftAt(base *url.URL) int {
	if d, ok := w.drafts[base.String()]; ok {
		return d
	}
	return 2020
}

// idOf returns the URI that obj's $id (id in draft 4) sets in draft, without
// its fragment, or "" when it sets none.
//
// NOTE: before draft 2019-09 a $ref's siblings are ignored, and the
// compiler ignores an $id (or id) beside a $ref: the $ref resolves against
// the URI around it, and nothing is known by that $id. Honouring it would
// resolve the $ref elsewhere than validation does, or nowhere, and leave a
// writeOnly property behind it unfound (the $id "/properties/auth" that
// generators such as jsonschema.net put on every schema).
func idOf(draft int, obj map[string]any) string {
	if _, ref := obj["$ref"]; ref && draft < 2019 {
		return ""
	}
	key := "$id"
	if draft == 4 {
		key = "id"
	}
	id, _ := obj[key].(string)
	id, _, _ = strings.Cut(id, "#")
	return id
}

// fileURL is the URL the compiler gives the chart's file at name.
func fileURL(name string) *url.URL {
	return &url.URL{Scheme: "file", Path: "/" + name}
}

// resource is a schema that a URI names: where it is in which document.
type resource struct {
	doc *schemaDoc
	at  []string
}

func newSchemaWalker(p *schemaPart, raw any, files map[string][]byte) *schemaWalker {
	w := &schemaWalker{
		part:    p,
		files:   files,
		ids:     map[string]resource{},
		drafts:  map[string]int{},
		anchors: map[string]resource{},
		metas:   map[string]any{},

		looseIDs:     map[string]resource{},
		looseAnchors: map[string]resource{},
		nodeIDs:      map[string]int{},
		onPath:       map[[2]int]int{},
		generated:    map[string]bool{},
	}
	w.root = w.newDoc(path.Base(schemaURL), raw)
	w.docs = map[string]*schemaDoc{w.root.name: w.root}
	w.addIDs(w.root)
	return w
}

// withID returns the base URI of node: base, the URI of the schema around
// it, unless node's $id sets another, and records the draft of the schemas
// under a new one. An $id that is only a fragment names an anchor, not a
// URI.
//
// A schema with its own $id is compiled in the draft its own $schema names,
// and so are the schemas within it up to another $id; without $schema it
// keeps the draft around it. The compiler ignores a $schema on a schema
// that sets no URI, and so does the walk: which draft a part is in decides
// whether the $id beside its $refs counts, and which keywords declare an
// anchor.
func (w *schemaWalker) withID(base *url.URL, node any) *url.URL {
	obj, ok := node.(map[string]any)
	if !ok {
		return base
	}
	outer := w.draftAt(base)
	draft := w.draftOf(obj, outer, nil)
	id := idOf(draft, obj)
	if id == "" {
		draft = outer
		id = idOf(draft, obj)
	}
	if id == "" {
		return base
	}
	u, err := url.Parse(id)
	if err != nil {
		return base
	}
	out := base.ResolveReference(u)
	out.Fragment, out.RawFragment = "", ""
	if _, known := w.drafts[out.String()]; !known {
		w.drafts[out.String()] = draft
	}
	return out
}

// anchorKey is where anchors records the anchor name declared in the
// schema res, or within it up to another $id.
func anchorKey(res resource, name string) string {
	return res.doc.name + "#" + pointer(res.at) + "#" + name
}

// anchorsOf lists the anchors that obj, a schema compiled in draft,
// declares, as the compiler collects them: before draft 2019-09 an $id (id
// in draft 4) with a fragment that is not a JSON pointer, and not beside a
// $ref; from 2019-09 on $anchor; and in 2020-12 $dynamicAnchor as well,
// which a reference names as it names an $anchor.
func anchorsOf(draft int, obj map[string]any) []string {
	var out []string
	if draft < 2019 {
		if _, ref := obj["$ref"]; ref {
			return nil
		}
		key := "$id"
		if draft == 4 {
			key = "id"
		}
		id, _ := obj[key].(string)
		if _, frag, ok := strings.Cut(id, "#"); ok && frag != "" && !strings.HasPrefix(frag, "/") {
			if name, err := url.PathUnescape(frag); err == nil {
				out = append(out, name)
			}
		}
		return out
	}
	if name, ok := obj["$anchor"].(string); ok {
		out = append(out, name)
	}
	if name, ok := obj["$dynamicAnchor"].(string); ok && draft >= 2020 {
		out = append(out, name)
	}
	return out
}

// refsOf lists the references of obj, a schema compiled in draft, in a
// fixed order.
func refsOf(draft int, obj map[string]any) []string {
	var out []string
	if ref, ok := obj["$ref"].(string); ok {
		out = append(out, ref)
	}
	if ref, ok := obj["$recursiveRef"].(string); ok && draft >= 2019 {
		out = append(out, ref)
	}
	if ref, ok := obj["$dynamicRef"].(string); ok && draft >= 2020 {
		out = append(out, ref)
	}
	return out
}

// addIDs records the URIs that doc and the schemas within it are known by,
// as the compiler records them: the document's file URL, and each $id; and
// the anchors each declares, by the schema whose URI they are relative to.
//
// It looks only where a schema is (schemaPositions), as the compiler does:
// elsewhere an object is a value, or a keyword's that the compiler does not
// know, and what looks like an $id or an anchor in it declares nothing. A
// property named default, enum or const holds a schema all the same, and
// an "$anchor" under an unknown keyword must not stand in for the one the
// compiler resolves a $ref to.
func (w *schemaWalker) addIDs(doc *schemaDoc) {
	w.ids[fileURL(doc.name).String()] = resource{doc: doc}
	var scan func(node any, base *url.URL, at []string)
	scan = func(node any, base *url.URL, at []string) {
		obj, ok := node.(map[string]any)
		if !ok {
			return
		}
		if b := w.withID(base, obj); b != base {
			if _, known := w.ids[b.String()]; !known {
				w.ids[b.String()] = resource{doc: doc, at: slices.Clone(at)}
			}
			base = b
		}
		draft := w.draftAt(base)
		for _, name := range anchorsOf(draft, obj) {
			key := anchorKey(w.ids[base.String()], name)
			if _, known := w.anchors[key]; !known {
				w.anchors[key] = resource{doc: doc, at: slices.Clone(at)}
			}
		}
		for _, pos := range schemaPositions(draft, obj) {
			scan(pos.node, base, append(at, pos.at...))
		}
	}
	scan(doc.root, fileURL(doc.name), nil)

	// NOTE: a $ref that points into an object that is no schema (an
	// unknown keyword's, a default value) makes the compiler read the
	// $ids and anchors in it, and a later $ref may name them; which it
	// compiles first decides whether that $ref compiles. The schema
	// compiled, so a $ref that ids and anchors cannot resolve names one of
	// these; resolve takes them only then, and so they never shadow what
	// a schema declares.
	var loose func(node any, base *url.URL, at []string)
	loose = func(node any, base *url.URL, at []string) {
		switch t := node.(type) {
		case map[string]any:
			if b := w.withID(base, t); b != base {
				if _, known := w.ids[b.String()]; !known {
					if _, known := w.looseIDs[b.String()]; !known {
						w.looseIDs[b.String()] = resource{doc: doc, at: slices.Clone(at)}
					}
				}
				base = b
			}
			res, ok := w.ids[base.String()]
			if !ok {
				res = w.looseIDs[base.String()]
			}
			for _, name := range anchorsOf(w.draftAt(base), t) {
				key := anchorKey(res, name)
				if _, known := w.anchors[key]; known {
					continue
				}
				if _, known := w.looseAnchors[key]; !known {
					w.looseAnchors[key] = resource{doc: doc, at: slices.Clone(at)}
				}
			}
			for _, k := range sortedKeys(t) {
				loose(t[k], base, append(at, k))
			}
		case []any:
			for i, e := range t {
				loose(e, base, append(at, strconv.Itoa(i)))
			}
		}
	}
	loose(doc.root, fileURL(doc.name), nil)
}

// position is a schema within another, at the JSON pointer tokens at
// below it.
type position struct {
	node any
	at   []string
}

// schemaPositions lists, in a fixed order, the schemas within obj, a
// schema compiled in draft, where the compiler looks for $ids and anchors:
// the subschemas of every keyword of the draft, as the validator library
// lists them, definitions and $defs among them. It is wider than
// subschemas, which lists only those that apply to a value.
func schemaPositions(draft int, obj map[string]any) []position {
	var out []position
	each := func(kw string) { // a map of schemas, by name
		m, _ := obj[kw].(map[string]any)
		for _, name := range sortedKeys(m) {
			out = append(out, position{node: m[name], at: []string{kw, name}})
		}
	}
	one := func(kw string) {
		if sub, ok := obj[kw]; ok {
			out = append(out, position{node: sub, at: []string{kw}})
		}
	}
	list := func(kw string) {
		l, _ := obj[kw].([]any)
		for i, sub := range l {
			out = append(out, position{node: sub, at: []string{kw, strconv.Itoa(i)}})
		}
	}
	each("definitions")
	one("not")
	list("allOf")
	list("anyOf")
	list("oneOf")
	each("properties")
	one("additionalProperties")
	each("patternProperties")
	one("items")
	list("items")
	one("additionalItems")
	each("dependencies")
	if draft >= 6 {
		one("propertyNames")
		one("contains")
	}
	if draft >= 7 {
		one("if")
		one("then")
		one("else")
	}
	if draft >= 2019 {
		each("$defs")
		each("dependentSchemas")
		one("unevaluatedProperties")
		one("unevaluatedItems")
		one("contentSchema")
	}
	if draft >= 2020 {
		list("prefixItems")
	}
	return out
}

// baseAt returns the base URI of the schema at the pointer tokens at in doc.
func (w *schemaWalker) baseAt(doc *schemaDoc, at []string) *url.URL {
	node := doc.root
	base := w.withID(fileURL(doc.name), node)
	for _, tok := range at {
		next, ok := lookup(node, []string{tok})
		if !ok {
			break
		}
		node = next
		base = w.withID(base, node)
	}
	return base
}

func (w *schemaWalker) run() error {
	rootLoc := w.root.name + "#"
	rootBase := w.baseAt(w.root, nil)
	if _, err := w.index(w.root, w.root.root, rootLoc, rootBase); err != nil {
		return err
	}
	w.live = w.reaching(func(obj map[string]any) bool { _, ok := obj[GenerateKeyword]; return ok })
	w.keepLiveSteps()
	w.keepWriteOnly()
	return w.walk(0, nil, 0)
}

// keepLiveSteps drops the steps that lead to no x-capstan-generate
// property, so that walk, which visits a schema once per path to it, pays
// only for the schemas on its way to one: a schema it reaches through
// many paths may hold any number of others that lead nowhere.
func (w *schemaWalker) keepLiveSteps() {
	for id, steps := range w.steps {
		if !w.live[id] {
			w.steps[id] = nil
			continue
		}
		w.steps[id] = slices.DeleteFunc(steps, func(s walkStep) bool { return !w.live[s.to] })
	}
}

// reaching returns, by number, the schemas from which one that is holds
// for can be reached.
func (w *schemaWalker) reaching(is func(obj map[string]any) bool) []bool {
	out := make([]bool, len(w.graph.nodes))
	var queue []int
	for id, node := range w.nodeAt {
		if obj, ok := node.(map[string]any); ok && is(obj) {
			queue = append(queue, id)
		}
	}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		if out[id] {
			continue
		}
		out[id] = true
		queue = append(queue, w.parents[id]...)
	}
	return out
}

// keepWriteOnly keeps the graph for matching values when the schema has a
// writeOnly property, with the edges that lead to one only.
func (w *schemaWalker) keepWriteOnly() {
	live := w.reaching(func(obj map[string]any) bool { wo, _ := obj["writeOnly"].(bool); return wo })
	if len(live) == 0 || !live[0] {
		return
	}
	keep := func(ids []int) []int {
		var out []int
		for _, id := range ids {
			if live[id] && !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
		return out
	}
	g := &schemaGraph{nodes: make([]graphNode, len(w.graph.nodes))}
	for id, n := range w.graph.nodes {
		if !live[id] {
			continue
		}
		k := graphNode{writeOnly: n.writeOnly, same: keep(n.same), always: keep(n.always), anyKey: keep(n.anyKey)}
		for _, b := range n.branches {
			if !live[b.to] {
				continue
			}
			b.schema = w.compile(b.at)
			for _, c := range b.conds {
				b.cond = append(b.cond, w.compile(c))
			}
			k.branches = append(k.branches, b)
		}
		for _, e := range n.keyed {
			if !live[e.to] {
				continue
			}
			switch e.rule.kind {
			case rulePattern:
				e.re, _ = regexp.Compile(e.rule.pattern)
			case ruleAdditional, ruleUnevaluated:
				if k.scope == nil {
					k.scope = w.keyScopeOf(id)
				}
			}
			k.keyed = append(k.keyed, e)
		}
		for name, ids := range n.named {
			if kept := keep(ids); len(kept) > 0 {
				if k.named == nil {
					k.named = map[string][]int{}
				}
				k.named[name] = kept
			}
		}
		g.nodes[id] = k
	}
	w.part.writeOnly = g
}

// keyScopeOf returns what the additionalProperties and
// unevaluatedProperties of the schema numbered id leave to them. For
// unevaluatedProperties it counts the schemas that always apply in place
// one step away, a $ref's target and each allOf branch, as evaluating what
// they declare: those where a chart declares its plain properties beside
// it. A key that only a deeper one declares, or only a conditional one
// (then, else, an anyOf or oneOf branch, a dependentSchemas entry), which
// evaluates it only when it applies, is taken as unevaluated.
func (w *schemaWalker) keyScopeOf(id int) *keyScope {
	sc := &keyScope{own: map[string]bool{}, evaluated: map[string]bool{}}
	add := func(node any, own bool) {
		obj, _ := node.(map[string]any)
		props, _ := obj["properties"].(map[string]any)
		for name := range props {
			sc.evaluated[name] = true
			if own {
				sc.own[name] = true
			}
		}
		pp, _ := obj["patternProperties"].(map[string]any)
		for pat := range pp {
			if re, err := regexp.Compile(pat); err == nil {
				sc.evaluatedPatterns = append(sc.evaluatedPatterns, re)
				if own {
					sc.ownPatterns = append(sc.ownPatterns, re)
				}
			}
		}
		if _, ok := obj["additionalProperties"]; ok {
			sc.additional = true
		}
	}
	add(w.nodeAt[id], true)
	for _, s := range w.graph.nodes[id].always {
		add(w.nodeAt[s], false)
	}
	return sc
}

// subschema is a schema within another: where it is (the JSON pointer
// tokens after its parent's, escaped) and the step of the values' path it
// applies to, or none when it applies to the same value (a combinator).
type subschema struct {
	node any
	at   string
	seg  patSeg
	same bool
	// always, with same, says that it applies whatever the value (allOf),
	// not only when a condition holds (anyOf, oneOf, then, else,
	// dependentSchemas, dependencies).
	always bool
	rule   keyRule // the keys or indexes it applies to, when seg.any
	// branch and key say when a conditional one applies (branchEdge), and
	// conds where the schemas are that its condition reads.
	branch branchKind
	key    string
	conds  []string
}

// subschemas lists the schemas within obj, a schema of draft, that apply to
// its value or to the values within it, in a fixed order.
func subschemas(draft int, obj map[string]any) []subschema {
	var out []subschema
	if props, ok := obj["properties"].(map[string]any); ok {
		for _, name := range sortedKeys(props) {
			out = append(out, subschema{node: props[name], at: "/properties/" + escapeToken(name), seg: patSeg{name: name}})
		}
	}
	if pp, ok := obj["patternProperties"].(map[string]any); ok {
		for _, name := range sortedKeys(pp) {
			out = append(out, subschema{node: pp[name], at: "/patternProperties/" + escapeToken(name), seg: patSeg{any: true},
				rule: keyRule{kind: rulePattern, pattern: name}})
		}
	}
	// The items a tuple (items as a list, or prefixItems) does not take are
	// left to items after it, additionalItems or unevaluatedItems.
	tuple, isTuple := obj["items"].([]any)
	arrayItems := isTuple
	if prefix, ok := obj["prefixItems"].([]any); ok && draft >= 2020 {
		tuple, isTuple = prefix, true
	}
	additionalItems := keyRule{kind: ruleNone}
	if isTuple {
		additionalItems = keyRule{kind: ruleFrom, index: len(tuple)}
	}
	// NOTE: items as a schema takes every item the tuple does not, and so
	// does additionalItems after the tuple form of items: validation
	// leaves unevaluatedItems none.
	unevaluatedItems := keyRule{kind: ruleFrom, index: len(tuple)}
	if isSchema(obj["items"]) || arrayItems && isSchema(obj["additionalItems"]) {
		unevaluatedItems = keyRule{kind: ruleNone}
	}
	anyKey := []string{"additionalProperties", "additionalItems", "items", "contains"}
	rules := map[string]keyRule{
		"additionalProperties":  {kind: ruleAdditional},
		"additionalItems":       additionalItems,
		"items":                 {kind: ruleFrom, index: len(tuple)},
		"contains":              {kind: ruleAny},
		"unevaluatedProperties": {kind: ruleUnevaluated},
		"unevaluatedItems":      unevaluatedItems,
	}
	if draft >= 2019 {
		anyKey = append(anyKey, "unevaluatedProperties", "unevaluatedItems")
	}
	for _, kw := range anyKey {
		switch sub := obj[kw].(type) {
		case map[string]any:
			out = append(out, subschema{node: sub, at: "/" + kw, seg: patSeg{any: true}, rule: rules[kw]})
		case []any: // the tuple form of items before draft 2020-12
			for i, e := range sub {
				out = append(out, subschema{node: e, at: "/" + kw + "/" + strconv.Itoa(i), seg: patSeg{any: true},
					rule: keyRule{kind: ruleIndex, index: i}})
			}
		}
	}
	if items, ok := obj["prefixItems"].([]any); ok && draft >= 2020 {
		for i, e := range items {
			out = append(out, subschema{node: e, at: "/prefixItems/" + strconv.Itoa(i), seg: patSeg{any: true},
				rule: keyRule{kind: ruleIndex, index: i}})
		}
	}
	for _, kw := range []string{"allOf", "anyOf", "oneOf"} {
		subs, _ := obj[kw].([]any)
		var all []string
		for i := range subs {
			all = append(all, "/"+kw+"/"+strconv.Itoa(i))
		}
		for i, sub := range subs {
			out = append(out, subschema{node: sub, at: all[i], same: true, always: kw == "allOf", branch: branchValid, conds: all})
		}
	}
	for i, kw := range []string{"then", "else"} {
		kind := []branchKind{branchThen, branchElse}[i]
		if sub, ok := obj[kw]; ok {
			var conds []string
			if _, ok := obj["if"]; ok {
				conds = []string{"/if"}
			}
			out = append(out, subschema{node: sub, at: "/" + kw, same: true, branch: kind, conds: conds})
		}
	}
	if ds, ok := obj["dependentSchemas"].(map[string]any); ok {
		for _, name := range sortedKeys(ds) {
			out = append(out, subschema{node: ds[name], at: "/dependentSchemas/" + escapeToken(name), same: true, branch: branchDependent, key: name})
		}
	}
	// NOTE: dependencies is what draft 2019-09 split into dependentSchemas
	// and dependentRequired. The validator applies its schema form in
	// every draft, so the walk follows it in every draft too; a list of
	// names holds no schema.
	if ds, ok := obj["dependencies"].(map[string]any); ok {
		for _, name := range sortedKeys(ds) {
			if _, isList := ds[name].([]any); !isList {
				out = append(out, subschema{node: ds[name], at: "/dependencies/" + escapeToken(name), same: true, branch: branchDependent, key: name})
			}
		}
	}
	return out
}

// isSchema reports whether v is a schema that applies to whatever it is
// given: an object, or true.
func isSchema(v any) bool {
	if b, ok := v.(bool); ok {
		return b
	}
	_, ok := v.(map[string]any)
	return ok
}

// escapeToken escapes one token of a JSON pointer.
func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// resolve finds the schema that a $ref names, and its location and base
// URI, as the compiler resolves it: against base, the URI that the nearest
// $id around the $ref sets, or else the file of the chart that holds it. A
// URI that a schema's $id sets names that schema; a file URL names the
// chart's file at its path; its fragment is a JSON pointer within that
// schema, or an anchor declared in it (anchorsOf). ok is false for a $ref
// the walk does not follow: to anything that is neither (the JSON Schema
// meta-schemas, which the compiler knows by their http URLs). Which refs
// compile is the compiler's to decide; it has refused a schema that refers
// to anything outside the chart, or to an anchor or a pointer that is not
// there, before the walk starts.
func (w *schemaWalker) resolve(doc *schemaDoc, base *url.URL, ref string) (target any, tdoc *schemaDoc, loc string, tbase *url.URL, ok bool, err error) {
	r, perr := url.Parse(ref)
	if perr != nil {
		return nil, nil, "", nil, false, nil
	}
	u := base.ResolveReference(r)
	frag := u.Fragment
	u.Fragment, u.RawFragment = "", ""
	res, known := w.ids[u.String()]
	if !known {
		res, known = w.looseIDs[u.String()]
	}
	if !known {
		if u.Scheme != "file" || u.Host != "" {
			return nil, nil, "", nil, false, nil
		}
		if r.Scheme == "" && r.Host == "" && !strings.HasPrefix(r.Path, "/") && base.Scheme == "file" {
			// NOTE: the compiler reads "../schemas/auth.json" as the chart's
			// own schemas/auth.json, since a file URL cannot climb above its
			// root; a path that climbs out of the chart is refused all the
			// same, so that a chart says what it means.
			if rel := path.Join(path.Dir(strings.TrimPrefix(base.Path, "/")), r.Path); rel == ".." || strings.HasPrefix(rel, "../") {
				return nil, nil, "", nil, false, fmt.Errorf("the $ref %q in %s names a file outside the chart; refer to the chart's own files by their path in it", ref, doc.name)
			}
		}
		d, derr := w.document(strings.TrimPrefix(path.Clean(u.Path), "/"), ref, doc)
		if derr != nil || d == nil {
			return nil, nil, "", nil, false, derr
		}
		res = resource{doc: d}
	}
	if frag != "" && !strings.HasPrefix(frag, "/") {
		a, found := w.anchors[anchorKey(res, frag)]
		if !found {
			a, found = w.looseAnchors[anchorKey(res, frag)]
		}
		if !found {
			return nil, nil, "", nil, false, nil
		}
		res, frag = a, ""
	}
	segs := append(slices.Clone(res.at), splitPointer(frag)...)
	target, ok = lookup(res.doc.root, segs)
	if !ok {
		return nil, nil, "", nil, false, nil
	}
	var b strings.Builder
	b.WriteString(res.doc.name + "#")
	for _, s := range segs {
		b.WriteString("/" + escapeToken(s))
	}
	return target, res.doc, b.String(), w.baseAt(res.doc, segs), true, nil
}

// document reads the chart's file at name, which the $ref ref in from
// names. It returns nil for a file the chart does not have: the compiler
// has refused such a $ref already.
func (w *schemaWalker) document(name, ref string, from *schemaDoc) (*schemaDoc, error) {
	if d, ok := w.docs[name]; ok {
		return d, nil
	}
	data, ok := w.files[name]
	if !ok {
		return nil, nil
	}
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("the file %s that the $ref %q in %s names is not JSON: %w", name, ref, from.name, err)
	}
	d := w.newDoc(name, raw)
	w.docs[name] = d
	w.addIDs(d)
	return d, nil
}

// index visits, once each, the schemas that node, at loc in doc, reaches,
// numbers them and records which holds or refers to which. It returns the
// number of node.
func (w *schemaWalker) index(doc *schemaDoc, node any, loc string, base *url.URL) (int, error) {
	if id, ok := w.nodeIDs[loc]; ok {
		return id, nil
	}
	id := len(w.graph.nodes)
	w.nodeIDs[loc] = id
	w.graph.nodes = append(w.graph.nodes, graphNode{})
	w.nodeAt = append(w.nodeAt, node)
	w.parents = append(w.parents, nil)
	w.steps = append(w.steps, nil)
	obj, ok := node.(map[string]any)
	if !ok {
		return id, nil
	}
	var steps []walkStep
	edge := func(to int) { w.parents[to] = append(w.parents[to], id) }
	n := graphNode{}
	n.writeOnly, _ = obj["writeOnly"].(bool)
	for _, ref := range refsOf(w.draftAt(base), obj) {
		target, tdoc, tloc, tbase, ok, err := w.resolve(doc, base, ref)
		if err != nil {
			return 0, err
		}
		if ok {
			to, err := w.index(tdoc, target, tloc, tbase)
			if err != nil {
				return 0, err
			}
			edge(to)
			n.same = append(n.same, to)
			n.always = append(n.always, to)
			steps = append(steps, walkStep{to: to, ref: true, same: true})
		}
	}
	for _, sub := range subschemas(w.draftAt(base), obj) {
		to, err := w.index(doc, sub.node, loc+sub.at, w.withID(base, sub.node))
		if err != nil {
			return 0, err
		}
		edge(to)
		steps = append(steps, walkStep{to: to, seg: sub.seg, same: sub.same})
		switch {
		case sub.same:
			n.same = append(n.same, to)
			if sub.always {
				n.always = append(n.always, to)
				break
			}
			b := branchEdge{to: to, kind: sub.branch, key: sub.key, at: loc + sub.at}
			for _, c := range sub.conds {
				b.conds = append(b.conds, loc+c)
			}
			n.branches = append(n.branches, b)
		case sub.seg.any:
			n.anyKey = append(n.anyKey, to)
			n.keyed = append(n.keyed, keyedEdge{to: to, rule: sub.rule})
		default:
			if n.named == nil {
				n.named = map[string][]int{}
			}
			n.named[sub.seg.name] = append(n.named[sub.seg.name], to)
		}
	}
	w.graph.nodes[id] = n
	w.steps[id] = steps
	return id, nil
}

// walkStep leads walk from a schema to one that index numbered to: the
// target of one of its $refs, or one of its subschemas, which applies to
// the same value (same) or to the one at seg within it.
type walkStep struct {
	to   int
	seg  patSeg
	ref  bool
	same bool
}

// walk records the x-capstan-generate properties that the schema numbered
// id, at the values' path pat, leads to. Their paths are fixed, so the walk
// expands them, unlike writeOnly, which is matched against values. It takes
// only the steps that keepLiveSteps kept, and counts every schema it steps
// to against maxSchemaVisits, so that its work is bounded whatever the
// size of the schemas it passes through.
func (w *schemaWalker) walk(id int, pat []patSeg, depth int) error {
	if !w.live[id] {
		return nil
	}
	if w.visits++; w.visits > maxSchemaVisits {
		return fmt.Errorf("finding its %s properties visits more than %d schemas: "+
			"its $refs branch too wide or nest too deep to expand; refer to a definition that holds generated properties from fewer places", GenerateKeyword, maxSchemaVisits)
	}
	if depth > maxSchemaDepth || len(pat) > maxSchemaDepth {
		return nil
	}
	obj, _ := w.nodeAt[id].(map[string]any)
	if g, ok := obj[GenerateKeyword]; ok {
		if err := w.addGenerate(g, pat); err != nil {
			return err
		}
	}
	for _, step := range w.steps[id] {
		if step.ref {
			// NOTE: a ref met again at the same length of path is a loop
			// that reaches no deeper value; one met at a longer path is a
			// recursive schema, followed down to maxSchemaDepth.
			key := [2]int{step.to, len(pat)}
			if w.onPath[key] >= 2 {
				continue
			}
			w.onPath[key]++
			err := w.walk(step.to, pat, depth+1)
			w.onPath[key]--
			if err != nil {
				return err
			}
			continue
		}
		next := pat
		if !step.same {
			next = append(pat[:len(pat):len(pat)], step.seg)
		}
		if err := w.walk(step.to, next, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// The defaults of x-capstan-generate.
const (
	DefaultGenerateLength   = 32
	DefaultGenerateAlphabet = "alphanumeric"
	maxGenerateLength       = 1024
)

func (w *schemaWalker) addGenerate(opt any, pat []patSeg) error {
	segs := make([]string, 0, len(w.part.prefix)+len(pat))
	segs = append(segs, w.part.prefix...)
	for _, s := range pat {
		if s.any {
			return fmt.Errorf("%s at %s is under a map or list of any size; it must be on a property with a fixed path", GenerateKeyword, dotted(segs))
		}
		segs = append(segs, s.name)
	}
	if len(pat) == 0 {
		return fmt.Errorf("%s is on the schema's root; it must be on a property", GenerateKeyword)
	}
	g := Generate{Path: segs, Length: DefaultGenerateLength, Alphabet: DefaultGenerateAlphabet}
	switch o := opt.(type) {
	case bool:
		if !o {
			return nil
		}
	case map[string]any:
		for k, v := range o {
			switch k {
			case "length":
				n, ok := v.(json.Number)
				i, err := n.Int64()
				if !ok || err != nil || i < 1 || i > maxGenerateLength {
					return fmt.Errorf("%s at %s: length must be a whole number from 1 to %d", GenerateKeyword, dotted(segs), maxGenerateLength)
				}
				g.Length = int(i)
			case "alphabet":
				a, ok := v.(string)
				if _, known := Alphabets[a]; !ok || !known {
					return fmt.Errorf("%s at %s: alphabet must be one of %s", GenerateKeyword, dotted(segs), strings.Join(alphabetNames(), ", "))
				}
				g.Alphabet = a
			default:
				return fmt.Errorf("%s at %s: unknown option %q; the options are length and alphabet", GenerateKeyword, dotted(segs), k)
			}
		}
	default:
		return fmt.Errorf("%s at %s must be true or an object with length and alphabet", GenerateKeyword, dotted(segs))
	}
	if w.generated[pointer(g.Path)] {
		return nil // reached again through a $ref or a combinator
	}
	w.generated[pointer(g.Path)] = true
	w.part.generate = append(w.part.generate, g)
	return nil
}

// Generated lists the properties marked x-capstan-generate, across the chart
// and its subcharts.
func (s *Schema) Generated() []Generate {
	if s == nil {
		return nil
	}
	var out []Generate
	for _, p := range s.parts {
		out = append(out, p.generate...)
	}
	return out
}

// Validate checks values against the schemas of the chart and its subcharts.
// Each error carries the JSON path of the value and the keyword that failed,
// with a message built here, never the validator's, which can quote the value.
func (s *Schema) Validate(values map[string]any) []capstanv1.ValuesError {
	if s == nil {
		return nil
	}
	var out []capstanv1.ValuesError
	for _, p := range s.parts {
		v := any(values)
		if len(p.prefix) > 0 {
			sub, ok := lookup(values, p.prefix)
			if !ok || sub == nil {
				continue // no values for this subchart: nothing to validate, as in Helm
			}
			if _, isMap := sub.(map[string]any); !isMap {
				out = append(out, capstanv1.ValuesError{Path: pointer(p.prefix), Rule: "type",
					Message: fmt.Sprintf("%s holds the values of subchart %s and must be a map", dotted(p.prefix), p.chart)})
				continue
			}
			v = sub
		}
		out = append(out, p.validate(v)...)
	}
	return out
}

func (p *schemaPart) validate(v any) (out []capstanv1.ValuesError) {
	defer func() {
		if r := recover(); r != nil {
			out = append(out, capstanv1.ValuesError{Path: pointer(p.prefix), Rule: "schema",
				Message: fmt.Sprintf("the values could not be checked against the schema of chart %s", p.chart)})
		}
	}()
	err := p.compiled.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []capstanv1.ValuesError{{Path: pointer(p.prefix), Rule: "schema",
			Message: fmt.Sprintf("the values could not be checked against the schema of chart %s", p.chart)}}
	}
	collectErrors(ve, p.prefix, &out)
	return out
}

// collectErrors turns the leaves of a validation error tree into
// ValuesErrors. anyOf and oneOf report once, at the value, rather than once
// per alternative.
func collectErrors(e *jsonschema.ValidationError, prefix []string, out *[]capstanv1.ValuesError) {
	at := append(prefix[:len(prefix):len(prefix)], e.InstanceLocation...)
	add := func(segs []string, rule, msg string) {
		*out = append(*out, capstanv1.ValuesError{Path: pointer(segs), Rule: rule, Message: msg})
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference:
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				collectErrors(c, prefix, out)
			}
			return
		}
		add(at, keyword(e), describe(at, "breaks the schema"))
	case *kind.AnyOf:
		add(at, "anyOf", describe(at, "matches none of the alternatives the schema allows"))
	case *kind.OneOf:
		if len(k.Subschemas) > 1 {
			add(at, "oneOf", describe(at, "matches more than one of the alternatives, and the schema allows exactly one"))
		} else {
			add(at, "oneOf", describe(at, "matches none of the alternatives the schema allows"))
		}
	case *kind.Required:
		for _, m := range k.Missing {
			p := append(at[:len(at):len(at)], m)
			add(p, "required", describe(p, "is required"))
		}
	case *kind.AdditionalProperties:
		for _, m := range k.Properties {
			p := append(at[:len(at):len(at)], m)
			add(p, "additionalProperties", describe(p, "is not a property the schema allows here"))
		}
	case *kind.PropertyNames:
		p := append(at[:len(at):len(at)], k.Property)
		add(p, "propertyNames", describe(p, "has a name the schema does not allow"))
	case *kind.Dependency:
		add(at, "dependencies", describe(at, fmt.Sprintf("needs %s when %s is set", strings.Join(k.Missing, ", "), k.Prop)))
	case *kind.DependentRequired:
		add(at, "dependentRequired", describe(at, fmt.Sprintf("needs %s when %s is set", strings.Join(k.Missing, ", "), k.Prop)))
	default:
		add(at, keyword(e), describe(at, leafMessage(e.ErrorKind)))
	}
}

// keyword names the rule of an error: its keyword, such as minLength.
func keyword(e *jsonschema.ValidationError) string {
	if kp := e.ErrorKind.KeywordPath(); len(kp) > 0 {
		return kp[0]
	}
	if i := strings.LastIndex(e.SchemaURL, "/"); i >= 0 && i+1 < len(e.SchemaURL) {
		return e.SchemaURL[i+1:]
	}
	return "schema"
}

func describe(at []string, what string) string {
	if len(at) == 0 {
		return "the values " + what
	}
	return dotted(at) + " " + what
}

// leafMessage says what a failed keyword wants. It uses only what the schema
// says (types, bounds, patterns, allowed values), never the value itself.
func leafMessage(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Type:
		return fmt.Sprintf("must be %s, not %s", strings.Join(k.Want, " or "), k.Got)
	case *kind.Enum:
		if want, ok := primitives(k.Want); ok {
			return "must be one of: " + want
		}
		return "must be one of the values the schema lists"
	case *kind.Const:
		if want, ok := primitives([]any{k.Want}); ok {
			return "must be " + want
		}
		return "must be the value the schema requires"
	case *kind.Format:
		return fmt.Sprintf("must be a valid %s", k.Want)
	case *kind.MinLength:
		return fmt.Sprintf("must be at least %d characters long", k.Want)
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %d characters long", k.Want)
	case *kind.Pattern:
		return fmt.Sprintf("must match the pattern %s", k.Want)
	case *kind.Minimum:
		return "must be at least " + ratString(k.Want)
	case *kind.Maximum:
		return "must be at most " + ratString(k.Want)
	case *kind.ExclusiveMinimum:
		return "must be more than " + ratString(k.Want)
	case *kind.ExclusiveMaximum:
		return "must be less than " + ratString(k.Want)
	case *kind.MultipleOf:
		return "must be a multiple of " + ratString(k.Want)
	case *kind.MinItems:
		return fmt.Sprintf("must have at least %d items", k.Want)
	case *kind.MaxItems:
		return fmt.Sprintf("must have at most %d items", k.Want)
	case *kind.UniqueItems:
		return fmt.Sprintf("must not repeat items (items %d and %d are equal)", k.Duplicates[0], k.Duplicates[1])
	case *kind.MinProperties:
		return fmt.Sprintf("must have at least %d properties", k.Want)
	case *kind.MaxProperties:
		return fmt.Sprintf("must have at most %d properties", k.Want)
	case *kind.AdditionalItems:
		return "has more items than the schema allows"
	case *kind.Contains, *kind.MinContains, *kind.MaxContains:
		return "does not have the number of matching items the schema asks for"
	case *kind.ContentEncoding:
		return fmt.Sprintf("must be %s encoded", k.Want)
	case *kind.ContentMediaType:
		return fmt.Sprintf("must be of media type %s", k.Want)
	case *kind.FalseSchema:
		return "is not allowed here"
	case *kind.Not:
		return "matches a schema it must not match"
	case *kind.InvalidJsonValue:
		return "has a type that JSON cannot hold"
	default:
		return "breaks the schema"
	}
}

// primitives lists allowed values from the schema, when all are scalars.
func primitives(vals []any) (string, bool) {
	parts := make([]string, 0, len(vals))
	for _, v := range vals {
		switch t := v.(type) {
		case string:
			parts = append(parts, strconv.Quote(t))
		case nil:
			parts = append(parts, "null")
		case bool, json.Number, float64, int, int64:
			parts = append(parts, fmt.Sprint(t))
		default:
			return "", false
		}
	}
	return strings.Join(parts, ", "), len(parts) > 0
}

func ratString(r *big.Rat) string {
	if r == nil {
		return "the schema's bound"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}
