package addons

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestUpdatePatchWritesOnlyWhatEditChanges: Update's JSON Patch tests the
// resourceVersion read and names only the fields edit changes, so a field
// of a newer Capstan's CRDs, which this binary's types drop, stays on the
// Addon, and a null in spec.values stays a null.
func TestUpdatePatchWritesOnlyWhatEditChanges(t *testing.T) {
	read := &capstanv1.Addon{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "blog", ResourceVersion: "42"},
		Spec: capstanv1.AddonSpec{
			Chart:      &capstanv1.ChartSource{OCI: "oci://r:5000/blog:1.2.0", Version: "1.2.0"},
			Values:     &apiextensionsv1.JSON{Raw: []byte(`{"replicas":1}`)},
			ValuesFrom: []capstanv1.ValuesReference{{Kind: "ConfigMap", Name: "common"}},
		},
	}
	changed := read.DeepCopy()
	changed.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"replicas":3,"resources":null}`)}
	changed.Spec.Chart.OCI, changed.Spec.Chart.Version, changed.Spec.Chart.Digest = "oci://r:5000/blog", "1.3.0", "sha256:"+strings.Repeat("b", 64)
	changed.Spec.ValuesFrom = append(changed.Spec.ValuesFrom, capstanv1.ValuesReference{Kind: "Secret", Name: "blog-values-x", ValuesKey: "a", TargetPath: "a"})
	patch, err := updatePatch(read, changed)
	if err != nil {
		t.Fatal(err)
	}
	var ops []struct {
		Op, Path string
		Value    any
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, o := range ops {
		paths = append(paths, o.Op+" "+o.Path)
	}
	want := []string{"test /metadata/resourceVersion", "add /spec/values", "add /spec/valuesFrom", "add /spec/chart/version", "add /spec/chart/digest", "add /spec/chart/oci"}
	if !reflect.DeepEqual(paths, want) || ops[0].Value != "42" {
		t.Fatalf("the patch is %s; want the ops %v, testing resourceVersion 42", patch, want)
	}

	// Applied to the Addon as a newer API server holds it.
	stored := `{"metadata":{"namespace":"tenant","name":"blog","resourceVersion":"42"},"spec":{
		"chart":{"oci":"oci://r:5000/blog:1.2.0","version":"1.2.0","futureChartField":true},
		"values":{"replicas":1},"valuesFrom":[{"kind":"ConfigMap","name":"common"}],
		"healthChecks":[{"kind":"Deployment","name":"web"}]}}`
	got, err := applyPatch(stored, patch)
	if err != nil {
		t.Fatal(err)
	}
	spec := got["spec"].(map[string]any)
	if spec["healthChecks"] == nil || spec["chart"].(map[string]any)["futureChartField"] != true {
		t.Errorf("the patch dropped fields this binary does not know: %v", spec)
	}
	if v := spec["values"].(map[string]any); !reflect.DeepEqual(v, map[string]any{"replicas": 3.0, "resources": nil}) {
		t.Errorf("spec.values = %v; want the null kept", v)
	}
	if _, err := applyPatch(strings.Replace(stored, `"42"`, `"43"`, 1), patch); err == nil {
		t.Error("the patch applied over another resourceVersion; want its test to fail")
	}

	// A digest taken out is removed; nothing changed is a test alone.
	unpinned := read.DeepCopy()
	unpinned.Spec.Chart.Digest = "sha256:" + strings.Repeat("a", 64)
	moved := unpinned.DeepCopy()
	moved.Spec.Chart.Digest = ""
	if patch, err := updatePatch(unpinned, moved); err != nil || !strings.Contains(string(patch), `{"op":"remove","path":"/spec/chart/digest"}`) {
		t.Errorf("a digest taken out: %s, %v; want a remove", patch, err)
	}
	if patch, err := updatePatch(read, read.DeepCopy()); err != nil || string(patch) != `[{"op":"test","path":"/metadata/resourceVersion","value":"42"}]` {
		t.Errorf("no change: %s, %v; want the test alone", patch, err)
	}

	// A change the patch would not write is refused, not dropped.
	other := read.DeepCopy()
	other.Spec.ManualSync = true
	if _, err := updatePatch(read, other); err == nil || !strings.Contains(err.Error(), "changes more than spec.values") {
		t.Errorf("a change of spec.manualSync: %v; want it refused", err)
	}
}

func applyPatch(doc string, patch []byte) (map[string]any, error) {
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, err
	}
	out, err := p.Apply([]byte(doc))
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(out, &m)
}
