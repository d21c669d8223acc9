package source

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"strings"
	"testing"
)

// TestEveryTarEntryCounts: folder entries and pax global headers carry no
// bytes of the chart, but each is a header to read; two million of them
// gzip to a few MiB. They count against MaxFiles, and what their headers
// take against MaxUncompressedBytes.
func TestEveryTarEntryCounts(t *testing.T) {
	manyOf := func(n int, typeflag byte) []entry {
		entries := chartEntries("chart", "1.0.0")
		for i := range n {
			name := fmt.Sprintf("chart/x%d/", i)
			if typeflag == tar.TypeXGlobalHeader {
				name = "pax_global_header"
			}
			entries = append(entries, entry{name: name, typeflag: typeflag})
		}
		return entries
	}
	tests := []struct {
		name    string
		archive []byte
		limits  Limits
		want    string
	}{
		{name: "20,000 folders", archive: tgz(t, manyOf(20000, tar.TypeDir)...), limits: DefaultLimits,
			want: fmt.Sprintf("holds more than %d files and folders, the limit", DefaultLimits.MaxFiles)},
		{name: "20,000 pax global headers", archive: tgz(t, manyOf(20000, tar.TypeXGlobalHeader)...), limits: DefaultLimits,
			want: fmt.Sprintf("holds more than %d files and folders, the limit", DefaultLimits.MaxFiles)},
		{name: "folder headers take bytes", archive: tgz(t, manyOf(200, tar.TypeDir)...), limits: Limits{MaxUncompressedBytes: 64 << 10}.withDefaults(),
			want: "unpacks to more than 65536 bytes, the limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadArchive(tt.archive, tt.limits)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
	// A chart with a folder entry per folder, as tar writes one, loads.
	ok := append([]entry{{name: "chart/", typeflag: tar.TypeDir}, {name: "chart/templates/", typeflag: tar.TypeDir}}, chartEntries("chart", "1.0.0")...)
	if _, err := loadArchive(tgz(t, ok...), DefaultLimits); err != nil {
		t.Fatalf("a chart with its folders' entries: %v", err)
	}
}

// TestIsSubchartArchive: Helm's loader unpacks charts/NAME.tgz at a chart's
// root and at each subchart folder's, charts/NAME/, and skips names that
// start with "." or "_"; any other .tgz is a file of the chart.
func TestIsSubchartArchive(t *testing.T) {
	for rel, want := range map[string]bool{
		"charts/sub-0.1.0.tgz":                 true,
		"charts/sub/charts/inner-0.1.0.tgz":    true,
		"charts/a/charts/b/charts/c-1.0.0.tgz": true,
		"files/charts/data.tgz":                false,
		"charts/sub/files/charts/data.tgz":     false,
		"charts/sub/data.tgz":                  false,
		"mycharts/sub-0.1.0.tgz":               false,
		"charts/_backup.tgz":                   false,
		"charts/.old.tgz":                      false,
		"charts/_skipped/charts/inner.tgz":     false,
		"charts/sub-0.1.0.tar.gz":              false,
		"charts/sub-0.1.0.tgz.prov":            false,
		"sub-0.1.0.tgz":                        false,
	} {
		if got := isSubchartArchive(rel); got != want {
			t.Errorf("isSubchartArchive(%q) = %v, want %v", rel, got, want)
		}
	}
}

// TestDataArchivesAreFiles: a .tgz that is a chart's data, not under its
// charts/ folder, is a file as for Helm, and loads; a subchart is still
// read and counted against the chart's limits.
func TestDataArchivesAreFiles(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte("some data, not a chart\n"))
	_ = zw.Close()
	data := gz.String()
	sub := chartArchive(t, "sub", "0.1.0")
	archive := tgz(t, append(chartEntries("app", "1.0.0"),
		file("app/files/charts/data.tgz", data),
		file("app/charts/_backup.tgz", data),
		file("app/charts/sub-0.1.0.tgz", string(sub)),
	)...)
	c, err := loadArchive(archive, DefaultLimits)
	if err != nil {
		t.Fatalf("a chart with data archives: %v", err)
	}
	if len(c.Dependencies()) != 1 || c.Dependencies()[0].Name() != "sub" {
		t.Fatalf("dependencies: %v, want sub", c.Dependencies())
	}
	var found bool
	for _, f := range c.Files {
		found = found || f.Name == "files/charts/data.tgz"
	}
	if !found {
		t.Error("files/charts/data.tgz is not among the chart's files")
	}
	// 3 files of app, 3 data archives and 3 files of sub.
	if _, err := loadArchive(archive, Limits{MaxFiles: 8}.withDefaults()); err == nil || !strings.Contains(err.Error(), "more than 8 files") {
		t.Fatalf("got %v, want the subchart's files counted", err)
	}
	broken := tgz(t, append(chartEntries("app", "1.0.0"), file("app/charts/sub-0.1.0.tgz", "not gzip"))...)
	if _, err := loadArchive(broken, DefaultLimits); err == nil || !strings.Contains(err.Error(), "subchart charts/sub-0.1.0.tgz") {
		t.Fatalf("got %v, want the subchart read and refused", err)
	}
}

// TestEntryNamesWithControlCharacters: an archive entry whose name holds a
// control character (C0, DEL, C1) or bytes that are not UTF-8 is refused,
// with the name quoted, before any of it reaches a render's "# Source:"
// comments; other characters outside ASCII are names like any.
func TestEntryNamesWithControlCharacters(t *testing.T) {
	for name, want := range map[string]string{
		"chart/templates/a\n---\nkind: Secret\n.yaml": "U+000A",
		"chart/templates/\x1b[2Jcm.yaml":              "U+001B",
		"chart/templates/tab\tcm.yaml":                "U+0009",
		"chart/templates/del\x7f.yaml":                "U+007F",
		"chart/templates/next\u0085line.yaml":         "U+0085",
		"chart/templates/\xffcm.yaml":                 "not UTF-8",
		"chart/templates/caf\u00e9.yaml":              "",
	} {
		entries := append(chartEntries("chart", "1.0.0"), file(name, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"))
		_, err := loadArchive(tgz(t, entries...), DefaultLimits)
		if want == "" {
			if err != nil {
				t.Errorf("%q: %v", name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) {
			t.Errorf("%q: got %v; want it refused for %s, the name quoted", name, err, want)
		}
		if err != nil && strings.ContainsAny(err.Error(), "\n\x1b") {
			t.Errorf("%q: the error holds the control character: %q", name, err)
		}
	}
}
