package source

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkChartCacheHit measures a cached chart of 300 templates: the cost of
// handing each caller a fresh *chart.Chart from the verified files.
func BenchmarkChartCacheHit(b *testing.B) {
	entries := chartEntries("big", "1.0.0")
	for i := 0; i < 300; i++ {
		entries = append(entries, file(fmt.Sprintf("big/templates/cm-%03d.yaml", i),
			fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-%d\ndata:\n  k: v\n", i)))
	}
	data := tgz(b, entries...)
	f, err := NewFetcher(Options{})
	if err != nil {
		b.Fatal(err)
	}
	c, _, err := f.verify("bench", data, "")
	if err != nil {
		b.Fatal(err)
	}
	f.charts.add("k", c, c.size)
	b.Run("cold-verify-and-load", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, _, err := f.verify("bench", data, ""); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("warm-cache-hit", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := f.fetchChart(context.Background(), "k", "", false, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
