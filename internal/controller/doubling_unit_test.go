package controller

import (
	"math"
	"testing"
	"time"
)

// TestDoubling checks the capped doubling the controller's retries share:
// none for zero or fewer times, never past most, and no overflow however
// many times or however large most.
func TestDoubling(t *testing.T) {
	for _, tc := range []struct {
		first      time.Duration
		times      int
		most, want time.Duration
	}{
		{time.Second, 0, time.Minute, time.Second},
		{time.Second, -3, time.Minute, time.Second},
		{time.Second, 1, time.Minute, 2 * time.Second},
		{time.Second, 5, time.Minute, 32 * time.Second},
		{time.Second, 6, time.Minute, time.Minute},
		{time.Second, 1 << 40, time.Minute, time.Minute},
		{2 * time.Minute, 3, time.Minute, time.Minute},
		{0, 10, time.Minute, 0},
		{time.Second, 1000, math.MaxInt64, math.MaxInt64},
	} {
		if got := doubling(tc.first, tc.times, tc.most); got != tc.want {
			t.Errorf("doubling(%s, %d, %s) = %s, want %s", tc.first, tc.times, tc.most, got, tc.want)
		}
	}
}
