package install_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"capstan.dev/capstan/internal/install"
)

// TestKubectlInstallMatchesChart builds config/default, which
// `kubectl apply -k` installs, and renders the chart with its defaults:
// every object the kubectl install makes has the chart's name (so both
// give the user roles capstan-view, -edit and -admin), and the controller
// Deployment rolls out and bounds its render workers as the chart's does.
func TestKubectlInstallMatchesChart(t *testing.T) {
	objs, err := install.Objects(true)
	if err != nil {
		t.Fatal(err)
	}
	out, err := helm(t, "template", "capstan", chart, "-n", "capstan-system", "--include-crds")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	charted := map[string]map[string]any{}
	for _, obj := range documents(t, out) {
		meta := obj["metadata"].(map[string]any)
		ns, _ := meta["namespace"].(string)
		charted[obj["kind"].(string)+" "+ns+"/"+meta["name"].(string)] = obj
	}
	var deployment map[string]any
	for _, obj := range objs {
		if obj.GetKind() == "Namespace" {
			continue
		}
		key := obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
		if charted[key] == nil {
			t.Errorf("config/default installs %s, which the chart does not", key)
		}
		if obj.GetKind() == "Deployment" {
			// Through YAML, so its numbers are the chart's float64s.
			data, err := yaml.Marshal(obj.Object)
			if err != nil {
				t.Fatal(err)
			}
			deployment = documents(t, string(data))[0]
		}
	}
	want := charted["Deployment capstan-system/capstan-controller"]
	if deployment == nil || want == nil {
		t.Fatalf("a controller Deployment is missing: config/default %v, the chart %v", deployment != nil, want != nil)
	}
	strategy := func(d map[string]any) any { return d["spec"].(map[string]any)["strategy"] }
	if diff := cmp.Diff(strategy(want), strategy(deployment)); diff != "" {
		t.Errorf("config/default rolls out otherwise than the chart (-chart +config):\n%s", diff)
	}
	renderFlags := func(d map[string]any) []string {
		var flags []string
		containers := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
		for _, arg := range containers[0].(map[string]any)["args"].([]any) {
			if s := arg.(string); strings.HasPrefix(s, "--render-memory-limit") || strings.HasPrefix(s, "--render-workers") {
				flags = append(flags, s)
			}
		}
		slices.Sort(flags)
		return flags
	}
	if diff := cmp.Diff(renderFlags(want), renderFlags(deployment)); diff != "" {
		t.Errorf("config/default bounds the render workers otherwise than the chart (-chart +config):\n%s", diff)
	}
}
