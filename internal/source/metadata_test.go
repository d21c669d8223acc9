package source

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/util"
)

// keywords is a Chart.yaml keywords list of about n bytes.
func keywords(n int) string {
	var b strings.Builder
	b.WriteString("keywords:\n")
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "- keyword-%d\n", i)
	}
	return b.String()
}

func TestParsedFilesAreBounded(t *testing.T) {
	chartYAML := func(name, extra string) string {
		return fmt.Sprintf("apiVersion: v2\nname: %s\nversion: 1.0.0\n%s", name, extra)
	}
	over := keywords(MaxMetadataFileBytes + 1)
	sub := tgz(t,
		file("sub/Chart.yaml", chartYAML("sub", over)),
		file("sub/values.yaml", "a: 1\n"))
	tests := []struct {
		name    string
		entries []entry
		want    string // empty: loaded
	}{
		{"Chart.yaml under the limit", []entry{file("demo/Chart.yaml", chartYAML("demo", keywords(MaxMetadataFileBytes-1024)))}, ""},
		{"Chart.yaml over the limit", []entry{file("demo/Chart.yaml", chartYAML("demo", over))}, "Chart.yaml is"},
		{"Chart.lock over the limit", []entry{file("demo/Chart.yaml", chartYAML("demo", "")), file("demo/Chart.lock", over)}, "Chart.lock is"},
		{"requirements.yaml over the limit", []entry{file("demo/Chart.yaml", "apiVersion: v1\nname: demo\nversion: 1.0.0\n"), file("demo/requirements.yaml", over)}, "requirements.yaml is"},
		{"requirements.lock over the limit", []entry{file("demo/Chart.yaml", "apiVersion: v1\nname: demo\nversion: 1.0.0\n"), file("demo/requirements.lock", over)}, "requirements.lock is"},
		{"a subchart folder's Chart.yaml", []entry{file("demo/Chart.yaml", chartYAML("demo", "")), file("demo/charts/sub/Chart.yaml", chartYAML("sub", over))}, "charts/sub/Chart.yaml is"},
		{"a subchart archive's Chart.yaml", []entry{file("demo/Chart.yaml", chartYAML("demo", "")), file("demo/charts/sub-1.0.0.tgz", string(sub))}, "subchart charts/sub-1.0.0.tgz"},
		{"a file named Chart.yaml that is not parsed", []entry{file("demo/Chart.yaml", chartYAML("demo", "")), file("demo/files/Chart.yaml", over)}, ""},
		{"values.yaml over its limit", []entry{file("demo/Chart.yaml", chartYAML("demo", "")), file("demo/values.yaml", "a: "+strings.Repeat("x", MaxValuesFileBytes)+"\n")}, "values.yaml is"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadArchive(tgz(t, tt.entries...), DefaultLimits)
			var ae *ArchiveError
			switch {
			case tt.want == "" && err != nil:
				t.Fatal(err)
			case tt.want != "" && (!errors.As(err, &ae) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "over the limit")):
				t.Fatalf("got %v, want an archive error that says %q", err, tt.want)
			}
			// A chart folder is held to the same limits.
			dir := t.TempDir()
			for _, e := range tt.entries {
				if err := writeFile(filepath.Join(dir, e.name), []byte(e.body)); err != nil {
					t.Fatal(err)
				}
			}
			_, err = LoadChart(filepath.Join(dir, "demo"))
			if (tt.want == "") != (err == nil) {
				t.Fatalf("the chart folder: got %v", err)
			}
		})
	}
}

// TestParsedFilesAreBoundedPerChart: the files Helm's loader parses are
// bounded for the chart and its subcharts together, subchart archives
// included, not only one by one; and a cached chart counts what parsing
// them keeps.
func TestParsedFilesAreBoundedPerChart(t *testing.T) {
	values := "a: " + strings.Repeat("x", 6<<20) + "\n" // under MaxValuesFileBytes
	chartYAML := func(name string) string { return fmt.Sprintf("apiVersion: v2\nname: %s\nversion: 1.0.0\n", name) }
	sub := tgz(t, file("sub3/Chart.yaml", chartYAML("sub3")), file("sub3/values.yaml", values))
	entries := []entry{
		file("demo/Chart.yaml", chartYAML("demo")),
		file("demo/charts/sub1/Chart.yaml", chartYAML("sub1")),
		file("demo/charts/sub1/values.yaml", values),
		file("demo/charts/sub2/Chart.yaml", chartYAML("sub2")),
		file("demo/charts/sub2/values.yaml", values),
		file("demo/charts/sub3-1.0.0.tgz", string(sub)),
	}
	want := fmt.Sprintf("holds more than %d bytes of values files", MaxParsedBytes)
	_, err := loadArchive(tgz(t, entries...), DefaultLimits)
	var ae *ArchiveError
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "subchart charts/sub3-1.0.0.tgz") || !strings.Contains(err.Error(), "slim down") {
		t.Fatalf("an archive: got %v, want %q", err, want)
	}
	dir := t.TempDir()
	for _, e := range entries {
		if err := writeFile(filepath.Join(dir, e.name), []byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := LoadChart(filepath.Join(dir, "demo")); !errors.As(err, &ae) || !strings.Contains(err.Error(), want) {
		t.Fatalf("a chart folder: got %v, want %q", err, want)
	}

	small := "a: " + strings.Repeat("x", 64<<10) + "\n"
	data := tgz(t, file("demo/Chart.yaml", chartYAML("demo")), file("demo/values.yaml", small))
	c, _, err := newTestFetcher(t, Options{}).verify("demo", data, "")
	if err != nil {
		t.Fatal(err)
	}
	if min := int64(parsedKeepFactor * len(small)); c.size < min {
		t.Fatalf("the cache counts %d bytes for a chart whose values keep about %d parsed", c.size, min)
	}
}

// cachedTestChart is a chart with a subchart, values and many keywords,
// verified and cached under "k".
func cachedTestChart(t testing.TB, f *Fetcher) []byte {
	t.Helper()
	sub := tgz(t,
		file("sub/Chart.yaml", "apiVersion: v2\nname: sub\nversion: 1.0.0\n"),
		file("sub/values.yaml", "greeting: hello\n"),
		file("sub/templates/cm.yaml", "kind: ConfigMap\n"))
	data := tgz(t,
		file("demo/Chart.yaml", "apiVersion: v2\nname: demo\nversion: 1.0.0\ndependencies:\n- name: sub\n  version: 1.0.0\n  condition: sub.enabled\n  import-values: [{child: greeting, parent: imported}]\n"+keywords(200<<10)),
		file("demo/values.yaml", "sub:\n  enabled: true\nnested:\n  list: [1, 2, {a: b}]\n"),
		file("demo/templates/cm.yaml", "kind: ConfigMap\n"),
		file("demo/charts/sub-1.0.0.tgz", string(sub)))
	c, _, err := f.verify("test", data, "")
	if err != nil {
		t.Fatal(err)
	}
	f.charts.add("k", c, c.size)
	return data
}

func TestChartCacheHitDoesNotParse(t *testing.T) {
	f, err := NewFetcher(Options{})
	if err != nil {
		t.Fatal(err)
	}
	cachedTestChart(t, f)
	// NOTE: parsing the Chart.yaml's 200 KiB of keywords again takes
	// hundreds of thousands of allocations; a copy takes a few dozen.
	allocs := testing.AllocsPerRun(5, func() {
		if _, err := f.fetchChart(context.Background(), "k", "", false, nil); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1000 {
		t.Fatalf("a cache hit made %.0f allocations; it parses the chart again", allocs)
	}
}

func TestChartCacheHitIsACopy(t *testing.T) {
	f, err := NewFetcher(Options{})
	if err != nil {
		t.Fatal(err)
	}
	data := cachedTestChart(t, f)
	want, err := loadArchive(data, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	first, err := f.fetchChart(context.Background(), "k", "", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	// What Helm's rendering and a caller may do to the chart they are given.
	c := first.Chart
	c.Values["nested"].(map[string]any)["list"].([]any)[2].(map[string]any)["a"] = "changed"
	c.Metadata.Keywords[0] = "changed"
	c.Metadata.Dependencies[0].Enabled = true
	c.Metadata.Dependencies[0].ImportValues[0] = "changed"
	c.Templates[0].Name = "changed"
	if err := util.ProcessDependencies(c, map[string]any{"sub": map[string]any{"enabled": false}}); err != nil {
		t.Fatal(err)
	}
	c.SetDependencies()

	second, err := f.fetchChart(context.Background(), "k", "", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(second.Chart, want) {
		t.Fatal("a cached chart changed with what a caller did to its copy")
	}
	if len(second.Chart.Dependencies()) != 1 || second.Chart.Dependencies()[0].Parent() != second.Chart {
		t.Fatal("the copy's subchart does not name the copy as its parent")
	}
}
