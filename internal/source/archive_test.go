package source

import (
	"archive/tar"
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
