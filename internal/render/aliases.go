package render

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// MaxAliasNodes bounds the YAML nodes that anchors and aliases add to the
// files of one folder's render when every alias is expanded. A folder's
// files are read in the controller, not in the render worker, and
// kustomize expands every alias of every file it reads with no bound: a
// few hundred bytes of aliases nested nine deep stand for some 700,000 nodes,
// which took kustomize most of a minute and gigabytes of memory.
//
// NOTE: aliases are bounded rather than refused, unlike in SOPS files and
// patches: folders written by hand reuse a block of environment variables
// or labels with anchors (and merge keys, <<: *defaults), and those add a
// few hundred nodes. Ten thousand is far above that and costs kustomize a
// fraction of a second.
const MaxAliasNodes = 10000

// aliasBudget counts, over one render, the nodes that the aliases of the
// files it reads add when they are expanded.
type aliasBudget struct {
	added int64
}

// take counts the aliases of data, the file name, and refuses it when they
// take the render past MaxAliasNodes, or when an alias lies inside the
// anchor it names, which would expand without end. A file that is not
// YAML is not counted: whatever reads it as YAML refuses it itself.
func (b *aliasBudget) take(name string, data []byte) error {
	// NOTE: a file with no anchor or no alias has nothing to expand; most
	// files are passed over without being parsed.
	if !bytes.Contains(data, []byte("&")) || !bytes.Contains(data, []byte("*")) {
		return nil
	}
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	for {
		var doc yamlv3.Node
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			// Not YAML: not counted, see above.
			return nil
		}
		literal := countNodes(&doc)
		limit := literal + MaxAliasNodes - b.added
		expanded, err := expandedNodes(&doc, limit, map[*yamlv3.Node]int64{}, map[*yamlv3.Node]bool{})
		if err != nil {
			return fmt.Errorf("%s: %w: remove that alias", name, err)
		}
		if b.added += expanded - literal; b.added > MaxAliasNodes {
			return fmt.Errorf("%s: its YAML aliases take the folder past %d nodes once expanded, which Capstan refuses because a few nested aliases "+
				"can expand to gigabytes: write the repeated parts out in full, or share them with a kustomize component or patch", name, MaxAliasNodes)
		}
	}
}

// countNodes returns the nodes of n as written, each alias one node.
func countNodes(n *yamlv3.Node) int64 {
	c := int64(1)
	for _, child := range n.Content {
		c += countNodes(child)
	}
	return c
}

// expandedNodes returns the nodes n stands for with every alias in it
// replaced by what it names, or a number above limit once it passes limit.
// sizes holds the nodes already counted, so that each is counted once
// however often it is named; open holds the nodes being counted, so that
// an alias inside its own anchor is found.
func expandedNodes(n *yamlv3.Node, limit int64, sizes map[*yamlv3.Node]int64, open map[*yamlv3.Node]bool) (int64, error) {
	if n.Kind == yamlv3.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if s, ok := sizes[n]; ok {
		return s, nil
	}
	if open[n] {
		return 0, fmt.Errorf("an alias to the anchor &%s lies inside that anchor, so it expands without end", n.Anchor)
	}
	open[n] = true
	defer delete(open, n)
	total := int64(1)
	for _, child := range n.Content {
		s, err := expandedNodes(child, limit, sizes, open)
		if err != nil {
			return 0, err
		}
		if total += s; total > limit {
			total = limit + 1
			break
		}
	}
	sizes[n] = total
	return total, nil
}

// aliasBoundFS is kustomize's file system with each file it reads counted
// against budget before kustomize expands its aliases: only the files the
// build reaches count, each as often as it is read.
type aliasBoundFS struct {
	filesys.FileSystem
	budget *aliasBudget
}

func (a aliasBoundFS) ReadFile(name string) ([]byte, error) {
	data, err := a.FileSystem.ReadFile(name)
	if err != nil {
		return nil, err
	}
	if err := a.budget.take(strings.TrimPrefix(name, "/"), data); err != nil {
		return nil, err
	}
	return data, nil
}
