package benchmark_test

import (
	"context"
	"maps"
	"slices"
	"strings"

	"capstan.dev/capstan/internal/testcontroller"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrapeMetrics reads the controller's /metrics.
func scrapeMetrics(ctx context.Context, p *testcontroller.Process) ([]sample, error) {
	text, err := p.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	return parseMetrics(text)
}

// parseMetrics parses the Prometheus text exposition format into one
// sample per counter, gauge or untyped series.
func parseMetrics(text string) ([]sample, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	var out []sample
	for _, name := range slices.Sorted(maps.Keys(families)) {
		for _, m := range families[name].GetMetric() {
			s := sample{name: name, labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.Counter != nil:
				s.value = m.GetCounter().GetValue()
			case m.Gauge != nil:
				s.value = m.GetGauge().GetValue()
			case m.Untyped != nil:
				s.value = m.GetUntyped().GetValue()
			default:
				continue // histograms and summaries are not used
			}
			out = append(out, s)
		}
	}
	return out, nil
}
