package install_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
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
			if s := arg.(string); strings.HasPrefix(s, "--render-memory-limit") || strings.HasPrefix(s, "--render-workers") || strings.HasPrefix(s, "--git-memory-budget") {
				flags = append(flags, s)
			}
		}
		slices.Sort(flags)
		return flags
	}
	if diff := cmp.Diff(renderFlags(want), renderFlags(deployment)); diff != "" {
		t.Errorf("config/default bounds the render workers or the git budget otherwise than the chart (-chart +config):\n%s", diff)
	}
	// The leader finds its own Pod, to label it, by the downward API.
	env := func(d map[string]any) any {
		containers := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
		return containers[0].(map[string]any)["env"]
	}
	if diff := cmp.Diff(env(want), env(deployment)); diff != "" {
		t.Errorf("config/default sets the controller's environment otherwise than the chart (-chart +config):\n%s", diff)
	}
	for _, name := range []string{"POD_NAME", "POD_NAMESPACE"} {
		if !strings.Contains(fmt.Sprint(env(deployment)), "name:"+name+" ") {
			t.Errorf("the controller's environment has no %s: %v", name, env(deployment))
		}
	}
	// And may label it: the Role in its namespace is the chart's.
	var role map[string]any
	for _, obj := range objs {
		if obj.GetKind() == "Role" && obj.GetName() == "capstan-controller" {
			role = obj.Object
		}
	}
	chartRole := charted["Role capstan-system/capstan-controller"]
	if role == nil || chartRole == nil {
		t.Fatalf("the controller's Role is missing: config/default %v, the chart %v", role != nil, chartRole != nil)
	}
	if diff := cmp.Diff(chartRole["rules"], role["rules"]); diff != "" {
		t.Errorf("config/default's controller Role differs from the chart's (-chart +config):\n%s", diff)
	}
}

// TestAPIServiceSelectsTheLeader renders the chart: the Service of the
// API, the web page and the webhooks selects the leader's Pod by the
// label the leader sets, as every replica is Ready; the metrics Service
// selects every replica. config/ has no Services.
func TestAPIServiceSelectsTheLeader(t *testing.T) {
	out, err := helm(t, "template", "capstan", chart, "-n", "capstan-system", "--set", "replicas=2")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	selectors := map[string]map[string]any{}
	for _, obj := range documents(t, out) {
		if obj["kind"] == "Service" {
			selectors[obj["metadata"].(map[string]any)["name"].(string)] = obj["spec"].(map[string]any)["selector"].(map[string]any)
		}
	}
	for name, want := range map[string]any{"capstan": "true", "capstan-metrics": nil} {
		sel, ok := selectors[name]
		if !ok {
			t.Errorf("the chart has no Service %s: %v", name, selectors)
			continue
		}
		if got := sel[capstanv1.LeaderLabel]; got != want {
			t.Errorf("Service %s selects %s=%v; want %v (selector %v)", name, capstanv1.LeaderLabel, got, want, sel)
		}
		if sel["app.kubernetes.io/component"] != "controller" {
			t.Errorf("Service %s does not select the controller's Pods: %v", name, sel)
		}
	}
}
