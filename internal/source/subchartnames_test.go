package source

import (
	"archive/tar"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
)

// loadedBytes adds up, over a loaded chart and all its dependencies, the
// bytes of their files (Raw) and of those Helm's loader parsed (a chart's
// own Chart.yaml, values.yaml and the like). The charts it is used on have
// no subchart folders, whose files a parent's Raw would list too.
func loadedBytes(c *chartv2.Chart) (all, parsed int64) {
	for _, f := range c.Raw {
		all += int64(len(f.Data))
		if !strings.Contains(f.Name, "/") && parsedFileLimit(f.Name) != 0 {
			parsed += int64(len(f.Data))
		}
	}
	for _, d := range c.Dependencies() {
		a, p := loadedBytes(d)
		all += a
		parsed += p
	}
	return all, parsed
}

// subchartParent is a chart app whose one subchart archive is sub.
func subchartParent(t *testing.T, sub []byte) []byte {
	return tgz(t,
		file("app/Chart.yaml", "apiVersion: v2\nname: app\nversion: 1.0.0\n"),
		file("app/values.yaml", "replicas: 1\n"),
		entry{name: "app/charts/sub-0.1.0.tgz", typeflag: tar.TypeReg, body: string(sub)},
	)
}

// TestHelmLoadsOnlyCountedBytes: a subchart's archive is unpacked by
// Capstan, against the chart's budget; Helm's loader reads names its own
// way ("\" alone is the separator in a name that holds one; a leading "./"
// is the top folder). Every byte Helm loads must be one the budget counted,
// and every file it parses one counted as parsed, or a chart of a few KiB
// makes the controller load hidden subcharts of 100 MiB each.
func TestHelmLoadsOnlyCountedBytes(t *testing.T) {
	hiddenChart := tgz(t,
		file("a/Chart.yaml", "apiVersion: v2\nname: a\nversion: 0.1.0\n"),
		file("a/templates/big.yaml", strings.Repeat("\x00", 4<<20)),
	)
	tests := []struct {
		name  string
		inner []entry
		want  string
	}{{
		// Helm reads sub/x\values.yaml as the subchart's values.yaml.
		name: "values behind a backslash",
		inner: []entry{
			file("sub/Chart.yaml", "apiVersion: v2\nname: sub\nversion: 0.1.0\n"),
			file(`sub/x\values.yaml`, "# "+strings.Repeat("x", MaxValuesFileBytes)+"\nhidden: true\n"),
		},
		want: `entry "sub/x\\values.yaml" mixes "/" and "\"`,
	}, {
		// Helm reads sub/x\charts\a.tgz as the subchart's own subchart.
		name: "a subchart behind a backslash",
		inner: []entry{
			file("sub/Chart.yaml", "apiVersion: v2\nname: sub\nversion: 0.1.0\n"),
			{name: `sub/x\charts\a.tgz`, typeflag: tar.TypeReg, body: string(hiddenChart)},
		},
		want: `entry "sub/x\\charts\\a.tgz" mixes "/" and "\"`,
	}, {
		// Helm reads ./charts/a.tgz, top folder ".", as charts/a.tgz.
		name: "a subchart behind ./",
		inner: []entry{
			file("charts/Chart.yaml", "apiVersion: v2\nname: sub\nversion: 0.1.0\n"),
			{name: "./charts/a.tgz", typeflag: tar.TypeReg, body: string(hiddenChart)},
		},
		want: `entry "./charts/a.tgz" is read by Helm as "charts/a.tgz" and by Capstan as "a.tgz"`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			outer := subchartParent(t, tgz(t, tt.inner...))
			b := &budget{lim: DefaultLimits}
			files, err := readArchive(outer, b)
			if err == nil {
				c, lerr := loadFiles(files)
				if lerr != nil {
					t.Fatalf("readArchive accepted the %d-byte archive, then: %v", len(outer), lerr)
				}
				all, parsed := loadedBytes(c)
				if all > b.bytes || parsed > b.parsed {
					t.Fatalf("a %d-byte archive: the budget counted %d bytes, %d of them parsed; Helm loaded %d, parsed %d", len(outer), b.bytes, b.parsed, all, parsed)
				}
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want a refusal containing %q", err, tt.want)
			}
		})
	}
}

// TestSubchartArchiveIsNotUnpackedByHelm: the loader loads a subchart's
// archive only from the files readArchive unpacked and counted; one it
// did not check is refused, never handed to Helm's loader to unpack.
func TestSubchartArchiveIsNotUnpackedByHelm(t *testing.T) {
	files := []*chartFile{
		{BufferedFile: &archive.BufferedFile{Name: "Chart.yaml", Data: []byte("apiVersion: v2\nname: app\nversion: 1.0.0\n")}},
		{BufferedFile: &archive.BufferedFile{Name: "charts/sub-0.1.0.tgz", Data: chartArchive(t, "sub", "0.1.0")}},
	}
	if c, err := loadFiles(files); err == nil || !strings.Contains(err.Error(), "was not checked") {
		t.Fatalf("an unchecked subchart archive: got %v (dependencies %v), want it refused", err, c.Dependencies())
	}
}

// TestWindowsArchivesLoad: archives made on Windows name their entries with
// "\" only, the chart's and its subcharts' alike, and load as Helm loads
// them.
func TestWindowsArchivesLoad(t *testing.T) {
	sub := tgz(t,
		file(`sub\Chart.yaml`, "apiVersion: v2\nname: sub\nversion: 0.1.0\n"),
		file(`sub\values.yaml`, "size: 3\n"),
		file(`sub\templates\cm.yaml`, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sub\n"),
	)
	parent := tgz(t,
		file(`app\Chart.yaml`, "apiVersion: v2\nname: app\nversion: 1.0.0\n"),
		file(`app\values.yaml`, "replicas: 2\n"),
		file(`app\templates\cm.yaml`, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n"),
		entry{name: `app\charts\sub-0.1.0.tgz`, typeflag: tar.TypeReg, body: string(sub)},
	)
	c, err := loadArchive(parent, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if c.Values["replicas"] != float64(2) || len(c.Templates) != 1 || c.Templates[0].Name != "templates/cm.yaml" {
		t.Fatalf("chart: values %v, templates %d", c.Values, len(c.Templates))
	}
	deps := c.Dependencies()
	if len(deps) != 1 || deps[0].Name() != "sub" || deps[0].Values["size"] != float64(3) || len(deps[0].Templates) != 1 {
		t.Fatalf("dependencies: %v", deps)
	}
}

// TestChartFolderSubchartNames: a chart folder is loaded by Helm's loader,
// which unpacks the subchart archives in it itself; their entries must
// name the files as Helm reads them, or they are refused.
func TestChartFolderSubchartNames(t *testing.T) {
	hidden := tgz(t,
		file("charts/Chart.yaml", "apiVersion: v2\nname: sub\nversion: 0.1.0\n"),
		entry{name: "./charts/a.tgz", typeflag: tar.TypeReg, body: string(chartArchive(t, "a", "0.1.0"))},
	)
	for name, sub := range map[string][]byte{"hidden": hidden, "plain": chartArchive(t, "sub", "0.1.0")} {
		dir := t.TempDir()
		for p, body := range map[string]string{
			"Chart.yaml":           "apiVersion: v2\nname: app\nversion: 1.0.0\n",
			"charts/sub-0.1.0.tgz": string(sub),
		} {
			if err := writeFile(dir+"/"+p, []byte(body)); err != nil {
				t.Fatal(err)
			}
		}
		c, err := LoadChart(dir)
		switch {
		case name == "plain" && (err != nil || len(c.Chart.Dependencies()) != 1):
			t.Fatalf("a folder with a subchart archive: %v", err)
		case name == "hidden" && (err == nil || !strings.Contains(err.Error(), `is read by Helm as "charts/a.tgz"`)):
			t.Fatalf("a folder whose subchart archive hides a subchart: got %v, want it refused", err)
		}
	}
}
