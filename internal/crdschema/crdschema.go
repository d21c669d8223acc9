// Package crdschema ties Capstan's own CRDs to the binary that was built
// with them. `make generate` stamps each generated CRD with the hash of its
// spec (Stamp, run by hack/crdstamp); the controller reads its CRDs from the
// API server at start and refuses to reconcile while their stamp is not the
// one it embeds (Check, Compare).
//
// A controller newer than its CRDs writes through a structural schema that
// prunes the fields it does not know, such as status.preHooksDone or
// status.appliedGeneration, and so loses what it depends on: hooks run
// again, dependencies are judged on a status that is not there. A
// controller older than its CRDs (a rollback) acts on a status it cannot
// read whole. Neither is allowed to run.
package crdschema

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"capstan.dev/capstan/config"
)

// Annotation holds the hash of a CRD's spec as `make generate` wrote it.
const Annotation = "capstan.dev/schema"

// FixCommand applies the CRDs of the chart that is being installed, as
// docs/install.md says for an upgrade with Helm.
const FixCommand = "kubectl apply --server-side --field-manager=helm --force-conflicts -f charts/capstan/crds/"

// fixWithKubectl is the same for an installation made with kubectl.
const fixWithKubectl = "kubectl apply --server-side -k config/default"

// Hash is the stamp of a CRD's spec: "sha256:" and the hex digest of the
// spec as JSON with its keys sorted, so the YAML's layout does not count,
// and without the descriptions of its schemas, which prune nothing: a
// change to a doc comment, or a controller-gen that words them otherwise,
// leaves the stamp as it was and does not hold the controller at start.
func Hash(spec any) (string, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	// NOTE: a round trip through a generic value sorts every key, whatever
	// order the struct or the YAML had.
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return "", err
	}
	if s, ok := generic.(map[string]any); ok {
		versions, _ := s["versions"].([]any)
		for _, v := range versions {
			v, _ := v.(map[string]any)
			schema, _ := v["schema"].(map[string]any)
			stripDescriptions(schema["openAPIV3Schema"])
		}
	}
	canonical, err := json.Marshal(generic)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canonical)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// stripDescriptions removes the keyword description from a JSON schema
// and from every schema within it. It follows only the keywords that hold
// schemas, so a property named description (a key of properties) stays,
// and so does a description inside a default, an example or an enum, which
// are values, not schemas.
func stripDescriptions(node any) {
	schema, ok := node.(map[string]any)
	if !ok {
		return
	}
	delete(schema, "description")
	for key, value := range schema {
		switch key {
		case "properties", "patternProperties", "definitions", "dependencies":
			// Names to schemas (a dependency may be a list of names).
			named, _ := value.(map[string]any)
			for _, sub := range named {
				stripDescriptions(sub)
			}
		case "items", "allOf", "anyOf", "oneOf":
			// A schema, or a list of them.
			if list, ok := value.([]any); ok {
				for _, sub := range list {
					stripDescriptions(sub)
				}
				continue
			}
			stripDescriptions(value)
		case "additionalProperties", "additionalItems", "not":
			stripDescriptions(value) // a schema, or a bool
		}
	}
}

// Stamp returns a CRD's YAML, as controller-gen wrote it, with Annotation
// set to the hash of its spec. The rest of the file is left byte for
// byte: the annotation is one line among metadata.annotations, where
// controller-gen always writes its own version.
func Stamp(doc []byte) ([]byte, error) {
	var crd struct {
		Spec any `json:"spec"`
	}
	if err := yaml.Unmarshal(doc, &crd); err != nil {
		return nil, err
	}
	if crd.Spec == nil {
		return nil, fmt.Errorf("no spec: not a CustomResourceDefinition")
	}
	hash, err := Hash(crd.Spec)
	if err != nil {
		return nil, err
	}
	lines := strings.SplitAfter(string(doc), "\n")
	var out strings.Builder
	stamped := false
	for i, line := range lines {
		if strings.HasPrefix(line, "    "+Annotation+":") {
			continue // an earlier stamp
		}
		out.WriteString(line)
		if !stamped && line == "  annotations:\n" && i > 0 && lines[i-1] == "metadata:\n" {
			fmt.Fprintf(&out, "    %s: %s\n", Annotation, hash)
			stamped = true
		}
	}
	if !stamped {
		return nil, fmt.Errorf("no metadata.annotations to stamp the schema in")
	}
	return []byte(out.String()), nil
}

// Expected are the CRDs this binary was built with, from config/crd/bases,
// each with its stamp.
func Expected() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	const dir = "crd/bases"
	entries, err := fs.ReadDir(config.FS, dir)
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		data, err := config.FS.ReadFile(path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		if crd.Annotations[Annotation] == "" {
			return nil, fmt.Errorf("%s has no %s annotation: run make generate", e.Name(), Annotation)
		}
		out = append(out, crd)
	}
	return out, nil
}

// Skew says how a CRD on the API server differs from the one the binary
// was built with; Match when it does not.
type Skew int

const (
	// Match: the stamps are equal.
	Match Skew = iota
	// Missing: the CRD is not installed.
	Missing
	// Older: the CRD lacks fields the binary's has (or has no stamp).
	Older
	// Newer: the CRD has fields the binary's lacks, and lacks none of its.
	Newer
	// Other: the stamps differ and neither holds the other's fields.
	Other
)

// Mismatch is a CRD the controller must not write through, with the
// message that says what to do.
type Mismatch struct {
	Name      string
	Skew      Skew
	Live      string   // the API server's stamp, "" when none
	Want      string   // the binary's stamp
	Lacks     []string // fields of the binary's schema the live one lacks
	Unknown   []string // fields of the live schema the binary's lacks
	ReadError error    // the CRD could not be read
}

// Error says which CRD, both stamps, and the command that fixes it.
func (m *Mismatch) Error() string {
	live := m.Live
	if live == "" {
		live = "none"
	}
	stamps := fmt.Sprintf("its %s is %s, this controller's %s", Annotation, live, m.Want)
	fix := fmt.Sprintf("apply this version's CRDs: %s (installed with kubectl: %s)", FixCommand, fixWithKubectl)
	if m.ReadError != nil && apierrors.IsForbidden(m.ReadError) {
		return fmt.Sprintf("cannot read CRD %s to check that it is the one this controller was built with: %v; "+
			"the controller's RBAC needs get on customresourcedefinitions (apiextensions.k8s.io), as its ClusterRole in "+
			"this version's chart and config/rbac grants; no add-on is reconciled until it can", m.Name, m.ReadError)
	}
	if m.ReadError != nil {
		return fmt.Sprintf("cannot read CRD %s to check that it is the one this controller was built with: %v; "+
			"no add-on is reconciled until it can", m.Name, m.ReadError)
	}
	switch m.Skew {
	case Missing:
		return fmt.Sprintf("CRD %s is not installed; no add-on is reconciled until it is: %s", m.Name, fix)
	case Older:
		return fmt.Sprintf("CRD %s is older than this controller (%s%s): the API server would drop what the controller writes there, "+
			"so no add-on is reconciled until you %s", m.Name, stamps, fields("it lacks", m.Lacks), fix)
	case Newer:
		return fmt.Sprintf("CRD %s is newer than this controller, as after a rollback (%s%s): this controller cannot read "+
			"those fields and would act on a partial status, so no add-on is reconciled until the controller of the CRD's version "+
			"runs again, or you apply the CRDs of this controller's version from its own chart: %s", m.Name, stamps, fields("this controller does not know", m.Unknown), FixCommand)
	}
	return fmt.Sprintf("CRD %s is not the one this controller was built with (%s%s%s), so no add-on is reconciled until you %s",
		m.Name, stamps, fields("it lacks", m.Lacks), fields("this controller does not know", m.Unknown), fix)
}

// fields lists at most five field paths after a label.
func fields(label string, paths []string) string {
	if len(paths) == 0 {
		return ""
	}
	shown := paths
	more := ""
	if len(shown) > 5 {
		shown, more = shown[:5], fmt.Sprintf(" and %d more", len(paths)-5)
	}
	return fmt.Sprintf("; %s %s%s", label, strings.Join(shown, ", "), more)
}

// Compare decides whether live, as the API server serves it, is the CRD
// want that the binary was built with: the stamps alone say whether they
// match; the fields of their schemas say which of the two is older. A
// nil live is a CRD that is not installed.
func Compare(want, live *apiextensionsv1.CustomResourceDefinition) *Mismatch {
	m := &Mismatch{Name: want.Name, Want: want.Annotations[Annotation]}
	if live == nil {
		m.Skew = Missing
		return m
	}
	m.Live = live.Annotations[Annotation]
	if m.Live == m.Want {
		return nil
	}
	ours, theirs := schemaFields(want), schemaFields(live)
	m.Lacks, m.Unknown = missing(ours, theirs), missing(theirs, ours)
	switch {
	case m.Live == "" || len(m.Lacks) > 0 && len(m.Unknown) == 0:
		m.Skew = Older
	case len(m.Unknown) > 0 && len(m.Lacks) == 0:
		m.Skew = Newer
	default:
		m.Skew = Other
	}
	return m
}

// Check reads every CRD the binary was built with from the API server and
// returns the first that does not match, or a read that failed.
func Check(ctx context.Context, c client.Reader, want []*apiextensionsv1.CustomResourceDefinition) *Mismatch {
	for _, w := range want {
		live := &apiextensionsv1.CustomResourceDefinition{}
		err := c.Get(ctx, client.ObjectKey{Name: w.Name}, live)
		switch {
		case apierrors.IsNotFound(err):
			live = nil
		case err != nil:
			return &Mismatch{Name: w.Name, Want: w.Annotations[Annotation], ReadError: err}
		}
		if m := Compare(w, live); m != nil {
			return m
		}
	}
	return nil
}

// schemaFields lists the field paths of every served version's schema, as
// "version:.status.field".
func schemaFields(crd *apiextensionsv1.CustomResourceDefinition) map[string]bool {
	out := map[string]bool{}
	for _, v := range crd.Spec.Versions {
		if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			walk(v.Name+":", v.Schema.OpenAPIV3Schema, out)
		}
	}
	return out
}

func walk(prefix string, s *apiextensionsv1.JSONSchemaProps, out map[string]bool) {
	for name, p := range s.Properties {
		key := prefix + "." + name
		out[key] = true
		walk(key, &p, out)
	}
	if s.Items != nil && s.Items.Schema != nil {
		walk(prefix+"[]", s.Items.Schema, out)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		walk(prefix+"{}", s.AdditionalProperties.Schema, out)
	}
}

// missing lists, sorted, the paths of a that b lacks, without the version
// when the CRD has one.
func missing(a, b map[string]bool) []string {
	var out []string
	for k := range a {
		if !b[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	// A path whose parent is listed says nothing more.
	var kept []string
	for _, k := range out {
		if n := len(kept); n > 0 && within(k, kept[n-1]) {
			continue
		}
		kept = append(kept, k)
	}
	seen := map[string]bool{}
	var fields []string
	for _, k := range kept {
		_, field, _ := strings.Cut(k, ":")
		field = strings.TrimPrefix(field, ".")
		if !seen[field] {
			seen[field] = true
			fields = append(fields, field)
		}
	}
	return fields
}

// within says whether path is a field under parent.
func within(path, parent string) bool {
	rest, ok := strings.CutPrefix(path, parent)
	return ok && (strings.HasPrefix(rest, ".") || strings.HasPrefix(rest, "[]") || strings.HasPrefix(rest, "{}"))
}
