package testcontroller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseMetrics(t *testing.T) {
	got, err := ParseMetrics(`# HELP rest_client_requests_total Number of HTTP requests.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 42
rest_client_requests_total{code="404",host="127.0.0.1:6443",method="GET"} 3
odd{a="x\"y,z}",b="\\"} 1.5e+06 1700000000000
workqueue_depth 0
`)
	if err != nil {
		t.Fatal(err)
	}
	// Samples come by metric name, each metric's series in their order.
	want := []Sample{
		{"odd", map[string]string{"a": `x"y,z}`, "b": `\`}, 1.5e6},
		{"rest_client_requests_total", map[string]string{"code": "200", "host": "127.0.0.1:6443", "method": "GET"}, 42},
		{"rest_client_requests_total", map[string]string{"code": "404", "host": "127.0.0.1:6443", "method": "GET"}, 3},
		{"workqueue_depth", map[string]string{}, 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("samples (-want +got):\n%s", diff)
	}
}

func TestSum(t *testing.T) {
	samples := []Sample{
		{"controller_runtime_reconcile_total", map[string]string{"controller": "addon", "result": "success"}, 5},
		{"controller_runtime_reconcile_total", map[string]string{"controller": "addon", "result": "error"}, 2},
		{"controller_runtime_reconcile_total", map[string]string{"controller": "addonrepository", "result": "success"}, 7},
		{"capstan_addons", map[string]string{"phase": "Synced"}, 3},
	}
	for _, c := range []struct {
		labels map[string]string
		want   float64
	}{{nil, 14}, {map[string]string{"controller": "addon"}, 7}, {map[string]string{"controller": "addon", "result": "error"}, 2}, {map[string]string{"controller": "none"}, 0}} {
		if got := Sum(samples, "controller_runtime_reconcile_total", c.labels); got != c.want {
			t.Errorf("Sum(%v) = %g; want %g", c.labels, got, c.want)
		}
	}
}
