package testcontroller

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sample is one series of the Prometheus text format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Samples reads the process's /metrics.
func (p *Process) Samples(ctx context.Context) ([]Sample, error) {
	text, err := p.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	return ParseMetrics(text)
}

// Sum adds up the samples named name whose labels include every one of
// labels.
func Sum(samples []Sample, name string, labels map[string]string) float64 {
	var total float64
	for _, s := range samples {
		if s.Name != name {
			continue
		}
		matches := true
		for k, v := range labels {
			matches = matches && s.Labels[k] == v
		}
		if matches {
			total += s.Value
		}
	}
	return total
}

// ParseMetrics parses the Prometheus text exposition format into one
// sample per counter, gauge or untyped series, by metric name.
func ParseMetrics(text string) ([]Sample, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	var out []Sample
	for _, name := range slices.Sorted(maps.Keys(families)) {
		for _, m := range families[name].GetMetric() {
			s := Sample{Name: name, Labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.Labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.Counter != nil:
				s.Value = m.GetCounter().GetValue()
			case m.Gauge != nil:
				s.Value = m.GetGauge().GetValue()
			case m.Untyped != nil:
				s.Value = m.GetUntyped().GetValue()
			default:
				continue // histograms and summaries are not used
			}
			out = append(out, s)
		}
	}
	return out, nil
}
