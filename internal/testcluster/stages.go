package testcluster

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
)

// stageFiles are kwok's Stages: how the fake nodes and pods move through
// their lifecycle. Every file but pod-fail.yaml is copied from kwok v0.8.0's
// kustomize/stage folder (each names its origin); pod-complete.yaml there
// leaves pods with FailLabel to pod-fail.yaml, which is our own.
//
//go:embed stages/*.yaml
var stageFiles embed.FS

// stagesYAML returns every stage as one multi-document YAML file, the form
// that kwok's --config takes.
func stagesYAML() ([]byte, error) {
	names, err := fs.Glob(stageFiles, "stages/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("testcluster: listing kwok's stages: %w", err)
	}
	var out bytes.Buffer
	for _, name := range names {
		data, err := stageFiles.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("testcluster: reading %s: %w", name, err)
		}
		out.WriteString("---\n")
		out.Write(bytes.TrimSpace(data))
		out.WriteString("\n")
	}
	return out.Bytes(), nil
}
