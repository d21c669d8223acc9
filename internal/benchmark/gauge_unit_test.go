package benchmark_test

import (
	"math"
	"testing"
	"time"
)

func TestGaugeReadsTheSameWorkWithoutItsIdle(t *testing.T) {
	s := func(sec float64) time.Duration { return time.Duration(sec * float64(time.Second)) }
	const part = "kube-scheduler"
	// Idle: 4 ms a second. The floors' windows last 20 and 30 s and spend
	// 1.08 and 1.12 s (1.0 s of work each); Capstan's lasts 40 s and spends
	// 1.36 s (1.2 s of work): the machine was 1.2 times slower then.
	f := figures{
		capstanWindow: s(40),
		capstanCPU:    cpuUse{part: s(1.36)},
		idle:          cpuUse{part: s(0.004 * idleSample.Seconds())},
		floors: [2]floorRun{
			{took: s(20), window: s(20), cpu: cpuUse{part: s(1.08)}},
			{took: s(30), window: s(30), cpu: cpuUse{part: s(1.12)}},
		},
	}
	if got := f.gauge(part); math.Abs(got-1.2) > 1e-9 {
		t.Errorf("gauge = %v, want 1.2: the idle work of each window taken out", got)
	}
	if got := f.gauge("kube-controller-manager"); got != 0 {
		t.Errorf("gauge of a part with no readings = %v, want 0", got)
	}
	f.capstanCPU[part] = s(0.1)
	if got := f.gauge(part); got != 0 {
		t.Errorf("gauge when Capstan's window spent less than its idle = %v, want 0", got)
	}
	f.floors[1] = floorRun{}
	if got := f.gauge(part); got != 0 {
		t.Errorf("gauge without the floor after = %v, want 0", got)
	}
}
