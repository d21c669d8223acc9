package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/render"
	"capstan.dev/capstan/internal/source"
)

func TestControllerMemoryLimit(t *testing.T) {
	const mi = 1 << 20
	tests := []struct {
		content  string
		reserved int64
		want     int64
		ok       bool
	}{
		{"max\n", 0, 0, false},
		{"", 0, 0, false},
		{"9223372036854771712\n", 0, 0, false}, // cgroup v1 without a limit
		{"not a number", 0, 0, false},
		{"1073741824\n", 0, 1073741824 / 10 * 9, true},
		{"1073741824\n", 2 * 384 * mi, 256 * mi / 10 * 9, true},
		// The chart's 1536Mi with two workers of 384Mi.
		{"1610612736\n", 2 * 384 * mi, 768 * mi / 10 * 9, true},
		// Workers that take (almost) everything leave no limit to set.
		{"1073741824\n", 2 * 512 * mi, -1, false},
		{"1073741824\n", 1000 * mi, -1, false},
	}
	for _, tt := range tests {
		got, ok := controllerMemoryLimit(tt.content, tt.reserved)
		if got != tt.want || ok != tt.ok {
			t.Errorf("controllerMemoryLimit(%q, %d) = %d, %v; want %d, %v", tt.content, tt.reserved, got, ok, tt.want, tt.ok)
		}
	}
}

func TestCheckMemorySizing(t *testing.T) {
	const mi = 1 << 20
	tests := []struct {
		limit, reserved, git int64
		ok                   bool
	}{
		// 1Gi with two workers of 384Mi and 256Mi of git: the soft limit,
		// about 230Mi, is below the git budget alone.
		{1024 * mi, 2 * 384 * mi, 256 * mi, false},
		// 1.5Gi holds them, with the controller's 256Mi beside the git data.
		{1536 * mi, 2 * 384 * mi, 256 * mi, true},
		{1536 * mi, 2 * 384 * mi, 512 * mi, false},
		// No render workers (--render-inline).
		{1024 * mi, 0, 512 * mi, true},
	}
	for _, tt := range tests {
		soft, ok := controllerMemoryLimit(fmt.Sprint(tt.limit), tt.reserved)
		if !ok {
			t.Fatalf("controllerMemoryLimit(%d, %d) sets no limit", tt.limit, tt.reserved)
		}
		err := checkMemorySizing(soft, tt.git)
		if (err == nil) != tt.ok {
			t.Errorf("checkMemorySizing for a limit of %dMi, workers of %dMi and a git budget of %dMi: %v; want fits %v", tt.limit/mi, tt.reserved/mi, tt.git/mi, err, tt.ok)
			continue
		}
		if err == nil {
			continue
		}
		// The container's limit raised by what the message says fits.
		var more int64
		if _, err := fmt.Sscanf(err.Error()[strings.Index(err.Error(), "raise the container's memory limit by "):], "raise the container's memory limit by %dMi", &more); err != nil {
			t.Fatalf("the message names no amount to raise the limit by: %v", err)
		}
		soft, _ = controllerMemoryLimit(fmt.Sprint(tt.limit+more*mi), tt.reserved)
		if err := checkMemorySizing(soft, tt.git); err != nil {
			t.Errorf("a limit raised by the %dMi the message gives does not fit: %v", more, err)
		}
	}
}

// TestDefaultMemorySizingFits: charts/capstan's defaults and config/default
// give the container a memory limit that holds the render workers, the git
// budget and the controller beside it, as the controller checks at start.
func TestDefaultMemorySizingFits(t *testing.T) {
	ch, err := source.LoadChart("../../charts/capstan")
	if err != nil {
		t.Fatal(err)
	}
	res, err := render.Render(context.Background(), &source.Artifact{Chart: ch}, nil, render.Options{ReleaseName: "capstan", Namespace: "capstan-system",
		Capabilities: &render.Capabilities{KubeVersion: "v1.33.2"}})
	if err != nil {
		t.Fatal(err)
	}
	kubectl, err := install.Objects(true)
	if err != nil {
		t.Fatal(err)
	}
	for name, objs := range map[string][]*unstructured.Unstructured{"charts/capstan": res.Objects, "config/default": kubectl} {
		var container map[string]any
		for _, o := range objs {
			if o.GetKind() != "Deployment" {
				continue
			}
			// NOTE: config/default's objects hold ints, which
			// NestedSlice's deep copy refuses.
			containers, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "template", "spec", "containers")
			for _, c := range containers.([]any) {
				if c := c.(map[string]any); c["name"] == "controller" {
					container = c
				}
			}
		}
		if container == nil {
			t.Fatalf("%s has no controller container", name)
		}
		limit, _, _ := unstructured.NestedFieldNoCopy(container, "resources", "limits", "memory")
		q, err := resource.ParseQuantity(fmt.Sprint(limit))
		if err != nil {
			t.Fatalf("%s: the controller's memory limit %q: %v", name, limit, err)
		}
		var args []string
		for _, a := range container["args"].([]any) {
			args = append(args, a.(string))
		}
		o := &controllerOptions{}
		fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
		o.addFlags(fs)
		if err := fs.Parse(args[1:]); err != nil {
			t.Fatal(err)
		}
		mem := resource.MustParse(o.renderMemory)
		if o.renderWorkers <= 0 {
			t.Fatalf("%s runs as many render workers as the node has CPUs", name)
		}
		git, err := gitMemoryBudget(o.gitBudget)
		if err != nil {
			t.Fatal(err)
		}
		soft, ok := controllerMemoryLimit(fmt.Sprint(q.Value()), int64(o.renderWorkers)*mem.Value())
		if !ok {
			t.Errorf("%s: the render workers take the whole memory limit %s", name, limit)
			continue
		}
		if err := checkMemorySizing(soft, git); err != nil {
			t.Errorf("%s's memory limit %s: %v", name, limit, err)
		}
	}
}
