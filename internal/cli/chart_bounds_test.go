package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"capstan.dev/capstan/internal/render"
	"capstan.dev/capstan/internal/source"
)

// TestChartRefusesRenderBoundsTheControllerRefuses: charts/capstan passes
// render.timeout, render.memoryLimit, render.workers, maxObjectsPerAddon,
// resyncInterval and hookTimeout to the controller's flags, which refuse
// at start a timeout of 0, a memory limit below 64Mi, negative workers, no
// objects and a resync interval or hook timeout of 0.
// The chart's schema refuses those (in the forms it takes), so an upgrade
// with one fails validation rather than crash-loop the pod; it also
// refuses workers of 0, which the flag reads as the node's CPUs, since the
// chart's memory limit is sized for a fixed number of workers.
func TestChartRefusesRenderBoundsTheControllerRefuses(t *testing.T) {
	ch, err := source.LoadChart("../../charts/capstan")
	if err != nil {
		t.Fatal(err)
	}
	// starts reports whether the controller starts with the flags the
	// chart renders for vals.
	starts := func(t *testing.T, vals map[string]any) bool {
		t.Helper()
		res, err := render.Render(context.Background(), &source.Artifact{Chart: ch}, vals, render.Options{ReleaseName: "capstan", Namespace: "capstan-system",
			Capabilities: &render.Capabilities{KubeVersion: "v1.33.2"}})
		if err != nil {
			t.Fatalf("values %v pass the schema, and the chart does not render: %v", vals, err)
		}
		var args []string
		for _, o := range res.Objects {
			if o.GetKind() != "Deployment" {
				continue
			}
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				if c := c.(map[string]any); c["name"] == "controller" {
					for _, a := range c["args"].([]any) {
						args = append(args, a.(string))
					}
				}
			}
		}
		if len(args) == 0 || args[0] != "controller" {
			t.Fatalf("the chart's controller container has the args %v", args)
		}
		o := &controllerOptions{}
		fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
		o.addFlags(fs)
		if err := fs.Parse(args[1:]); err != nil {
			return false
		}
		return checkRenderBounds(o.config.MaxObjects, o.renderTimeout, o.renderMemory, o.renderWorkers) == nil &&
			checkWorkBounds(o.config.ResyncInterval, o.config.HookTimeout, o.maxConcurrency) == nil
	}
	check := func(t *testing.T, vals map[string]any, want bool) {
		t.Helper()
		schema := (&renderOptions{}).validateValues(ch.Chart, vals) == nil
		if schema != want {
			t.Errorf("the chart's schema accepts %v: %v; want %v", vals, schema, want)
		}
		if schema && !starts(t, vals) {
			t.Errorf("the chart's schema accepts %v, and the controller does not start with it", vals)
		}
	}
	for _, c := range []struct {
		timeout string
		want    bool
	}{
		{"0s", false}, {"0ms", false}, {"0.0s", false}, {"0h0m0.000s", false}, {"-1s", false}, {"lots", false}, {"", false},
		{"30s", true}, {"1ms", true}, {"0.5s", true}, {"0.000001ms", true}, {"1m30s", true}, {"0m10s", true}, {"1.5m", true}, {"2h", true},
	} {
		check(t, map[string]any{"render": map[string]any{"timeout": c.timeout}}, c.want)
	}
	for _, key := range []string{"resyncInterval", "hookTimeout"} {
		for _, c := range []struct {
			d    string
			want bool
		}{{"0s", false}, {"0m0s", false}, {"-1m", false}, {"", false}, {"5m", true}, {"0.5s", true}, {"10m", true}} {
			check(t, map[string]any{key: c.d}, c.want)
		}
	}
	for _, c := range []struct {
		memory string
		want   bool
	}{
		{"0", false}, {"1", false}, {"lots", false}, {"", false}, {"-1Gi", false}, {"1Ti", false},
		{"67108863", false}, {"67108864", true}, {"67109000", true}, {"100000000", true},
		{"65535Ki", false}, {"65535.9Ki", false}, {"65536Ki", true}, {"65540Ki", true}, {"1000000Ki", true},
		{"67108k", false}, {"67108.863k", false}, {"67108.864k", true}, {"67108.87k", true}, {"67109k", true}, {"67200k", true}, {"100000k", true},
		{"0Mi", false}, {"63Mi", false}, {"63.99Mi", false}, {"64Mi", true}, {"64.5Mi", true}, {"384Mi", true}, {"1000Mi", true},
		{"67M", false}, {"67.1088M", false}, {"67.108864M", true}, {"67.10887M", true}, {"67.109M", true}, {"67.2M", true}, {"68M", true}, {"512M", true},
		{"0Gi", false}, {"0.06Gi", false}, {"0.0624Gi", false}, {"0.0625Gi", true}, {"0.0626Gi", true}, {"0.07Gi", true}, {"0.5Gi", true}, {"1Gi", true},
		{"0.067G", false}, {"0.067108863G", false}, {"0.067108864G", true}, {"0.0672G", true}, {"0.1G", true}, {"1G", true},
	} {
		check(t, map[string]any{"render": map[string]any{"memoryLimit": c.memory}}, c.want)
	}
	for _, c := range []struct {
		workers int
		want    bool
	}{{-1, false}, {0, false}, {1, true}, {4, true}} {
		check(t, map[string]any{"render": map[string]any{"workers": c.workers}}, c.want)
	}
	for _, c := range []struct {
		objects int
		want    bool
	}{{0, false}, {-5, false}, {1, true}, {5000, true}} {
		check(t, map[string]any{"maxObjectsPerAddon": c.objects}, c.want)
	}
	if !starts(t, nil) {
		t.Error("the controller does not start with the chart's defaults")
	}
	if err := (&renderOptions{}).validateValues(ch.Chart, map[string]any{"render": map[string]any{"memoryLimit": "32Mi"}}); err == nil ||
		!strings.Contains(err.Error(), "memoryLimit") {
		t.Errorf("a memory limit of 32Mi: %v; want the schema to name render.memoryLimit", err)
	}
}
