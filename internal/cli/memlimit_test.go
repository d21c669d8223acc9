package cli

import "testing"

func TestControllerMemoryLimit(t *testing.T) {
	const mi = 1 << 20
	tests := []struct {
		content  string
		reserved int64
		want     int64
		ok       bool
	}{
		{"max\n", 0, 0, false},
		{"", 0, 0, false},
		{"9223372036854771712\n", 0, 0, false}, // cgroup v1 without a limit
		{"not a number", 0, 0, false},
		{"1073741824\n", 0, 1073741824 / 10 * 9, true},
		// The chart's 1Gi with two workers of 384Mi.
		{"1073741824\n", 2 * 384 * mi, 256 * mi / 10 * 9, true},
		// Workers that take (almost) everything leave no limit to set.
		{"1073741824\n", 2 * 512 * mi, -1, false},
		{"1073741824\n", 1000 * mi, -1, false},
	}
	for _, tt := range tests {
		got, ok := controllerMemoryLimit(tt.content, tt.reserved)
		if got != tt.want || ok != tt.ok {
			t.Errorf("controllerMemoryLimit(%q, %d) = %d, %v; want %d, %v", tt.content, tt.reserved, got, ok, tt.want, tt.ok)
		}
	}
}
