package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// hashVersion changes when what the hash covers changes, so that an old hash
// never matches a new one by accident.
const hashVersion = 1

// Hash identifies a render by its inputs: the source, the values, the
// release name and the namespace. It is "sha256:" and 64 hex digits, and it
// does not change with the order of map keys or with how a number was
// written (5, 5.0 and an int 5 are one value). A chart with a digest is
// known by its digest alone, so a mirror of the same archive hashes the same.
func Hash(src SourceIdentity, values map[string]any, releaseName, namespace string) (string, error) {
	if src.Digest != "" {
		src = SourceIdentity{Digest: src.Digest, Path: src.Path}
	}
	canonical, err := canonicalJSON(values)
	if err != nil {
		return "", fmt.Errorf("render: hash the values: %w", err)
	}
	doc, err := json.Marshal(struct {
		Version   int             `json:"v"`
		Source    SourceIdentity  `json:"source"`
		Release   string          `json:"release"`
		Namespace string          `json:"namespace"`
		Values    json.RawMessage `json:"values"`
	}{hashVersion, src, releaseName, namespace, canonical})
	if err != nil {
		return "", fmt.Errorf("render: hash the inputs: %w", err)
	}
	sum := sha256.Sum256(doc)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// canonicalJSON writes values as JSON with sorted keys and every number as a
// float64, as RFC 8785 (JSON canonicalization) writes numbers. A nil or empty
// map is {}.
func canonicalJSON(values map[string]any) ([]byte, error) {
	if len(values) == 0 {
		return []byte("{}"), nil
	}
	first, err := json.Marshal(values)
	if err != nil {
		return nil, err
	}
	// NOTE: the round trip through any turns every number into a float64
	// (an int64 5 and a float64 5 both become 5), and encoding/json sorts map
	// keys; together that is a canonical form.
	var generic any
	if err := json.Unmarshal(first, &generic); err != nil {
		return nil, err
	}
	return json.Marshal(generic)
}
