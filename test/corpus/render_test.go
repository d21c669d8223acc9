package corpus_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"capstan.dev/capstan/internal/cli"
)

// TestChartsRenderAsHelmTemplate renders every chart of the corpus with
// `capstan render` and with `helm template` of the same Helm version, with
// the same values, hooks and CRDs included, and compares the parsed
// objects field for field. It needs no cluster: `lookup` finds nothing in
// both.
func TestChartsRenderAsHelmTemplate(t *testing.T) {
	binDir, chartsDir := corpusDirs(t)
	helm := helmCLI{bin: filepath.Join(binDir, "helm"), home: t.TempDir()}
	for _, c := range corpus {
		t.Run(c.name, func(t *testing.T) {
			valuesFile := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(valuesFile, []byte(c.values), 0o600); err != nil {
				t.Fatal(err)
			}
			args := []string{c.name, filepath.Join(chartsDir, c.name), "-n", "corpus-" + c.name, "-f", valuesFile, "--kube-version", "v1.33.2"}
			helmOut, err := helm.run(t.Context(), append([]string{"template"}, append(args, "--include-crds", "--skip-tests")...)...)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, helmOut)
			}
			var stdout, stderr bytes.Buffer
			cmd := cli.NewRootCommand()
			cmd.SetArgs(append([]string{"render"}, append(args, "--show-hooks")...))
			cmd.SetOut(&stdout)
			cmd.SetErr(&stderr)
			if err := cmd.ExecuteContext(context.Background()); err != nil {
				t.Fatalf("capstan render: %v\n%s", err, stderr.String())
			}
			want, got := objectsOf(t, helmOut), objectsOf(t, stdout.String())
			if len(want) == 0 {
				t.Fatal("helm template rendered nothing; the case exercises nothing")
			}
			for _, g := range c.generated {
				for side, objs := range map[string]map[string]map[string]any{"helm template": want, "capstan render": got} {
					if obj, ok := objs[g.key]; !ok {
						t.Errorf("%s rendered no %s, which the case says has a generated field", side, g.key)
					} else if v, found := takeField(obj, g.path); !found || v == "" || v == nil {
						t.Errorf("%s: %s rendered the generated field %s empty", g.key, side, strings.Join(g.path, "."))
					}
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("capstan render and helm template differ (-helm +capstan):\n%s", diff)
			}
		})
	}
}

// objectsOf parses multi-document YAML into objects keyed as keyOf does,
// with the namespace a namespaced object would get left as rendered.
func objectsOf(t *testing.T, out string) map[string]map[string]any {
	t.Helper()
	objs := map[string]map[string]any{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("output is not YAML: %v", err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("output document is not YAML: %v\n%s", err, doc)
		}
		if obj == nil {
			continue
		}
		key := keyOf(&unstructured.Unstructured{Object: obj})
		if _, dup := objs[key]; dup {
			t.Fatalf("%s is rendered twice", key)
		}
		objs[key] = obj
	}
	return objs
}
