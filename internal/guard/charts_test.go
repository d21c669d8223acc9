package guard

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/charts")

// TestCharts hardens and checks the rendered output of popular charts, kept
// as fixtures in testdata/charts, and compares the violations with the
// golden files beside them. It also states which charts a restricted Addon
// may install as they are.
func TestCharts(t *testing.T) {
	allowed := map[string]bool{"podinfo": true, "blackbox-exporter": true}
	refusedFor := map[string][]string{
		"nginx":         {"kind-not-allowed", "service-type"},
		"redis":         {"kind-not-allowed"},
		"node-exporter": {"kind-not-allowed"},
		"ingress-nginx": {"kind-not-allowed", "service-account-token", "service-type", "capabilities-added", "reference-not-rendered"},
		"cert-manager":  {"kind-not-allowed", "service-account-token"},
	}
	files, err := filepath.Glob("testdata/charts/*.yaml")
	if err != nil || len(files) < 6 {
		t.Fatalf("want at least 6 chart fixtures, found %d (%v)", len(files), err)
	}
	for _, file := range files {
		chart := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(chart, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			objs := parse(t, string(data))
			if err := Harden(objs); err != nil {
				t.Fatalf("Harden: %v", err)
			}
			vs := Check(context.Background(), objs, Context{Namespace: "apps", AddonName: chart})

			var b strings.Builder
			if len(vs) == 0 {
				fmt.Fprintf(&b, "# %s: allowed (%d objects)\n", chart, len(objs))
			} else {
				fmt.Fprintf(&b, "# %s: refused (%d objects, %d violations)\n", chart, len(objs), len(vs))
			}
			rules := map[string]bool{}
			for _, v := range vs {
				fmt.Fprintf(&b, "%s %s/%s %s\n    %s\n", v.Rule, v.Object.Kind, v.Object.Name, v.Path, v.Message)
				rules[v.Rule] = true
			}
			golden := strings.TrimSuffix(file, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/guard -run TestCharts -update to write it)", err)
			}
			if b.String() != string(want) {
				t.Errorf("violations differ from %s (rerun with -update if the change is intended):\n%s", golden, b.String())
			}

			switch {
			case allowed[chart] && len(vs) > 0:
				t.Errorf("%s should be allowed as it is", chart)
			case !allowed[chart] && len(vs) == 0:
				t.Errorf("%s should be refused", chart)
			}
			for _, r := range refusedFor[chart] {
				if !rules[r] {
					t.Errorf("%s should be refused for %s", chart, r)
				}
			}
			if len(rules) != len(refusedFor[chart]) {
				t.Errorf("%s is refused for rules %v, want exactly %v", chart, keys(rules), refusedFor[chart])
			}
		})
	}
}

func keys(m map[string]bool) []string {
	return sortedKeys(m)
}

// BenchmarkCheckCharts hardens and checks every chart fixture at once, about
// sixty objects, as one render.
func BenchmarkCheckCharts(b *testing.B) {
	files, _ := filepath.Glob("testdata/charts/*.yaml")
	var all string
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			b.Fatal(err)
		}
		all += "\n---\n" + string(data)
	}
	base := parse(b, all)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		objs := make([]*unstructured.Unstructured, len(base))
		for j, o := range base {
			objs[j] = o.DeepCopy()
		}
		_ = Harden(objs)
		Check(context.Background(), objs, Context{Namespace: "apps", AddonName: "bench"})
	}
	b.ReportMetric(float64(len(base)), "objects")
}
