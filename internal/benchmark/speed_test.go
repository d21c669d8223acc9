package benchmark_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The machine's own speed, measured through a run. The ratio to the floor
// divides two wall times taken minutes apart, and on this machine the same
// requests have cost the API server a third more CPU in one run of the
// floor than in another. speedProbe tells whether the machine itself was
// slower: every probeEvery it does one fixed piece of CPU work, of the
// kinds the API server does most (decoding and encoding JSON, hashing), and
// keeps the CPU time the work took. Each turn of the benchmark reports the
// median over its window. A fixed piece of work that takes longer means
// fewer instructions per second from the host: a neighbour on the same
// physical core, or a lower clock, which the guest cannot see otherwise (it
// has no steal time and no performance counters).
//
// The probe is a process of its own, this test binary started again: in
// the benchmark's process its allocations would pay for the garbage the
// floor's client makes there (the Go runtime charges collection work to
// the goroutines that allocate), and it read the floor's turns as 40% slower
// than Capstan's for that reason alone.

// probeEvery is how often the probe works: its work takes about 20 ms,
// so about 1% of one core.
const probeEvery = 2 * time.Second

// envProbeChild makes this test binary the probe: it works every
// probeEvery and writes "unix-nanoseconds cpu-nanoseconds" per line until
// its standard input closes.
const envProbeChild = "CAPSTAN_BENCH_SPEED_PROBE"

type speedProbe struct {
	mu      sync.Mutex
	samples []probeSample
	cmd     *exec.Cmd
	stdin   io.Closer
	read    chan struct{}
}

type probeSample struct {
	at  time.Time
	cpu time.Duration
}

// startSpeedProbe starts the probe process; Stop ends it.
func startSpeedProbe() (*speedProbe, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envProbeChild+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the speed probe: %w", err)
	}
	p := &speedProbe{cmd: cmd, stdin: stdin, read: make(chan struct{})}
	go func() {
		defer close(p.read)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var at, cpu int64
			if _, err := fmt.Sscan(sc.Text(), &at, &cpu); err != nil {
				continue
			}
			p.mu.Lock()
			p.samples = append(p.samples, probeSample{at: time.Unix(0, at), cpu: time.Duration(cpu)})
			p.mu.Unlock()
		}
	}()
	return p, nil
}

// Stop ends the probe process.
func (p *speedProbe) Stop() {
	_ = p.stdin.Close()
	<-p.read
	_ = p.cmd.Wait()
}

// runSpeedProbe is the probe process's life.
func runSpeedProbe() {
	// NOTE: the thread's own CPU time is read, so the work must stay on
	// one thread.
	runtime.LockOSThread()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for {
		took := probeOnce()
		fmt.Printf("%d %d\n", time.Now().UnixNano(), took.Nanoseconds())
		select {
		case <-done:
			return
		case <-tick.C:
		}
	}
}

// median is the median CPU time of the work done between from and to, and
// the number of samples; 0 when there were none.
func (p *speedProbe) median(from, to time.Time) (time.Duration, int) {
	if p == nil {
		return 0, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var in []time.Duration
	for _, s := range p.samples {
		if !s.at.Before(from) && !s.at.After(to) {
			in = append(in, s.cpu)
		}
	}
	if len(in) == 0 {
		return 0, 0
	}
	slices.Sort(in)
	return in[len(in)/2], len(in)
}

// probeOnce does the fixed work and returns the CPU time it took on this
// thread.
func probeOnce() time.Duration {
	probeDocument, probeBytes := probeInput()
	before := threadCPU()
	for range 10 {
		var v any
		if err := json.Unmarshal(probeDocument, &v); err != nil {
			panic(err)
		}
		if _, err := json.Marshal(v); err != nil {
			panic(err)
		}
	}
	probeSum = sha256.Sum256(probeBytes)
	return threadCPU() - before
}

// probeSum keeps the hash, so that the compiler keeps the work.
var probeSum [32]byte

// threadCPU is the calling thread's CPU time.
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// probeInput is the probe's fixed input, made once, when the probe first
// works: 300 ConfigMaps as a JSON list, about 100 KB, and 4 MiB to hash.
var probeInput = sync.OnceValues(func() ([]byte, []byte) {
	items := make([]map[string]any, 300)
	for i := range items {
		items[i] = map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("probe-%03d", i), "namespace": "probe",
				"labels": map[string]any{"app.kubernetes.io/name": "probe", "capstan.dev/addon": "probe"}},
			"data": map[string]any{"settings.yaml": fmt.Sprintf("replicas: %d\nimage: registry.example/app:1.%d\n", i%5, i)},
		}
	}
	doc, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		panic(err)
	}
	raw := make([]byte, 4<<20)
	for i := range raw {
		raw[i] = byte(i * 7)
	}
	return doc, raw
})

// BenchmarkSpeedProbe times the probe's work alone, on an idle machine:
// the reference its readings in a run compare with.
func BenchmarkSpeedProbe(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu time.Duration
	for b.Loop() {
		cpu += probeOnce()
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "ms-cpu/op")
}
