package gitops

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ValueChange is one change to a definition's values: the value at Path is
// set to To, or removed when Remove.
type ValueChange struct {
	// Path is the keys from the top of the values to the value.
	Path []string
	// From is the value the change was made from; Had is false when there
	// was none.
	From any
	Had  bool
	// To is the new value, unless Remove.
	To     any
	Remove bool
}

// String is the change's path as people read it, such as values.a.b.
func (c ValueChange) String() string { return "values." + strings.Join(c.Path, ".") }

// ValueChanges lists the changes that turn the values from into to, one
// per leaf path that differs, in the order of their paths: a map in both
// is compared key by key, and anything else is set whole.
func ValueChanges(from, to map[string]any) []ValueChange {
	var out []ValueChange
	var walk func(prefix []string, from, to map[string]any)
	walk = func(prefix []string, from, to map[string]any) {
		for k, t := range to {
			path := append(append([]string(nil), prefix...), k)
			f, had := from[k]
			fm, fromMap := f.(map[string]any)
			tm, toMap := t.(map[string]any)
			switch {
			case had && SameValue(f, t):
			case had && fromMap && toMap:
				walk(path, fm, tm)
			default:
				out = append(out, ValueChange{Path: path, From: f, Had: had, To: t})
			}
		}
		for k, f := range from {
			if _, ok := to[k]; !ok {
				out = append(out, ValueChange{Path: append(append([]string(nil), prefix...), k), From: f, Had: true, Remove: true})
			}
		}
	}
	walk(nil, from, to)
	sort.Slice(out, func(i, j int) bool { return strings.Join(out[i].Path, "\x00") < strings.Join(out[j].Path, "\x00") })
	return out
}

// ValuesConflictError is a change of values whose path holds, in git,
// another value than the one the change was made from: someone changed it
// in git since, or the Addon in the cluster has not caught up with git
// yet. Nothing was committed.
type ValuesConflictError struct {
	// File is the definition's path.
	File string
	// Path is the value's path, such as values.replicas.
	Path string
}

// Error says what happened and what to do.
func (e *ValuesConflictError) Error() string {
	return fmt.Sprintf("conflict: %s in %s is not what the change was made from: it changed in git since (the Addon in the cluster may not have caught up with git yet); nothing was committed: wait for the syncer, read the values again and make the change again", e.Path, e.File)
}

// ChangeValues commits changes to the values of a definition, each onto
// the values at the branch's head, keeping every other value, the order of
// the keys and the comments. A change whose path does not hold, in git,
// the value it was made from is a ValuesConflictError, unless git already
// holds what it asks for; nothing is committed then.
func (w *Writer) ChangeValues(ctx context.Context, name string, changes []ValueChange) (string, error) {
	return w.change(ctx, name, "Set values of", func(file string, cur []byte, exists bool) ([]byte, bool, error) {
		doc, err := definitionDoc(file, cur, exists)
		if err != nil {
			return nil, false, err
		}
		top := doc.Content[0]
		values := mappingValue(top, "values")
		switch {
		case values == nil:
			values = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		case values.Kind == yaml.ScalarNode && values.Tag == "!!null":
			removeKey(top, "values")
			values = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		case values.Kind != yaml.MappingNode:
			return nil, false, fmt.Errorf("values in %s is not a map (an alias, say): change it in git", file)
		}
		changed := false
		for _, c := range changes {
			did, err := applyValueChange(values, c)
			if err != nil {
				if conflict, ok := err.(*ValuesConflictError); ok {
					conflict.File = file
				}
				return nil, false, err
			}
			changed = changed || did
		}
		if !changed {
			return cur, true, nil
		}
		switch {
		case len(values.Content) == 0:
			removeKey(top, "values")
		case mappingValue(top, "values") == nil:
			top.Content = append(top.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "values"}, values)
		}
		out, err := encodeYAML(doc)
		if err != nil {
			return nil, false, err
		}
		if _, err := Parse(file, out); err != nil {
			return nil, false, err
		}
		return out, true, nil
	})
}

// applyValueChange makes one change to the values node, and says whether
// it changed anything.
func applyValueChange(values *yaml.Node, c ValueChange) (bool, error) {
	conflict := &ValuesConflictError{Path: c.String()}
	now, has, err := valueAt(values, c.Path)
	if err != nil {
		return false, conflict
	}
	switch {
	case c.Remove && !has, !c.Remove && has && SameValue(now, c.To):
		// NOTE: git holds what the change asks for already: someone made
		// the same change, or the cluster lags a commit that made it.
		return false, nil
	case has != c.Had || (has && !SameValue(now, c.From)):
		return false, conflict
	}
	parent := values
	last := len(c.Path) - 1
	for _, k := range c.Path[:last] {
		next := mappingValue(parent, k)
		if next == nil {
			next = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			parent.Content = append(parent.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, next)
		}
		if next.Kind != yaml.MappingNode {
			return false, conflict
		}
		parent = next
	}
	if c.Remove {
		removeKey(parent, c.Path[last])
		return true, nil
	}
	node := &yaml.Node{}
	if err := node.Encode(c.To); err != nil {
		return false, fmt.Errorf("%s cannot be written as YAML: %w", c, err)
	}
	for i := 0; i+1 < len(parent.Content); i += 2 {
		if parent.Content[i].Value == c.Path[last] {
			old := parent.Content[i+1]
			node.LineComment, node.FootComment = old.LineComment, old.FootComment
			if node.Kind == old.Kind {
				node.HeadComment = old.HeadComment
			}
			parent.Content[i+1] = node
			return true, nil
		}
	}
	parent.Content = append(parent.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: c.Path[last]}, node)
	return true, nil
}

// valueAt decodes the value at path under the mapping node m; has is false
// when there is none. A path through something that is not a mapping (a
// list, a scalar, an alias) is an error.
func valueAt(m *yaml.Node, path []string) (v any, has bool, err error) {
	for _, k := range path {
		if m.Kind != yaml.MappingNode {
			return nil, false, fmt.Errorf("not a map")
		}
		m = mappingValue(m, k)
		if m == nil {
			return nil, false, nil
		}
	}
	if err := m.Decode(&v); err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// mappingValue is the value of key in the mapping node m, or nil.
func mappingValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// removeKey removes key and its value from the mapping node m.
func removeKey(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}

// SameValue says whether a and b are the same JSON value: 3 read from
// YAML is the 3.0 that an Addon's spec.values reads, and an int64 from a
// form is the float64 it reads.
func SameValue(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}
