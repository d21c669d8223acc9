package render

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
)

// A Helm template is a program: `range` over a number, `include` that calls
// itself, and `tpl` over a value can run for ever or ask for any amount of
// memory, and Go cannot stop a goroutine that runs one. So a controller
// renders in worker processes that it can kill. A Sandbox keeps a few of
// them warm, sends each render to one, and kills the worker when the render
// passes its time bound or its memory bound; the add-on then fails with a
// message that says which bound and what to check, and the next render gets
// a fresh worker. Everything else of a render (reading the chart, decoding
// the output) stays in the controller. Reading the chart costs what its
// size, which the fetch limits bound, lets it; the output does not follow
// the chart's size (a chart of a kilobyte can loop out 64 MiB of tiny
// objects), so its documents are counted against Options.MaxObjects
// before any is decoded.

// Defaults of a SandboxConfig.
const (
	DefaultRenderTimeout = 30 * time.Second
	DefaultRenderMemory  = 512 << 20
	// maxTemplateOutput bounds what one render may send back. A chart of
	// 10,000 objects renders to about 5 MiB.
	maxTemplateOutput = 64 << 20
	// workerIdleTimeout is how long an idle worker waits for the next
	// render before it exits, so that a quiet controller holds no workers.
	workerIdleTimeout = time.Minute
)

// workerEnv, set in a process's environment, makes ServeWorkerIfAsked serve
// renders on stdin and stdout. Its value is the memory bound in bytes.
const workerEnv = "CAPSTAN_RENDER_WORKER"

// SandboxConfig says how a Sandbox runs its workers.
type SandboxConfig struct {
	// Command is the worker's program and arguments. The program must call
	// ServeWorkerIfAsked first thing: the capstan binary and the test
	// binaries of packages that render do. Default: this program.
	Command []string
	// Timeout bounds one render's templates. Default DefaultRenderTimeout.
	Timeout time.Duration
	// Memory bounds a worker's memory in bytes. Default DefaultRenderMemory.
	Memory int64
	// Workers is the most renders that run at once; more wait for one to
	// end. Default: the number of CPUs, and at least 2.
	Workers int
}

// Sandbox runs chart templates in worker processes bounded in time and
// memory. It is safe for concurrent use.
type Sandbox struct {
	cfg   SandboxConfig
	slots chan struct{}

	mu     sync.Mutex
	idle   []*worker
	closed bool
	live   map[*worker]bool
	stats  SandboxStats // of the workers that ended, and the counts
}

// SandboxStats are a Sandbox's figures since it was made.
type SandboxStats struct {
	// Renders counts renders sent to a worker; TimeBound and MemoryBound
	// count those stopped by a bound.
	Renders, TimeBound, MemoryBound int64
	// Workers counts the worker processes started.
	Workers int64
	// CPU is the CPU time of every worker, those still running included.
	CPU time.Duration
	// PeakRSS is the most memory any one worker held, in bytes.
	PeakRSS int64
}

// Stats returns the sandbox's figures, reading the running workers' from
// /proc.
func (s *Sandbox) Stats() SandboxStats {
	s.mu.Lock()
	st := s.stats
	pids := make([]int, 0, len(s.live))
	for w := range s.live {
		pids = append(pids, w.cmd.Process.Pid)
	}
	s.mu.Unlock()
	for _, pid := range pids {
		cpu, peak := processUsage(pid)
		st.CPU += cpu
		st.PeakRSS = max(st.PeakRSS, peak)
	}
	return st
}

// ended accounts for a worker that exited.
func (s *Sandbox) ended(w *worker) {
	var cpu time.Duration
	var peak int64
	if ru, ok := w.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && ru != nil {
		cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		peak = int64(ru.Maxrss) << 10
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, w)
	s.stats.CPU += cpu
	s.stats.PeakRSS = max(s.stats.PeakRSS, peak)
}

// MinRenderMemory is the smallest memory bound of a render worker: less
// is too little for the Go runtime and Helm.
const MinRenderMemory = 64 << 20

// NewSandbox returns a Sandbox. It starts no worker until the first render.
func NewSandbox(cfg SandboxConfig) (*Sandbox, error) {
	if len(cfg.Command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("render sandbox: find this program to run as the render worker: %w", err)
		}
		cfg.Command = []string{exe}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultRenderTimeout
	}
	if cfg.Memory <= 0 {
		cfg.Memory = DefaultRenderMemory
	}
	if cfg.Memory < MinRenderMemory {
		return nil, fmt.Errorf("render sandbox: a memory bound of %d bytes is too small for the Go runtime and Helm: give at least 64 MiB", cfg.Memory)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = max(runtime.NumCPU(), 2)
	}
	return &Sandbox{cfg: cfg, slots: make(chan struct{}, cfg.Workers), live: map[*worker]bool{}}, nil
}

// Reserved is the memory the workers may take together at most: each
// worker's bound times the workers that run at once.
func (s *Sandbox) Reserved() int64 {
	return int64(s.cfg.Workers) * s.cfg.Memory
}

// Close stops the idle workers; a render still running finishes, and its
// worker stops after it.
func (s *Sandbox) Close() {
	s.mu.Lock()
	idle := s.idle
	s.idle, s.closed = nil, true
	s.mu.Unlock()
	for _, w := range idle {
		w.stop()
	}
}

// LimitError is a render that a Sandbox stopped because it passed a bound.
// Like a TemplateError, it carries nothing of the chart's output.
type LimitError struct {
	// Chart is the chart's name.
	Chart string
	// Bound is "time" or "memory", the worker's bounds; "output", more
	// manifests than a worker may send back; or "objects", more objects
	// than Options.MaxObjects, counted before they are decoded.
	Bound string
	// Timeout and Memory are the bounds that were set.
	Timeout time.Duration
	Memory  int64
	// PeakRSS is the most memory the worker held, in bytes, when known.
	PeakRSS int64
	// Objects is Options.MaxObjects, for the bound "objects".
	Objects int
}

func (e *LimitError) Error() string {
	switch e.Bound {
	case "objects":
		return fmt.Sprintf("render: chart %s renders more than %d objects, the limit per add-on (--max-objects-per-addon), so they were not read and nothing was applied: "+
			"check the values that drive its loops, split it into several add-ons, or raise the limit", e.Chart, e.Objects)
	case "output":
		return fmt.Sprintf("render: chart %s renders more than %d MiB of manifests, so nothing was applied: "+
			"check the values that drive its loops, or split it into several add-ons", e.Chart, maxTemplateOutput>>20)
	}
	if e.Bound == "memory" {
		return fmt.Sprintf("render: chart %s needed more than %d MiB of memory to render, so it was stopped and nothing was applied: "+
			"a template builds something huge (repeat, until, seq, or a loop that appends); check the chart's loops and the values that size them, or raise --render-memory-limit",
			e.Chart, e.Memory>>20)
	}
	return fmt.Sprintf("render: chart %s took longer than %s to render, so it was stopped and nothing was applied: "+
		"a template loops without end or does far too much work; check the chart's loops (range, include, tpl) and the values that drive them, or raise --render-timeout",
		e.Chart, e.Timeout)
}

// execute runs executeTemplates in a worker.
func (s *Sandbox) execute(ctx context.Context, ch *chartv2.Chart, values map[string]any, opts Options) (*templateOutput, error) {
	req, err := encodeRequest(ch, values, opts)
	if err != nil {
		return nil, fmt.Errorf("render: chart %s: %w", ch.Name(), err)
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.slots }()

	w, err := s.take()
	if err != nil {
		return nil, err
	}
	s.count(func(st *SandboxStats) { st.Renders++ })
	resp, err := w.call(ctx, req, s.cfg.Timeout)
	if err != nil {
		var le *LimitError
		if !errors.As(err, &le) && ctx.Err() == nil {
			// The worker broke the pipe: let it finish dying, to learn how.
			select {
			case <-w.done:
			case <-time.After(time.Second):
			}
		}
		killed := w.exited() && killedBySignal(w.cmd.ProcessState)
		w.stop()
		peak := w.wait()
		switch {
		case le != nil:
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case killed:
			return nil, fmt.Errorf("render: chart %s: the render worker was killed from outside while it rendered, most likely by the kernel "+
				"for memory: give the controller's pod a memory limit above its own use plus --render-workers times --render-memory-limit", ch.Name())
		case w.outOfMemory():
			le = &LimitError{Bound: "memory"}
		case errors.Is(err, errOutputTooLarge):
			le = &LimitError{Bound: "output"}
		default:
			return nil, fmt.Errorf("render: chart %s: the render worker failed: %w", ch.Name(), err)
		}
		le.Chart, le.Timeout, le.Memory, le.PeakRSS = ch.Name(), s.cfg.Timeout, s.cfg.Memory, peak
		s.count(func(st *SandboxStats) {
			switch le.Bound {
			case "memory":
				st.MemoryBound++
			case "time":
				st.TimeBound++
			}
		})
		return nil, le
	}
	s.put(w)
	return decodeResponse(resp)
}

func (s *Sandbox) count(f func(*SandboxStats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.stats)
}

// take returns an idle worker, or starts one.
func (s *Sandbox) take() (*worker, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, errors.New("render: the render sandbox is closed")
		}
		n := len(s.idle)
		if n == 0 {
			s.mu.Unlock()
			return s.start()
		}
		w := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		w.idleTimer.Stop()
		if !w.exited() {
			return w, nil
		}
	}
}

// put keeps a worker for the next render, until it has been idle for
// workerIdleTimeout.
func (s *Sandbox) put(w *worker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || len(s.idle) >= s.cfg.Workers {
		w.stop()
		return
	}
	s.idle = append(s.idle, w)
	w.idleTimer = time.AfterFunc(workerIdleTimeout, func() {
		s.mu.Lock()
		i := slices.Index(s.idle, w)
		if i >= 0 {
			s.idle = slices.Delete(s.idle, i, i+1)
		}
		s.mu.Unlock()
		if i >= 0 {
			w.stop()
		}
	})
}

// worker is one render worker process.
type worker struct {
	cmd       *exec.Cmd
	in        *os.File // its stdin
	out       *os.File // its stdout
	stderr    *head
	done      chan struct{} // closed once it has exited and been waited for
	idleTimer *time.Timer
}

// start starts a worker and keeps its figures when it ends.
func (s *Sandbox) start() (*worker, error) {
	w, err := startWorker(s.cfg)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.live[w] = true
	s.stats.Workers++
	s.mu.Unlock()
	go func() {
		<-w.done
		s.ended(w)
	}()
	return w, nil
}

func startWorker(cfg SandboxConfig) (*worker, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("render: start a render worker: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		_ = inR.Close()
		_ = inW.Close()
		return nil, fmt.Errorf("render: start a render worker: %w", err)
	}
	cmd := exec.Command(cfg.Command[0], cfg.Command[1:]...)
	// NOTE: no stack dump when a worker dies; its first line says why.
	cmd.Env = append(os.Environ(), workerEnv+"="+strconv.FormatInt(cfg.Memory, 10), "GOTRACEBACK=none")
	cmd.Stdin, cmd.Stdout = inR, outW
	w := &worker{cmd: cmd, in: inW, out: outR, stderr: &head{max: 4096}, done: make(chan struct{})}
	cmd.Stderr = w.stderr
	cmd.SysProcAttr = workerProcAttr()
	err = cmd.Start()
	_ = inR.Close()
	_ = outW.Close()
	if err != nil {
		_ = inW.Close()
		_ = outR.Close()
		return nil, fmt.Errorf("render: start the render worker %s: %w", cfg.Command[0], err)
	}
	go func() {
		_ = cmd.Wait()
		close(w.done)
	}()
	return w, nil
}

// call sends one request and waits for its response, for at most timeout.
func (w *worker) call(ctx context.Context, req []byte, timeout time.Duration) ([]byte, error) {
	type reply struct {
		data []byte
		err  error
	}
	replies := make(chan reply, 1)
	go func() {
		if err := writeFrame(w.in, req); err != nil {
			replies <- reply{err: err}
			return
		}
		data, err := readFrame(w.out, maxTemplateOutput)
		replies <- reply{data, err}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r := <-replies:
		return r.data, r.err
	case <-timer.C:
		return nil, &LimitError{Bound: "time"}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// stop kills the worker and closes this side's pipes; the reader of a call
// still running gets an error.
func (w *worker) stop() {
	if w.cmd.Process != nil {
		_ = w.cmd.Process.Kill()
	}
	_ = w.in.Close()
	_ = w.out.Close()
}

// wait waits for the worker to exit and returns its peak RSS in bytes, or
// 0 when unknown.
func (w *worker) wait() int64 {
	<-w.done
	if ru, ok := w.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && ru != nil {
		return int64(ru.Maxrss) << 10
	}
	return 0
}

// killedBySignal reports whether a process ended by SIGKILL.
func killedBySignal(ps *os.ProcessState) bool {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func (w *worker) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// outOfMemory reports whether the worker died of its memory bound: the Go
// runtime says so on stderr when the kernel refuses it more memory.
func (w *worker) outOfMemory() bool {
	return diedOfMemory(w.stderr.bytes())
}

// memoryDeaths are the first words of what the Go runtime writes when the
// kernel refuses it memory. A new thread's stack is data memory too, so
// past the bound the runtime can die starting a thread for the collector,
// before it ever fails a heap allocation; on a busy machine that is common.
var memoryDeaths = [][]byte{
	[]byte("out of memory"),
	[]byte("cannot allocate memory"),
	[]byte("pthread_create failed"),          // a thread started through cgo
	[]byte("failed to create new OS thread"), // a thread started by the runtime
}

// diedOfMemory reports whether a worker's stderr says it died for memory.
func diedOfMemory(stderr []byte) bool {
	return slices.ContainsFunc(memoryDeaths, func(m []byte) bool { return bytes.Contains(stderr, m) })
}

// head keeps the first max bytes written to it: a worker's stderr, whose
// first line says why it died. Nothing of it is shown; a runtime's message
// can quote memory, and memory holds values.
type head struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (h *head) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.max - len(h.buf); room > 0 {
		h.buf = append(h.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (h *head) bytes() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.buf)
}

// writeFrame writes a length-prefixed message.
func writeFrame(w io.Writer, data []byte) error {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(data)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	_, err := w.Write(data)
	return err
}

// errOutputTooLarge is a message longer than the reader takes.
var errOutputTooLarge = errors.New("the message is too large")

// readFrame reads a length-prefixed message of at most limit bytes.
func readFrame(r io.Reader, limit uint64) ([]byte, error) {
	var n [8]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.LittleEndian.Uint64(n[:])
	if size > limit {
		return nil, fmt.Errorf("%w: %d bytes, more than the limit of %d", errOutputTooLarge, size, limit)
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, err
	}
	return data, nil
}
