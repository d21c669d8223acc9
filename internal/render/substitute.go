package render

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// Variable substitution replaces ${name} in a git folder's objects, after
// the folder is built, as Flux's postBuild substitution does, so that one
// folder serves several clusters: a cluster's name, its domain, a replica
// count.
//
// It differs from Flux's in three ways, each to lose nothing:
//
//   - A variable that is used and not defined stops the render, with the
//     object and the name, where Flux (without its strict mode) puts an
//     empty string there and applies it. ${name:=} asks for the empty
//     string.
//   - It works on YAML's scalars, not on the text: a value holding a
//     colon or a brace stays inside its string and never adds a field.
//     A scalar written without quotes is read again after the
//     substitution, so replicas: ${count} is a number, as with Flux; one
//     in quotes stays a string.
//   - An expression it does not know (${list[@]}, ${#name}) is an error
//     too, rather than a guess: shell scripts in a ConfigMap are the usual
//     source, and the object is annotated to be left as it is.

// The labels or annotations that leave an object as it is, Flux's and
// Capstan's, with the value SubstituteDisabled.
const (
	FluxSubstituteAnnotation = "kustomize.toolkit.fluxcd.io/substitute"
	SubstituteAnnotation     = "capstan.dev/substitute"
	SubstituteDisabled       = "disabled"
)

// maxProblems is how many substitution problems an error lists.
const maxProblems = 5

// SubstituteError is a render whose variables could not all be
// substituted: each problem names the object and the expression.
type SubstituteError struct {
	Problems []string
	// TooLarge is set when the variables' values would have made the
	// render larger than maxSubstituted.
	TooLarge bool
}

func (e *SubstituteError) Error() string {
	list := e.Problems
	more := ""
	if len(list) > maxProblems {
		more = fmt.Sprintf("; and %d more", len(list)-maxProblems)
		list = list[:maxProblems]
	}
	if e.TooLarge {
		return "render: substitute: " + strings.Join(list, "; ") + more +
			": a variable's value is written at every place that names it; name a large variable in fewer places, " +
			"or keep large text in a file of the folder"
	}
	return "render: substitute: " + strings.Join(list, "; ") + more +
		": define each variable in spec.substitute or a spec.substituteFrom object, or give it a default (${name:=default}); " +
		"write a literal ${ as $${; or label or annotate the object " + FluxSubstituteAnnotation + ": " + SubstituteDisabled + " to leave it as it is"
}

// maxSubstituted bounds the bytes that the variables' values add to one
// render, each value counted at every place it is written: the bound a
// chart's render has (maxTemplateOutput). A folder is built and
// substituted in the controller's own process, with no worker's memory
// bound around it, and a value of 64 KiB named 16,000 times would
// otherwise build a gibibyte there before any later bound on the render's
// size could see it.
const maxSubstituted = maxTemplateOutput

// substituteBudget is what the variables' values may still add to one
// render, shared by its objects, hooks, patches and images.
type substituteBudget struct {
	left int
	// over is set once a value did not fit.
	over bool
}

func newSubstituteBudget() *substituteBudget {
	return &substituteBudget{left: maxSubstituted}
}

// take counts n more bytes of values, and reports whether they fit.
func (b *substituteBudget) take(n int) bool {
	if n > b.left {
		b.over = true
		return false
	}
	b.left -= n
	return true
}

// failed is the error of a render whose substitution found problems.
func (b *substituteBudget) failed(problems []string) error {
	return &SubstituteError{Problems: problems, TooLarge: b.over}
}

// substituteHash folds the variables into a render hash, so that a
// changed variable is a new render, applied as an upgrade. vars nil (no
// substitution) keeps the hash as it was.
func substituteHash(render string, vars map[string]string) (string, error) {
	if vars == nil {
		return render, nil
	}
	pairs := make([][2]string, 0, len(vars))
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		pairs = append(pairs, [2]string{k, vars[k]})
	}
	doc, err := json.Marshal(struct {
		Render    string      `json:"render"`
		Variables [][2]string `json:"variables"`
	}{render, pairs})
	if err != nil {
		return "", fmt.Errorf("render: hash the variables: %w", err)
	}
	sum := sha256.Sum256(doc)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// substituteDocument substitutes vars in one YAML document of a plain
// folder, an object or a List of them, and returns it as JSON, with the
// problems found, each naming its object. The document is read as the
// folder's other documents are (sigs.k8s.io/yaml), and only the values that
// held "${" are replaced in what that reading gave: the document is never
// written out as YAML again, which could change a value that held no
// variable. A document with no "${" is returned as it is.
func substituteDocument(doc []byte, vars map[string]string, budget *substituteBudget) ([]byte, []string, error) {
	if !bytes.Contains(doc, []byte("${")) {
		return doc, nil, nil
	}
	var root yamlv3.Node
	if err := yamlv3.Unmarshal(doc, &root); err != nil {
		return nil, nil, err
	}
	if len(root.Content) == 0 {
		return doc, nil, nil
	}
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, nil, err
	}
	tree, err := decodeNumbers(j)
	if err != nil {
		return nil, nil, err
	}
	top := root.Content[0]
	nodes, values := []*yamlv3.Node{top}, []*any{&tree}
	if items := listItems(top); items != nil {
		list, _ := tree.(map[string]any)["items"].([]any)
		if len(list) != len(items.Content) {
			return nil, nil, errors.New("the List's items cannot be read")
		}
		nodes, values = items.Content, nil
		for i := range list {
			values = append(values, &list[i])
		}
	}
	var problems []string
	for i, obj := range nodes {
		if disabled(obj) {
			continue
		}
		who := describeNode(obj)
		s := substituter{vars: vars, budget: budget}
		*values[i] = s.place(obj, *values[i])
		for _, p := range s.problems {
			problems = append(problems, who+": "+p)
		}
	}
	if problems != nil {
		return nil, problems, nil
	}
	out, err := json.Marshal(tree)
	if err != nil {
		return nil, nil, err
	}
	return out, nil, nil
}

// substituteObject substitutes vars in one object's YAML node, in place,
// as kustomize holds it, unless the object is annotated to be left as it
// is; the problems name the object.
func substituteObject(obj *yamlv3.Node, vars map[string]string, budget *substituteBudget) []string {
	if !hasVariable(obj) || disabled(obj) {
		return nil
	}
	who := describeNode(obj)
	s := substituter{vars: vars, budget: budget}
	s.walk(obj)
	out := make([]string, 0, len(s.problems))
	for _, p := range s.problems {
		out = append(out, who+": "+p)
	}
	return out
}

// hasVariable reports whether any scalar under n holds "${", through
// aliases too.
func hasVariable(n *yamlv3.Node) bool {
	switch n.Kind {
	case yamlv3.ScalarNode:
		return strings.Contains(n.Value, "${")
	case yamlv3.AliasNode:
		return n.Alias != nil && hasVariable(n.Alias)
	}
	return slices.ContainsFunc(n.Content, hasVariable)
}

// listItems is the items of a List document, or nil for an object.
func listItems(n *yamlv3.Node) *yamlv3.Node {
	kind := mapValue(n, "kind")
	if kind == nil || !strings.HasSuffix(kind.Value, "List") {
		return nil
	}
	if items := mapValue(n, "items"); items != nil && items.Kind == yamlv3.SequenceNode {
		return items
	}
	return nil
}

// mapValue is the value of key in mapping n, or nil.
func mapValue(n *yamlv3.Node, key string) *yamlv3.Node {
	if n == nil || n.Kind != yamlv3.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// disabled reports whether an object is labelled or annotated to be left
// as it is: Flux reads the label and the annotation alike, and a folder
// moved from Flux may use either.
func disabled(obj *yamlv3.Node) bool {
	meta := mapValue(obj, "metadata")
	for _, field := range []string{"labels", "annotations"} {
		for _, key := range []string{FluxSubstituteAnnotation, SubstituteAnnotation} {
			if v := mapValue(mapValue(meta, field), key); v != nil && strings.EqualFold(v.Value, SubstituteDisabled) {
				return true
			}
		}
	}
	return false
}

// describeNode names an object as a problem quotes it: its kind, and
// namespace/name as they are written, variables and all.
func describeNode(obj *yamlv3.Node) string {
	value := func(n *yamlv3.Node) string {
		if n == nil {
			return ""
		}
		return n.Value
	}
	meta := mapValue(obj, "metadata")
	name := value(mapValue(meta, "name"))
	if ns := value(mapValue(meta, "namespace")); ns != "" {
		name = ns + "/" + name
	}
	return strings.TrimSpace(value(mapValue(obj, "kind")) + " " + name)
}

// substituter substitutes one object's scalars, keys and values, and
// gathers its problems, each once.
type substituter struct {
	vars     map[string]string
	budget   *substituteBudget
	problems []string
	seen     map[string]bool
}

func (s *substituter) problem(p string) {
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	if !s.seen[p] {
		s.seen[p] = true
		s.problems = append(s.problems, p)
	}
}

// scalar is the text of a scalar with its variables substituted, and
// whether it changed.
func (s *substituter) scalar(n *yamlv3.Node) (string, bool) {
	if !strings.Contains(n.Value, "${") {
		return n.Value, false
	}
	out, problems := expand(n.Value, s.vars, s.budget)
	for _, p := range problems {
		s.problem(p)
	}
	return out, problems == nil && out != n.Value
}

// walk substitutes the scalars under n in place, as kustomize's objects
// are held. A scalar written without quotes takes the type its new text
// has as a plain folder reads it (resolvePlain), so that a folder gives
// the same objects built with kustomize or not.
func (s *substituter) walk(n *yamlv3.Node) {
	switch n.Kind {
	case yamlv3.DocumentNode, yamlv3.SequenceNode:
		for _, c := range n.Content {
			s.walk(c)
		}
	case yamlv3.MappingNode:
		for i, c := range n.Content {
			if i%2 == 0 && c.Kind == yamlv3.ScalarNode {
				// NOTE: a key stays a string, whatever its new text.
				if out, changed := s.scalar(c); changed {
					c.Value, c.Tag = out, "!!str"
				}
				continue
			}
			s.walk(c)
		}
		s.uniqueKeys(n)
	case yamlv3.ScalarNode:
		out, changed := s.scalar(n)
		if !changed {
			return
		}
		n.Value = out
		if unquoted(n) {
			n.Tag, n.Value = plainTag(out)
		}
	}
	// NOTE: an alias repeats its anchor's node, which the walk reaches
	// where it is written.
}

// uniqueKeys finds two keys of a mapping that the substitution made one.
func (s *substituter) uniqueKeys(n *yamlv3.Node) {
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		if seen[k] {
			s.problem(fmt.Sprintf("two keys are %q once substituted: a variable in a key may not name a key that is there", k))
		}
		seen[k] = true
	}
}

// place substitutes the scalars under n into v, what the plain reading
// (sigs.k8s.io/yaml) made of n, and returns v. A value that held no
// variable is left as that reading made it.
func (s *substituter) place(n *yamlv3.Node, v any) any {
	switch n.Kind {
	case yamlv3.AliasNode:
		return s.place(n.Alias, v)
	case yamlv3.SequenceNode:
		list, ok := v.([]any)
		if !ok || len(list) != len(n.Content) {
			s.problem("a list cannot be read the same way twice")
			return v
		}
		for i, item := range n.Content {
			list[i] = s.place(item, list[i])
		}
		return list
	case yamlv3.MappingNode:
		m, ok := v.(map[string]any)
		if !ok {
			s.problem("a mapping cannot be read the same way twice")
			return v
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Value == "<<" {
				if hasVariable(val) {
					s.problem("a YAML merge key (<<) holds a variable, which Capstan does not substitute: write the values out")
				}
				continue
			}
			key, found := plainKey(k, m)
			if !found {
				if hasVariable(k) || hasVariable(val) {
					s.problem(fmt.Sprintf("the key %q cannot be read the same way twice", k.Value))
				}
				continue
			}
			m[key] = s.place(val, m[key])
			if newKey, changed := s.scalar(k); changed && k.Kind == yamlv3.ScalarNode {
				if _, taken := m[newKey]; taken {
					s.problem(fmt.Sprintf("two keys are %q once substituted: a variable in a key may not name a key that is there", newKey))
					continue
				}
				m[newKey] = m[key]
				delete(m, key)
			}
		}
		return m
	case yamlv3.ScalarNode:
		out, changed := s.scalar(n)
		if !changed {
			return v
		}
		if !unquoted(n) {
			return out
		}
		return resolvePlain(out)
	}
	return v
}

// plainKey is the key the plain reading made of the key node k in m: its
// text, or the text of what YAML 1.1 reads it as (on is true).
func plainKey(k *yamlv3.Node, m map[string]any) (string, bool) {
	if _, ok := m[k.Value]; ok {
		return k.Value, true
	}
	if unquoted(k) {
		var read any
		if yaml.Unmarshal([]byte(k.Value), &read) == nil {
			var key string
			switch read := read.(type) {
			case bool:
				key = strconv.FormatBool(read)
			case float64:
				key = strconv.FormatFloat(read, 'f', -1, 64)
			case nil:
				key = "null"
			default:
				key = fmt.Sprint(read)
			}
			if _, ok := m[key]; ok {
				return key, true
			}
		}
	}
	return "", false
}

// unquoted reports whether a scalar was written plain: no quotes, no block
// and no tag.
func unquoted(n *yamlv3.Node) bool {
	return n.Style&(yamlv3.SingleQuotedStyle|yamlv3.DoubleQuotedStyle|yamlv3.LiteralStyle|yamlv3.FoldedStyle|yamlv3.TaggedStyle) == 0
}

// resolvePlain is what the plain reading makes of text written without
// quotes: a number, true or false, null, or the text itself. Text that
// would read as a list or a mapping stays text: a value never adds a
// field.
func resolvePlain(text string) any {
	if text == "" {
		return nil
	}
	if strings.ContainsAny(text, "\n\r") {
		return text
	}
	j, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		return text
	}
	read, err := decodeNumbers(j)
	if err != nil {
		return text
	}
	switch read.(type) {
	case map[string]any, []any, string:
		return text
	case nil:
		// NOTE: "#alerts" reads as a comment, so as nothing; only a word
		// of null is null.
		if !nullWords[text] {
			return text
		}
	}
	return read
}

// plainTag is the tag and the text of a scalar node that reads as
// resolvePlain reads text.
//
// NOTE: kyaml reads an untagged scalar by YAML 1.2, where yes and on are
// text and 2024-01-02 a timestamp; the plain folders and Flux read YAML
// 1.1, where yes is true and a date stays text. A substituted scalar is
// tagged as YAML 1.1 reads it, so that a folder moved from Flux keeps its
// types whether kustomize builds it or not.
func plainTag(text string) (string, string) {
	switch v := resolvePlain(text).(type) {
	case nil:
		return "!!null", text
	case bool:
		return "!!bool", strconv.FormatBool(v)
	case json.Number:
		if strings.ContainsAny(v.String(), ".eE") {
			return "!!float", v.String()
		}
		return "!!int", v.String()
	}
	return "!!str", text
}

// nullWords are the plain scalars YAML reads as null.
var nullWords = map[string]bool{"~": true, "null": true, "Null": true, "NULL": true}

// decodeNumbers decodes JSON keeping each number as it is written, so
// that a large integer keeps every digit.
func decodeNumbers(j []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// expand substitutes one string: ${name}, ${name:=default} and
// ${name:-default} (the default when name is not set or empty),
// ${name=default} and ${name-default} (the default when name is not set),
// and $${ for a literal ${. $name without braces is left as it is. Each
// value written is taken from budget, and a value that does not fit stops
// the expansion. It returns the problems instead when there are any.
func expand(text string, vars map[string]string, budget *substituteBudget) (string, []string) {
	var b strings.Builder
	var problems []string
	for {
		i := strings.Index(text, "${")
		if i < 0 {
			b.WriteString(text)
			break
		}
		if i > 0 && text[i-1] == '$' {
			// $${: a literal ${.
			b.WriteString(text[:i-1])
			b.WriteString("${")
			text = text[i+2:]
			continue
		}
		b.WriteString(text[:i])
		end := strings.IndexByte(text[i:], '}')
		if end < 0 {
			problems = append(problems, fmt.Sprintf("%s has no closing brace", quoteExpr(text[i:])))
			break
		}
		expr := text[i : i+end+1]
		text = text[i+end+1:]
		v, problem := evaluate(expr, vars)
		if problem != "" {
			problems = append(problems, problem)
			continue
		}
		if !budget.take(len(v)) {
			name := expr[2 : 2+nameLength(expr[2:])]
			problems = append(problems, fmt.Sprintf("${%s} (%d bytes) would make the variables' values written into the render more than %d MiB, the bound of a render",
				name, len(v), maxSubstituted>>20))
			break
		}
		b.WriteString(v)
	}
	if problems != nil {
		return "", problems
	}
	return b.String(), nil
}

// evaluate is one expression's value, expr being "${" … "}", or the
// problem with it.
func evaluate(expr string, vars map[string]string) (string, string) {
	inner := expr[2 : len(expr)-1]
	n := nameLength(inner)
	if n == 0 {
		return "", fmt.Sprintf("%s is not a variable Capstan substitutes (${name}, ${name:=default}, ${name:-default})", quoteExpr(expr))
	}
	name, op := inner[:n], inner[n:]
	v, set := vars[name]
	if op == "" {
		if !set {
			return "", fmt.Sprintf("${%s} is not defined", name)
		}
		return v, ""
	}
	// NOTE: with a colon, an empty value takes the default too.
	rest, orEmpty := strings.CutPrefix(op, ":")
	if rest == "" || rest[0] != '=' && rest[0] != '-' {
		return "", fmt.Sprintf("%s is not a variable Capstan substitutes (${name}, ${name:=default}, ${name:-default})", quoteExpr(expr))
	}
	if def := rest[1:]; strings.Contains(def, "${") {
		return "", fmt.Sprintf("%s nests a variable in a default, which Capstan does not substitute", quoteExpr(expr))
	} else if !set || orEmpty && v == "" {
		return def, ""
	}
	return v, ""
}

// nameLength is the length of the variable name that s starts with:
// letters, digits and underscores, not starting with a digit.
func nameLength(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return i
		}
	}
	return len(s)
}

// VariableValue is the text a variable's value substitutes: the value
// with every newline removed, as Flux reads spec.substitute and the data
// of a ConfigMap or a Secret. A Secret made with kubectl create secret
// --from-file ends its value with a newline, which would otherwise land
// inside a URL or a host name.
func VariableValue(v string) string {
	return strings.ReplaceAll(v, "\n", "")
}

// IsVariableName reports whether name can be a variable: letters, digits
// and underscores, not starting with a digit.
func IsVariableName(name string) bool {
	return name != "" && nameLength(name) == len(name)
}

// quoteExpr quotes an expression for a problem, cut to one short line.
func quoteExpr(expr string) string {
	if i := strings.IndexByte(expr, '\n'); i >= 0 {
		expr = expr[:i] + "…"
	}
	if len(expr) > 60 {
		cut := 60
		for cut > 0 && !utf8.RuneStart(expr[cut]) {
			cut--
		}
		expr = expr[:cut] + "…"
	}
	return expr
}

// substitutePostRender substitutes vars in the patches (their bodies and
// targets) and the images of p, as a Flux Kustomization's patches and
// images are substituted with the objects they are built into: the
// objects are substituted before the patches select them, so a target or
// an image name written with variables is substituted too. It returns p
// itself when vars is nil, and a copy otherwise.
func substitutePostRender(p *PostRender, vars map[string]string, budget *substituteBudget) (*PostRender, error) {
	if vars == nil || p.Empty() {
		return p, nil
	}
	out := &PostRender{Patches: slices.Clone(p.Patches), Images: slices.Clone(p.Images)}
	var problems []string
	field := func(where string, text *string) {
		v, found := expand(*text, vars, budget)
		for _, pr := range found {
			problems = append(problems, where+": "+pr)
		}
		if found == nil {
			*text = v
		}
	}
	for i := range out.Patches {
		where := fmt.Sprintf("spec.patches[%d]", i)
		if t := out.Patches[i].Target; t != nil {
			sel := *t
			for _, f := range []*string{&sel.Group, &sel.Version, &sel.Kind, &sel.Name, &sel.Namespace, &sel.LabelSelector, &sel.AnnotationSelector} {
				field(where+".target", f)
			}
			out.Patches[i].Target = &sel
		}
		text := out.Patches[i].Patch
		if !strings.Contains(text, "${") {
			continue
		}
		// NOTE: every document: one patch may hold several strategic
		// merge patches, and each is substituted and kept.
		docs, err := patchDocuments(text)
		if err != nil {
			// NOTE: Check refuses it with its reason, after this.
			continue
		}
		var written []string
		for j, doc := range docs {
			at := where
			if len(docs) > 1 {
				at = fmt.Sprintf("%s (document %d)", where, j+1)
			}
			s := substituter{vars: vars, budget: budget}
			s.walk(doc.node)
			for _, pr := range s.problems {
				problems = append(problems, at+": "+pr)
			}
			// NOTE: yaml.v3 writes some folded scalars back wrong; as
			// literal blocks they keep their text.
			literalBlocks(doc.node)
			data, err := yamlv3.Marshal(doc.node)
			if err != nil {
				return nil, fmt.Errorf("render: substitute %s: %w", at, err)
			}
			written = append(written, string(data))
		}
		if problems == nil {
			out.Patches[i].Patch = strings.Join(written, "---\n")
		}
	}
	for i := range out.Images {
		img := &out.Images[i]
		for _, f := range []*string{&img.Name, &img.NewName, &img.NewTag, &img.Digest} {
			field(fmt.Sprintf("spec.images[%d]", i), f)
		}
	}
	if problems != nil {
		return nil, budget.failed(problems)
	}
	return out, nil
}

// literalBlocks writes every folded block scalar under n as a literal
// one, which holds the same text.
func literalBlocks(n *yamlv3.Node) {
	if n.Kind == yamlv3.ScalarNode && n.Style&yamlv3.FoldedStyle != 0 {
		n.Style = n.Style&^yamlv3.FoldedStyle | yamlv3.LiteralStyle
	}
	for _, c := range n.Content {
		literalBlocks(c)
	}
}
