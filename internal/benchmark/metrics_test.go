package benchmark_test

import "testing"

func TestParseMetrics(t *testing.T) {
	got, err := parseMetrics(`# HELP rest_client_requests_total Number of HTTP requests.
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
	want := []sample{
		{"odd", map[string]string{"a": `x"y,z}`, "b": `\`}, 1.5e6},
		{"rest_client_requests_total", map[string]string{"code": "200", "host": "127.0.0.1:6443", "method": "GET"}, 42},
		{"rest_client_requests_total", map[string]string{"code": "404", "host": "127.0.0.1:6443", "method": "GET"}, 3},
		{"workqueue_depth", map[string]string{}, 0},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d samples %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i].name != want[i].name || got[i].value != want[i].value || len(got[i].labels) != len(want[i].labels) {
			t.Errorf("sample %d = %+v, want %+v", i, got[i], want[i])
			continue
		}
		for k, v := range want[i].labels {
			if got[i].labels[k] != v {
				t.Errorf("sample %d label %s = %q, want %q", i, k, got[i].labels[k], v)
			}
		}
	}
}
