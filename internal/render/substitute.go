package render

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
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
//     newline or a colon stays inside its string and never adds a field.
//     A scalar written without quotes is read again after the
//     substitution, so replicas: ${count} is a number, as with Flux; one
//     in quotes stays a string.
//   - An expression it does not know (${list[@]}, ${#name}) is an error
//     too, rather than a guess: shell scripts in a ConfigMap are the usual
//     source, and the object is annotated to be left as it is.

// The annotations that leave an object as it is, Flux's and Capstan's,
// with the value SubstituteDisabled.
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
}

func (e *SubstituteError) Error() string {
	list := e.Problems
	more := ""
	if len(list) > maxProblems {
		more = fmt.Sprintf("; and %d more", len(list)-maxProblems)
		list = list[:maxProblems]
	}
	return "render: substitute: " + strings.Join(list, "; ") + more +
		": define each variable in spec.substitute or a spec.substituteFrom object, or give it a default (${name:=default}); " +
		"write a literal ${ as $${; or annotate the object " + FluxSubstituteAnnotation + ": " + SubstituteDisabled + " to leave it as it is"
}

// substituteHash folds the variables into a render hash, so that a
// changed variable is a new render, applied as an upgrade. vars nil (no
// substitution) keeps the hash as it was.
func substituteHash(render string, vars map[string]string) (string, error) {
	if vars == nil {
		return render, nil
	}
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	pairs := make([][2]string, 0, len(keys))
	for _, k := range keys {
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

// substituteDocument substitutes vars in one YAML document, an object or
// a List of them, and returns it encoded again, with the problems found,
// each naming its object. A document with no "${" is returned as it is.
func substituteDocument(doc []byte, vars map[string]string) ([]byte, []string, error) {
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
	top := root.Content[0]
	objects := []*yamlv3.Node{top}
	if items := listItems(top); items != nil {
		objects = items.Content
	}
	var problems []string
	for _, obj := range objects {
		if disabled(obj) {
			continue
		}
		s := substituter{vars: vars, seen: map[string]bool{}}
		s.walk(obj)
		who := describeNode(obj)
		for _, p := range s.problems {
			problems = append(problems, who+": "+p)
		}
	}
	if problems != nil {
		return nil, problems, nil
	}
	out, err := yamlv3.Marshal(&root)
	if err != nil {
		return nil, nil, err
	}
	return out, nil, nil
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

// disabled reports whether an object is annotated to be left as it is.
func disabled(obj *yamlv3.Node) bool {
	annotations := mapValue(mapValue(obj, "metadata"), "annotations")
	for _, key := range []string{FluxSubstituteAnnotation, SubstituteAnnotation} {
		if v := mapValue(annotations, key); v != nil && strings.EqualFold(v.Value, SubstituteDisabled) {
			return true
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
	problems []string
	seen     map[string]bool
}

func (s *substituter) walk(n *yamlv3.Node) {
	switch n.Kind {
	case yamlv3.DocumentNode, yamlv3.SequenceNode, yamlv3.MappingNode:
		for _, c := range n.Content {
			s.walk(c)
		}
	case yamlv3.ScalarNode:
		if !strings.Contains(n.Value, "${") {
			return
		}
		out, problems := expand(n.Value, s.vars)
		for _, p := range problems {
			if !s.seen[p] {
				s.seen[p] = true
				s.problems = append(s.problems, p)
			}
		}
		if problems != nil || out == n.Value {
			return
		}
		n.Value = out
		if n.Style&(yamlv3.SingleQuotedStyle|yamlv3.DoubleQuotedStyle|yamlv3.LiteralStyle|yamlv3.FoldedStyle|yamlv3.TaggedStyle) == 0 {
			// NOTE: a scalar written without quotes takes the type its
			// new text has, as it would had the text been written so.
			n.Tag = ""
		}
	}
	// NOTE: an alias repeats its anchor's node, which the walk reaches
	// where it is written.
}

// expand substitutes one string: ${name}, ${name:=default} and
// ${name:-default} (the default when name is not set or empty),
// ${name=default} and ${name-default} (the default when name is not set),
// and $${ for a literal ${. $name without braces is left as it is. It
// returns the problems instead when there are any.
func expand(text string, vars map[string]string) (string, []string) {
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
	switch {
	case op == "":
		if !set {
			return "", fmt.Sprintf("${%s} is not defined", name)
		}
		return v, ""
	case strings.HasPrefix(op, ":=") || strings.HasPrefix(op, ":-"):
		if strings.Contains(op[2:], "${") {
			return "", fmt.Sprintf("%s nests a variable in a default, which Capstan does not substitute", quoteExpr(expr))
		}
		if !set || v == "" {
			return op[2:], ""
		}
		return v, ""
	case op[0] == '=' || op[0] == '-':
		if strings.Contains(op[1:], "${") {
			return "", fmt.Sprintf("%s nests a variable in a default, which Capstan does not substitute", quoteExpr(expr))
		}
		if !set {
			return op[1:], ""
		}
		return v, ""
	}
	return "", fmt.Sprintf("%s is not a variable Capstan substitutes (${name}, ${name:=default}, ${name:-default})", quoteExpr(expr))
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
		expr = expr[:60] + "…"
	}
	return expr
}

// substitutePostRender substitutes vars in the patches and the images of
// p, as a Flux Kustomization's patches and images are substituted with
// the objects they are built into. It returns p itself when vars is nil
// or nothing changes.
func substitutePostRender(p *PostRender, vars map[string]string) (*PostRender, error) {
	if vars == nil || p.Empty() {
		return p, nil
	}
	out := &PostRender{Patches: slices.Clone(p.Patches), Images: slices.Clone(p.Images)}
	var problems []string
	for i := range out.Patches {
		text := out.Patches[i].Patch
		if !strings.Contains(text, "${") {
			continue
		}
		var root yamlv3.Node
		if err := yamlv3.Unmarshal([]byte(text), &root); err != nil {
			// NOTE: Check refuses it with its reason, after this.
			continue
		}
		s := substituter{vars: vars, seen: map[string]bool{}}
		s.walk(&root)
		for _, pr := range s.problems {
			problems = append(problems, fmt.Sprintf("spec.patches[%d]: %s", i, pr))
		}
		if s.problems != nil {
			continue
		}
		data, err := yamlv3.Marshal(&root)
		if err != nil {
			return nil, fmt.Errorf("render: substitute spec.patches[%d]: %w", i, err)
		}
		out.Patches[i].Patch = string(data)
	}
	for i := range out.Images {
		img := &out.Images[i]
		for _, field := range []*string{&img.NewName, &img.NewTag, &img.Digest} {
			if !strings.Contains(*field, "${") {
				continue
			}
			v, found := expand(*field, vars)
			for _, pr := range found {
				problems = append(problems, fmt.Sprintf("spec.images[%d]: %s", i, pr))
			}
			if found == nil {
				*field = v
			}
		}
	}
	if problems != nil {
		return nil, &SubstituteError{Problems: problems}
	}
	return out, nil
}
