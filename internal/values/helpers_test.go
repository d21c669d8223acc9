package values

import (
	"testing"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// testChart builds an in-memory chart with defaults (YAML) and a schema.
func testChart(t testing.TB, name, defaults, schema string, deps ...*chartv2.Chart) *chartv2.Chart {
	t.Helper()
	c := &chartv2.Chart{Metadata: &chartv2.Metadata{Name: name, Version: "1.0.0", APIVersion: "v2"}, Values: ymap(t, defaults)}
	if schema != "" {
		c.Schema = []byte(schema)
	}
	c.AddDependency(deps...)
	return c
}

// ymap parses YAML into a values map.
func ymap(t testing.TB, s string) map[string]any {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("test YAML: %v", err)
	}
	return m
}

// docLayer is a valuesFrom layer merged as a document.
func docLayer(kind, name, doc string) Layer {
	return Layer{Ref: capstanv1.ValuesReference{Kind: kind, Name: name, ValuesKey: DefaultValuesKey}, Doc: ymapNoT(doc)}
}

// pathLayer is a valuesFrom layer with a targetPath.
func pathLayer(kind, name, path, raw string) Layer {
	p, err := parseTargetPath(path)
	if err != nil {
		panic(err)
	}
	return Layer{Ref: capstanv1.ValuesReference{Kind: kind, Name: name, ValuesKey: "v", TargetPath: path}, Raw: raw, path: p}
}

func ymapNoT(s string) map[string]any {
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		panic(err)
	}
	return m
}

// indexed numbers the layers as spec.valuesFrom would.
func indexed(ls ...Layer) []Layer {
	for i := range ls {
		ls[i].Index = i
	}
	return ls
}
