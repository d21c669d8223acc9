package gitops

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"reflect"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Parse reads one definition file strictly. file is the file's path in the
// repository (such as addons/longhorn.yaml): the definition's name must equal
// its base name. Every problem is reported with its line in an *InvalidError;
// the definition is returned only when there is none.
func Parse(file string, data []byte) (*Definition, error) {
	invalid := &InvalidError{File: file}
	fail := func(line int, field, format string, args ...any) (*Definition, error) {
		invalid.Problems = append(invalid.Problems, Problem{Line: line, Field: field, Message: fmt.Sprintf(format, args...)})
		return nil, invalid
	}
	if len(data) > MaxFileSize {
		return fail(0, "", "the file is %d bytes, more than the limit of %d: a definition is a short YAML file", len(data), MaxFileSize)
	}
	if !utf8.Valid(data) {
		return fail(lineOfInvalidUTF8(data), "", "the file is not valid UTF-8: save it as UTF-8")
	}

	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return fail(0, "", "the file is empty: write a definition with at least name and a source (helm or git)")
		}
		line, msg := yamlErrorLine(err)
		return fail(line, "", "this is not valid YAML: %s", msg)
	}
	for {
		var extra yaml.Node
		err := dec.Decode(&extra)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			line, msg := yamlErrorLine(err)
			return fail(line, "", "this is not valid YAML: %s", msg)
		}
		// NOTE: a trailing --- (editors and generators leave one) starts
		// a document that holds nothing, which kubectl, kustomize and
		// the git hosts ignore; only a second document with content is
		// a second definition.
		if !isEmptyDocument(&extra) {
			return fail(extra.Line, "", "the file holds more than one YAML document: keep one definition per file")
		}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if p := findAlias(root); p != nil {
		invalid.Problems = append(invalid.Problems, *p)
		return nil, invalid
	}
	if root.Kind != yaml.MappingNode {
		return fail(root.Line, "", "the file holds %s, but a definition is a mapping of fields such as name: and helm:", kindName(root))
	}

	def := &Definition{}
	d := &decoder{}
	d.decode(root, reflect.ValueOf(def).Elem(), "")
	invalid.Problems = append(invalid.Problems, d.problems...)
	if len(d.problems) == 0 && d.more == 0 {
		invalid.Problems = append(invalid.Problems, validate(def, root, file)...)
	}
	invalid.Problems = capProblems(invalid.Problems, d.more)
	if len(invalid.Problems) > 0 {
		return nil, invalid
	}
	def.gitPathLine = lineOf(root, "git", "path")
	return def, nil
}

// isEmptyDocument reports whether a YAML document holds nothing at all: no
// value, not even an explicit null.
func isEmptyDocument(doc *yaml.Node) bool {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return false
	}
	n := doc.Content[0]
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null" && n.Value == "" && n.Style == 0 && n.Anchor == ""
}

// NameFromFile returns the add-on name a definition file must declare: its
// base name without .yaml or .yml.
func NameFromFile(file string) string {
	base := path.Base(file)
	for _, ext := range []string{".yaml", ".yml"} {
		if strings.HasSuffix(base, ext) {
			return strings.TrimSuffix(base, ext)
		}
	}
	return base
}

// IsDefinitionFile reports whether a file name in the definitions folder is a
// definition: a .yaml or .yml file that is not hidden.
func IsDefinitionFile(name string) bool {
	base := path.Base(name)
	return !strings.HasPrefix(base, ".") && (strings.HasSuffix(base, ".yaml") || strings.HasSuffix(base, ".yml"))
}

// findAlias refuses anchors and aliases. Definitions never need them, and a
// few aliases can expand into gigabytes (the "billion laughs").
func findAlias(n *yaml.Node) *Problem {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return &Problem{Line: n.Line, Message: "YAML anchors and aliases (& and *) are not allowed in definitions: write the values out"}
	}
	for _, c := range n.Content {
		if p := findAlias(c); p != nil {
			return p
		}
	}
	return nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing (null)"
		}
		return "a single value"
	default:
		return "an alias"
	}
}

// yamlErrorLine pulls the line out of a go-yaml error such as "yaml: line 3:
// mapping values are not allowed in this context".
func yamlErrorLine(err error) (int, string) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var line int
	if n, _ := fmt.Sscanf(msg, "line %d:", &line); n == 1 {
		if i := strings.Index(msg, ":"); i >= 0 {
			msg = strings.TrimSpace(msg[i+1:])
		}
	}
	return line, msg
}

func lineOfInvalidUTF8(data []byte) int {
	line := 1
	for len(data) > 0 {
		r, size := utf8.DecodeRune(data)
		if r == utf8.RuneError && size <= 1 {
			return line
		}
		if r == '\n' {
			line++
		}
		data = data[size:]
	}
	return line
}

// maxProblems bounds the problems reported for one file. A file is fixed
// from its first mistakes, and the whole message is kept in the
// AddonRepository's status and in the syncer's memory: a file of a hundred
// thousand unknown keys must not make a message of megabytes.
const maxProblems = 20

// moreProblems is the message of the last problem of a file that has more
// than maxProblems: how many were left out.
const moreProblems = "and %d more problems"

// capProblems keeps the first maxProblems problems and counts the rest, with
// more that were never kept, in one last problem.
func capProblems(ps []Problem, more int) []Problem {
	if len(ps) > maxProblems {
		more += len(ps) - maxProblems
		ps = ps[:maxProblems]
	}
	if more > 0 {
		ps = append(ps, Problem{Message: fmt.Sprintf(moreProblems, more)})
	}
	return ps
}

// ProblemsLeftOut reads the last line of an invalid file's message: the
// number of problems Parse left out of it, and whether the line says so.
// The status of an AddonRepository lists fewer problems still, and adds
// this number to those it leaves out.
func ProblemsLeftOut(file, line string) (int, bool) {
	rest, ok := strings.CutPrefix(line, file+": ")
	if !ok {
		return 0, false
	}
	var n int
	if k, err := fmt.Sscanf(rest, moreProblems, &n); err != nil || k != 1 || fmt.Sprintf(moreProblems, n) != rest {
		return 0, false
	}
	return n, true
}

// decoder fills a Go value from a YAML node strictly: unknown fields,
// duplicate fields and wrong types are problems with their lines.
type decoder struct {
	problems []Problem
	// more counts the problems past maxProblems, which are not kept.
	more int
	// listed holds, for each struct type whose fields an unknown-field
	// problem has named, the line of that problem: the list is named once
	// per file, and later problems point to it.
	listed map[reflect.Type]int
}

func (d *decoder) add(n *yaml.Node, field, format string, args ...any) {
	if len(d.problems) >= maxProblems {
		d.more++
		return
	}
	d.problems = append(d.problems, Problem{Line: n.Line, Field: field, Message: fmt.Sprintf(format, args...)})
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

var anyMapType = reflect.TypeFor[map[string]any]()

// stringMapType is a mapping of names to strings, such as substitute.
var stringMapType = reflect.TypeFor[map[string]string]()

func (d *decoder) decode(n *yaml.Node, v reflect.Value, field string) {
	if isNull(n) {
		return // null leaves the zero value: "helm:" with nothing is no helm.
	}
	switch {
	case v.Type() == anyMapType:
		if n.Kind != yaml.MappingNode {
			d.add(n, field, "must be a mapping of values, not %s", kindName(n))
			return
		}
		if m, ok := d.value(n, field).(map[string]any); ok {
			v.Set(reflect.ValueOf(m))
		}
	case v.Type() == stringMapType:
		if n.Kind != yaml.MappingNode {
			d.add(n, field, "must be a mapping of names to strings, not %s", kindName(n))
			return
		}
		m := make(map[string]string, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			if key.Kind != yaml.ScalarNode {
				d.add(key, field, "a name must be a plain word, not %s", kindName(key))
				continue
			}
			if val.Kind != yaml.ScalarNode || val.Tag != "!!str" {
				d.add(val, field+"."+key.Value, "must be a string, not %s; quote it", describe(val))
				continue
			}
			m[key.Value] = val.Value
		}
		v.Set(reflect.ValueOf(m))
	case v.Kind() == reflect.Pointer:
		elem := reflect.New(v.Type().Elem())
		d.decode(n, elem.Elem(), field)
		v.Set(elem)
	case v.Kind() == reflect.Struct:
		d.decodeStruct(n, v, field)
	case v.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.add(n, field, "must be a list, not %s", kindName(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.decode(c, s.Index(i), fmt.Sprintf("%s[%d]", field, i))
		}
		v.Set(s)
	case v.Kind() == reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			d.add(n, field, "must be a string, not %s; quote it if it is meant as text", describe(n))
			return
		}
		v.SetString(n.Value)
	case v.Kind() == reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
			d.add(n, field, "must be true or false, not %s", describe(n))
			return
		}
		v.SetBool(b)
	default:
		// Every exported field of Definition has a case above; this is
		// reached only if a new field's type is forgotten, and a definition
		// must then be refused, not crash the syncer or the server.
		d.add(n, field, "Capstan cannot read this field (no decoder for %s): report this as a bug", v.Type())
	}
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, field string) {
	if n.Kind != yaml.MappingNode {
		d.add(n, field, "must be a mapping of fields, not %s", kindName(n))
		return
	}
	t := v.Type()
	byName := map[string]int{}
	var names []string
	for i := range t.NumField() {
		if !t.Field(i).IsExported() {
			continue // such as Definition.gitPathLine: Capstan's own, never a key.
		}
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		byName[name] = i
		names = append(names, name)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		if key.Kind != yaml.ScalarNode {
			d.add(key, field, "a field name must be a plain word, not %s", kindName(key))
			continue
		}
		idx, ok := byName[key.Value]
		if !ok {
			d.unknown(key, join(field, truncate(key.Value, 64)), t, names)
			continue
		}
		if seen[key.Value] {
			d.add(key, join(field, key.Value), "the field appears twice: keep one")
			continue
		}
		seen[key.Value] = true
		d.decode(val, v.Field(idx), join(field, key.Value))
	}
}

// unknown reports an unknown field. The first one of a kind of mapping names
// the fields it may hold; the later ones point to that line.
func (d *decoder) unknown(key *yaml.Node, field string, t reflect.Type, names []string) {
	if line, ok := d.listed[t]; ok {
		d.add(key, field, "unknown field; the fields here are listed at line %d", line)
		return
	}
	if d.listed == nil {
		d.listed = map[reflect.Type]int{}
	}
	d.listed[t] = key.Line
	d.add(key, field, "unknown field; the fields here are: %s", strings.Join(names, ", "))
}

// value converts free-form YAML (the chart values) into JSON-compatible Go
// values: string keys, and no NaN or infinity.
func (d *decoder) value(n *yaml.Node, field string) any {
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			if key.Kind != yaml.ScalarNode {
				d.add(key, field, "a key must be a plain value, not %s", kindName(key))
				continue
			}
			if _, dup := m[key.Value]; dup {
				d.add(key, join(field, key.Value), "the key appears twice: keep one")
				continue
			}
			m[key.Value] = d.value(val, join(field, key.Value))
		}
		return m
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, c := range n.Content {
			s[i] = d.value(c, fmt.Sprintf("%s[%d]", field, i))
		}
		return s
	case yaml.ScalarNode:
		var x any
		if err := n.Decode(&x); err != nil {
			d.add(n, field, "cannot read the value: %v", err)
			return nil
		}
		switch f := x.(type) {
		case float64:
			if math.IsNaN(f) || math.IsInf(f, 0) {
				d.add(n, field, "NaN and infinity cannot be chart values: quote it if it is meant as text")
				return nil
			}
		case string, bool, int, int64, uint64, nil:
		default:
			// Timestamps and binary data become text, as Helm would see them.
			return n.Value
		}
		return x
	default:
		d.add(n, field, "YAML aliases are not allowed")
		return nil
	}
}

func describe(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode {
		return kindName(n)
	}
	switch n.Tag {
	case "!!int":
		return "the number " + n.Value
	case "!!float":
		return "the number " + n.Value
	case "!!bool":
		return "the boolean " + n.Value
	case "!!str":
		return fmt.Sprintf("the text %q", truncate(n.Value, 40))
	default:
		return "a " + strings.TrimPrefix(n.Tag, "!!")
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
