package benchmark_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

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
// That work stays mostly in the core's caches, while the control plane's
// does not: its heaps are hundreds of MiB, and a neighbour that takes the
// memory system's bandwidth slows it down without slowing the first kind
// of work. So the probe also walks a random cycle through 64 MiB, one
// dependent load after the other, which takes as long as the memory's
// latency: its CPU time is the second reading.
//
// The probe is a process of its own, this test binary started again: in
// the benchmark's process its allocations would pay for the garbage the
// floor's client makes there (the Go runtime charges collection work to
// the goroutines that allocate), and it read the floor's turns as 40% slower
// than Capstan's for that reason alone.

// probeEvery is how often the probe works: its two pieces of work take
// about 30 ms alone, so about 1.5% of one core.
const probeEvery = 2 * time.Second

// envProbeChild makes this test binary the probe: it works every
// probeEvery and writes one line per piece of work, "unix-nanoseconds
// work-cpu-nanoseconds memory-cpu-nanoseconds", until its standard input
// closes.
const envProbeChild = "CAPSTAN_BENCH_SPEED_PROBE"

type speedProbe struct {
	mu      sync.Mutex
	samples []probeSample
	cmd     *exec.Cmd
	stdin   io.Closer
	read    chan struct{}
}

type probeSample struct {
	at time.Time
	probeReading
}

// probeReading is the CPU time of the probe's two pieces of work: work,
// the JSON and the hash in the caches, and memory, the walk through
// memory.
type probeReading struct {
	work, memory time.Duration
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
	first := make(chan struct{})
	go func() {
		defer close(p.read)
		sc := bufio.NewScanner(stdout)
		for n := 0; sc.Scan(); n++ {
			if n == 0 {
				close(first)
			}
			var at, work, memory int64
			if _, err := fmt.Sscan(sc.Text(), &at, &work, &memory); err != nil {
				continue
			}
			p.mu.Lock()
			p.samples = append(p.samples, probeSample{at: time.Unix(0, at), probeReading: probeReading{time.Duration(work), time.Duration(memory)}})
			p.mu.Unlock()
		}
	}()
	// The first sample comes once the walk's memory is built, a second or
	// so of one core: before the floor's first turn starts, not in it.
	select {
	case <-first:
		return p, nil
	case <-p.read:
		_ = cmd.Wait()
		return nil, fmt.Errorf("the speed probe exited at its start")
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		p.Stop()
		return nil, fmt.Errorf("the speed probe gave no sample within a minute")
	}
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
		fmt.Printf("%d %d %d\n", time.Now().UnixNano(), took.work.Nanoseconds(), took.memory.Nanoseconds())
		select {
		case <-done:
			return
		case <-tick.C:
		}
	}
}

// median is the median of each reading over the work done between from
// and to, and the number of samples; zero when there were none.
func (p *speedProbe) median(from, to time.Time) (probeReading, int) {
	if p == nil {
		return probeReading{}, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var work, memory []time.Duration
	for _, s := range p.samples {
		if !s.at.Before(from) && !s.at.After(to) {
			work, memory = append(work, s.work), append(memory, s.memory)
		}
	}
	if len(work) == 0 {
		return probeReading{}, 0
	}
	slices.Sort(work)
	slices.Sort(memory)
	return probeReading{work[len(work)/2], memory[len(memory)/2]}, len(work)
}

// probeOnce does the fixed work and returns the CPU time each piece took
// on this thread.
func probeOnce() probeReading {
	probeDocument, probeBytes := probeInput()
	cycle := probeCycle()
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
	worked := threadCPU()
	// Each walk goes on where the last one ended, so no entry is read
	// twice for 256 walks (8.5 minutes): none is in a cache from before.
	at := probeAt
	for range probeSteps {
		at = cycle[at]
	}
	probeAt = at
	return probeReading{work: worked - before, memory: threadCPU() - worked}
}

// probeSum and probeAt keep the hash and the walk's end, so that the
// compiler keeps the work.
var (
	probeSum [32]byte
	probeAt  uint32
)

// probeSteps is the walk's length: 2^16 loads that each miss the caches,
// about 13 ms alone (some 200 ns a load).
const probeSteps = 1 << 16

// probeCycle is one random cycle through 16 Mi entries (64 MiB), made once
// by Sattolo's shuffle with a fixed seed: every load depends on the one
// before, and the next address is nowhere near the last.
//
// It lives outside Go's heap. In the heap, its 64 MiB would let the heap
// grow that much more before each collection, so the JSON work would
// touch fresh pages, and pay the kernel's page faults, early in the
// probe's life: alone, it read 40 ms for that work for the first 15 s and
// 13 ms after; in a run, 46-53 ms through the floor's whole first turn.
var probeCycle = sync.OnceValue(func() []uint32 {
	const n = 16 << 20
	mem, err := unix.Mmap(-1, 0, 4*n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		panic(fmt.Sprintf("mapping the probe's memory: %v", err))
	}
	next := unsafe.Slice((*uint32)(unsafe.Pointer(&mem[0])), n)
	for i := range next {
		next[i] = uint32(i)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := n - 1; i > 0; i-- {
		j := rng.IntN(i)
		next[i], next[j] = next[j], next[i]
	}
	return next
})

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
	var work, memory time.Duration
	for b.Loop() {
		r := probeOnce()
		work += r.work
		memory += r.memory
	}
	b.ReportMetric(float64(work.Microseconds())/1000/float64(b.N), "ms-cpu/op")
	b.ReportMetric(float64(memory.Microseconds())/1000/float64(b.N), "ms-memory-cpu/op")
}
