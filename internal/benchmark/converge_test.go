package benchmark_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testcluster"
	"capstan.dev/capstan/internal/testcontroller"
)

// Settings of BenchmarkConverge, from the environment so that
// `go test ./...` passes no unknown flag to other packages.
const (
	// envAddons is how many add-ons to converge; default 200.
	envAddons = "CAPSTAN_BENCH_ADDONS"
	// envConcurrency is the controller's --max-concurrent-reconciles; default 8.
	envConcurrency = "CAPSTAN_BENCH_CONCURRENCY"
	// envTimeout bounds the wait for every add-on to be ready; default 30m.
	envTimeout = "CAPSTAN_BENCH_TIMEOUT"
	// envSource is where the add-ons come from: "git" (a folder each in a
	// local git repository, the default) or "chart" (one chart from an
	// https chart repository on loopback).
	envSource = "CAPSTAN_BENCH_SOURCE"
	// envFloor, set to 0, skips the floor (see floor_test.go).
	envFloor = "CAPSTAN_BENCH_FLOOR"
	// envControllerArgs are more flags for the controller, separated by
	// spaces, such as --pprof-bind-address=127.0.0.1:6060 to profile it.
	envControllerArgs = "CAPSTAN_BENCH_CONTROLLER_ARGS"
	// envControllerEnv is more of the controller's environment, as
	// NAME=value words, such as GOGC=200 or GOMAXPROCS=1.
	envControllerEnv = "CAPSTAN_BENCH_CONTROLLER_ENV"
)

var cluster *testcluster.Cluster

// TestMain starts the local control plane only when -bench selects
// BenchmarkConverge: `go test ./...` (make test) starts nothing and takes
// no time here.
func TestMain(m *testing.M) {
	if os.Getenv(envProbeChild) == "1" {
		runSpeedProbe()
		return
	}
	flag.Parse()
	// The benchmark's own clients log nothing worth reading; without a
	// logger controller-runtime prints a warning with a stack instead.
	logf.SetLogger(logr.Discard())
	if !benchSelected("BenchmarkConverge") {
		os.Exit(m.Run())
	}
	testcluster.Main(m, func(c *testcluster.Cluster) { cluster = c })
}

// benchSelected reports whether -test.bench selects the top-level
// benchmark name, as the testing package matches it.
func benchSelected(name string) bool {
	f := flag.Lookup("test.bench")
	if f == nil || f.Value.String() == "" {
		return false
	}
	first, _, _ := strings.Cut(f.Value.String(), "/")
	re, err := regexp.Compile(first)
	return err == nil && re.MatchString(name)
}

// speed measures the machine's speed through the run.
var speed *speedProbe

// converged holds the figures of the one run in this process.
var converged *figures

// BenchmarkConverge is issue 6: converge 200 add-ons of 20 objects each from
// cold on the local control plane, with the controller as a process of its
// own. It reports the wall time until every Addon is Ready, the controller's
// API requests per add-on for the install and for one no-op resync, and its
// peak RSS.
//
// The scenario runs once per process, whatever b.N is: run it with
// -benchtime=1x (make bench-converge). Under the default -benchtime=1s it
// also runs once, since one run takes far more than a second; a larger b.N
// reports the same figures again rather than converge another 200 add-ons.
func BenchmarkConverge(b *testing.B) {
	b.StopTimer()
	if converged == nil {
		f := runConverge(b)
		converged = &f
		converged.log(b)
	} else {
		b.Logf("the scenario ran once in this process; b.N=%d reports its figures again", b.N)
	}
	converged.report(b)
}

// figures are what one run measured.
type figures struct {
	source              string
	addons, concurrency int
	floors              [2]floorRun   // the bare server-side-apply client, same objects: before Capstan and after
	floorAs             string        // the floor's identity
	bookkept            floorRun      // the floor with Capstan's bookkeeping, when envBookkeeping asks for it
	converge            time.Duration // first Addon created → all Ready
	resyncTime          time.Duration // first annotation → all reconciled once
	install, resync     phase
	peakRSSKiB          int64
	cpu                 time.Duration // the controller's CPU time, all of its life
	workers             snapshot      // the render workers' figures, at the end
	capstanCPU          cpuUse        // the CPU of the control plane, the controller and the benchmark during the install
	capstanWindow       time.Duration // how long capstanCPU was read over
	idle                cpuUse        // the same parts' CPU over idleSample with nothing to do, before the first floor
	capstanSpeed        probeReading  // the speed probe's medians during the install
	capstanWrites       writeCensus   // every writer's writes during the install
	addonBytes          [2]int        // one Addon's JSON after the install, whole and its status
	logErrors           []string
	throttled           int
}

// floorRun is one run of the floor: its time to all Available, and the CPU
// of the control plane and the benchmark (the floor's client) meanwhile.
type floorRun struct {
	took   time.Duration
	cpu    cpuUse
	window time.Duration // how long cpu was read over
	speed  probeReading  // the speed probe's medians meanwhile
	writes writeCensus   // every writer's writes meanwhile
}

// floor is the floor's time for the ratio: the mean of its run before
// Capstan's install and its run after. The floor's time varies from run
// to run by a fifth or more (the API server's CPU for the floor's same
// requests ranged from 31.6 to 43.1 s in four runs of one afternoon, and
// the speed probe shows that the machine's own speed moves less), so the
// two runs bracket Capstan's window, and a drift between them weighs on
// both sides alike.
func (f *figures) floor() time.Duration {
	if f.floors[0].took == 0 || f.floors[1].took == 0 {
		return 0
	}
	return (f.floors[0].took + f.floors[1].took) / 2
}

// sameWork names the parts of the control plane whose work is the same in
// every turn: each turn's pods are scheduled, and its Deployments,
// ReplicaSets, pods and endpoints made, by the same requests (the audit
// log's census shows it). What they spend on it in a window is taken as a
// reading of the machine's speed then, as the host's load moves it: the
// speed probe, a few milliseconds of fixed work a second, does not follow
// that drift, and these seconds of work do. It is a reading, not a
// measure: Capstan's own load shares the cores in its window, and what
// that costs every process is read as the machine's slowness, so the
// ratio divided by it may read low. The controller manager also handles
// Capstan's own objects (its garbage collector sees every Addon write and
// event), and reads Capstan's window a few percent slower than the
// scheduler does; the scheduler handles none of them, but with fewer
// seconds of work it reads less precisely. Their idle work is taken out
// (see idleSample).
var sameWork = []struct{ part, label, metric string }{
	{"kube-scheduler", "the scheduler's", "x-cpu-scheduler"},
	{"kube-controller-manager", "the controller manager's", "x-cpu-controller-manager"},
}

// idleSample is how long the benchmark reads what the control plane spends
// with nothing to do, before the first floor. That idle work (leases,
// resyncs) lasts as long as a window does, and Capstan's is the longer:
// the gauge takes it out, or the parts of the control plane would read
// Capstan's window slower than the machine was. The kernel counts CPU in
// 10 ms ticks, so 15 s reads the idle rate to within 0.7 ms a second.
const idleSample = 15 * time.Second

// mustIdle reads the CPU of every part over idleSample.
func mustIdle(b *testing.B) cpuUse {
	b.Helper()
	before := mustCPU(b)
	time.Sleep(idleSample)
	return mustCPU(b).since(before)
}

// gauge is how much more CPU part spent on its work in Capstan's window
// than in the floors' (their mean), its idle work over each window taken
// out; 0 without both floors.
func (f *figures) gauge(part string) float64 {
	if f.floor() == 0 {
		return 0
	}
	busy := func(u cpuUse, window time.Duration) float64 {
		return u[part].Seconds() - f.idle[part].Seconds()*window.Seconds()/idleSample.Seconds()
	}
	mean := (busy(f.floors[0].cpu, f.floors[0].window) + busy(f.floors[1].cpu, f.floors[1].window)) / 2
	capstan := busy(f.capstanCPU, f.capstanWindow)
	if mean <= 0 || capstan <= 0 {
		return 0
	}
	return capstan / mean
}

// phase is what the controller did between two snapshots.
type phase struct {
	requests   float64
	byMethod   map[string]float64 // rest_client_requests_total by method
	byCode     map[string]float64 // ... by HTTP status code
	reconciles float64            // controller_runtime_reconcile_total{controller="addon"}
	errors     float64            // ... with result="error"
	writes     map[string]int     // the controller's writes, from the API server's audit log
}

func runConverge(b *testing.B) figures {
	n := envInt(b, envAddons, 200)
	conc := envInt(b, envConcurrency, 8)
	timeout := 30 * time.Minute
	if v := os.Getenv(envTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("%s=%q: %v", envTimeout, v, err)
		}
		timeout = d
	}
	if cluster == nil {
		b.Fatal("no control plane: TestMain starts it only when -bench selects BenchmarkConverge")
	}
	ctx := b.Context()
	dir := b.TempDir()

	admin, err := client.New(cluster.Config, client.Options{Scheme: scheme()})
	if err != nil {
		b.Fatal(err)
	}
	if err := install.Apply(ctx, admin, false); err != nil {
		b.Fatalf("installing Capstan's CRDs and RBAC: %v", err)
	}
	src := os.Getenv(envSource)
	if src == "" {
		src = "git"
	}
	args := []string{
		// Long enough that no periodic resync falls inside the run: the
		// resync is asked for explicitly, once.
		"--resync-interval=1h",
		"--max-concurrent-reconciles=" + strconv.Itoa(conc),
	}
	var addon func(i int) *capstanv1.Addon
	switch src {
	case "git":
		url, commit, err := writeRepository(dir, n)
		if err != nil {
			b.Fatalf("writing the add-ons' git repository: %v", err)
		}
		addon = func(i int) *capstanv1.Addon { return newAddon(i, url, commit) }
	case "chart":
		repo, err := newChartRepo(dir)
		if err != nil {
			b.Fatalf("serving the chart repository: %v", err)
		}
		defer repo.srv.Close()
		args = append(args, "--ca-file="+repo.caFile, "--fetch-allow="+repo.srv.Listener.Addr().String())
		addon = func(i int) *capstanv1.Addon { return newChartAddon(i, repo.srv.URL) }
	default:
		b.Fatalf("%s=%q: want git or chart", envSource, src)
	}
	args = append(args, strings.Fields(os.Getenv(envControllerArgs))...)
	buildCtx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	bin, err := testcontroller.Build(buildCtx, dir)
	cancel()
	if err != nil {
		b.Fatal(err)
	}
	withFloor := os.Getenv(envFloor) != "0"
	speed, err = startSpeedProbe()
	if err != nil {
		b.Fatal(err)
	}
	defer speed.Stop()
	var floors [2]floorRun
	var floorAs string
	var idle cpuUse
	if withFloor {
		idle = mustIdle(b)
		// The first run of the floor, before the controller starts, on the
		// empty control plane; cleared again before Capstan's install.
		floors[0], floorAs = mustFloor(ctx, b, n, timeout, "apiserver-floor-before", nil)
		if err := clearTurn(ctx, admin, "the floor", floorName, n, timeout); err != nil {
			b.Fatal(err)
		}
		time.Sleep(settleBetween)
	}
	ctrl := testcontroller.StartWithEnv(b, cluster, bin, dir, strings.Fields(os.Getenv(envControllerEnv)), args...)

	base := mustQuiet(b, ctrl, "the controller to settle after its start")
	baseWrites := mustWrites(b)

	watched, stopWatch, err := watchFor(ctx, cluster.Config, &capstanv1.Addon{}, install.Namespace, map[string]string{runLabel: "converge"})
	if err != nil {
		b.Fatal(err)
	}
	defer stopWatch()

	// Install: from the first Addon's creation until every one is ready.
	cpuBefore := mustCPU(b)
	_, ctrlCPUBefore, err := ctrl.ProcStatus()
	if err != nil {
		b.Fatal(err)
	}
	profiled := startProfile(ctx, cluster.Config, "apiserver-capstan")
	b.StartTimer()
	began := time.Now()
	for i := range n {
		if err := admin.Create(ctx, addon(i)); err != nil {
			b.Fatalf("creating Addon %s: %v", addonName(i), err)
		}
	}
	readyAt, err := waitAllReady(ctx, watched, n, timeout, ctrl.Alive, b.Logf)
	b.StopTimer()
	if err != nil {
		b.Fatalf("%v\ncontroller log:\n%s", err, ctrl.LogTail(20))
	}
	f := figures{source: src, addons: n, concurrency: conc, converge: readyAt.Sub(began), floors: floors, floorAs: floorAs, idle: idle}
	f.capstanCPU = mustCPU(b).since(cpuBefore)
	f.capstanWindow = time.Since(began)
	if _, ctrlCPU, err := ctrl.ProcStatus(); err == nil {
		f.capstanCPU["capstan"] = ctrlCPU - ctrlCPUBefore
	}
	f.capstanSpeed, _ = speed.median(began, readyAt)
	// NOTE: the census reads and decodes the whole audit log, seconds of
	// this process's CPU: it comes after the window's CPU is read, as it
	// does after the floor's.
	f.capstanWrites = mustCensus(b, began, readyAt)
	if err := profiled(); err != nil {
		b.Error(err)
	}
	// The reconciles that the last status writes queue are part of the
	// install: wait until the controller is idle.
	installed := mustQuiet(b, ctrl, "the controller to go idle after the install")
	installedWrites := mustWrites(b)
	f.install = diff(base, installed, baseWrites, installedWrites)
	f.addonBytes, err = addonSize(ctx, admin, addonName(0))
	if err != nil {
		b.Fatal(err)
	}

	// One no-op resync of every add-on.
	began = time.Now()
	if err := touchAddons(ctx, admin, n); err != nil {
		b.Fatal(err)
	}
	target := installed.reconciles + float64(n)
	for i := 0; ; i++ {
		s, err := snapshotOf(ctx, ctrl)
		if err == nil && s.reconciles >= target {
			f.resyncTime = time.Since(began)
			break
		}
		if err := ctrl.Alive(); err != nil {
			b.Fatal(err)
		}
		if i >= 4*int(timeout/time.Second) {
			b.Fatalf("the resync did not reconcile %d add-ons within %s (last error %v)", n, timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	resynced := mustQuiet(b, ctrl, "the controller to go idle after the resync")
	f.resync = diff(installed, resynced, installedWrites, mustWrites(b))
	if c, err := census(ctx, admin); err != nil || c.ready != n {
		b.Errorf("after the resync: %v %v", c, err)
	}

	f.peakRSSKiB, f.cpu, err = ctrl.ProcStatus()
	if err != nil {
		b.Fatalf("reading the controller's /proc status: %v", err)
	}
	if f.workers, err = snapshotOf(ctx, ctrl); err != nil {
		b.Fatalf("reading the render workers' figures: %v", err)
	}
	ctrl.Stop()
	f.logErrors, f.throttled = ctrl.LogProblems()
	if withFloor {
		// The second run of the floor starts on a control plane as empty as
		// Capstan's was.
		if err := clearTurn(ctx, admin, "capstan", addonName, n, timeout); err != nil {
			b.Fatal(err)
		}
		time.Sleep(settleBetween)
		f.floors[1], _ = mustFloor(ctx, b, n, timeout, "apiserver-floor", nil)
		if os.Getenv(envBookkeeping) == "1" {
			keep, err := newBookkeeping(cluster)
			if err != nil {
				b.Fatal(err)
			}
			if err := clearTurn(ctx, admin, "the floor", floorName, n, timeout); err != nil {
				b.Fatal(err)
			}
			time.Sleep(settleBetween)
			f.bookkept, _ = mustFloor(ctx, b, n, timeout, "apiserver-floor-bookkept", keep)
		}
	}
	return f
}

// mustFloor runs the floor once, with keep's bookkeeping if set and a CPU
// profile of the API server named profileName when profiles are asked for,
// and returns it with the floor's identity.
func mustFloor(ctx context.Context, b *testing.B, n int, timeout time.Duration, profileName string, keep *bookkeeping) (floorRun, string) {
	b.Helper()
	floor, as, err := floorClient(cluster)
	if err != nil {
		b.Fatal(err)
	}
	cpuBefore := mustCPU(b)
	profiled := startProfile(ctx, cluster.Config, profileName)
	began := time.Now()
	took, err := runFloor(ctx, floor, cluster.Config, n, timeout, keep)
	if err != nil {
		b.Fatal(err)
	}
	run := floorRun{took: took, cpu: mustCPU(b).since(cpuBefore)}
	ended := time.Now()
	run.window = ended.Sub(began)
	run.speed, _ = speed.median(began, ended)
	run.writes = mustCensus(b, began, ended)
	if err := profiled(); err != nil {
		b.Error(err)
	}
	return run, as
}

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, capstanv1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

func envInt(b *testing.B, key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", key, v)
	}
	return n
}

// snapshot is the controller's counters at one moment.
type snapshot struct {
	requests   float64
	byMethod   map[string]float64
	byCode     map[string]float64
	reconciles float64
	errors     float64
	busy       float64 // queued plus running reconciles of Addons
	// The render workers' CPU time (s), largest peak RSS (bytes), and count.
	workerCPU, workerPeak, workers float64
}

func snapshotOf(ctx context.Context, p *testcontroller.Process) (snapshot, error) {
	samples, err := p.Samples(ctx)
	if err != nil {
		return snapshot{}, err
	}
	s := snapshot{byMethod: map[string]float64{}, byCode: map[string]float64{}}
	for _, m := range samples {
		switch {
		case m.Name == "rest_client_requests_total":
			s.requests += m.Value
			s.byMethod[m.Labels["method"]] += m.Value
			s.byCode[m.Labels["code"]] += m.Value
		case m.Name == "controller_runtime_reconcile_total" && m.Labels["controller"] == "addon":
			s.reconciles += m.Value
			if m.Labels["result"] == "error" {
				s.errors += m.Value
			}
		case m.Name == "workqueue_depth" && m.Labels["name"] == "addon",
			m.Name == "controller_runtime_active_workers" && m.Labels["controller"] == "addon":
			s.busy += m.Value
		case m.Name == "capstan_render_sandbox_cpu_seconds_total":
			s.workerCPU = m.Value
		case m.Name == "capstan_render_sandbox_peak_rss_bytes":
			s.workerPeak = m.Value
		case m.Name == "capstan_render_sandbox_workers_started_total":
			s.workers = m.Value
		}
	}
	return s, nil
}

// mustQuiet waits until no Addon is queued or reconciling and the request
// count has not moved for three scrapes a second apart, up to 5 minutes.
func mustQuiet(b *testing.B, p *testcontroller.Process, what string) snapshot {
	b.Helper()
	var last snapshot
	var lastErr error
	stable := 0
	for range 300 {
		s, err := snapshotOf(b.Context(), p)
		switch {
		case err != nil:
			lastErr, stable = err, 0
		case s.busy == 0 && s.requests == last.requests:
			stable++
		default:
			stable = 0
		}
		if err == nil {
			last = s
		}
		if stable >= 3 {
			return last
		}
		if err := p.Alive(); err != nil {
			b.Fatal(err)
		}
		time.Sleep(time.Second)
	}
	b.Fatalf("waited 5 minutes for %s; last scrape error: %v", what, lastErr)
	return last
}

// addonSize is the size of one Addon's JSON as the API server stores it,
// whole and its status alone: every status write costs the API server in
// proportion to it.
func addonSize(ctx context.Context, c client.Client, name string) ([2]int, error) {
	a := &capstanv1.Addon{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: name}, a); err != nil {
		return [2]int{}, err
	}
	whole, err := json.Marshal(a)
	if err != nil {
		return [2]int{}, err
	}
	status, err := json.Marshal(a.Status)
	return [2]int{len(whole), len(status)}, err
}

// mustCPU reads the CPU times of the machine's working processes.
func mustCPU(b *testing.B) cpuUse {
	b.Helper()
	u, err := workingCPU()
	if err != nil {
		b.Fatal(err)
	}
	return u
}

// mustWrites counts the controller's writes so far by kind, from the API
// server's audit log, which records every write (reads are not recorded).
func mustWrites(b *testing.B) map[string]int {
	b.Helper()
	events, err := cluster.AuditEvents()
	if err != nil {
		b.Fatalf("reading the audit log: %v", err)
	}
	out := map[string]int{}
	for _, e := range events {
		if e.Stage != auditv1.StageResponseComplete || e.User.Username != install.ControllerUser {
			continue
		}
		kind := writeKind(e)
		out[kind]++
		// NOTE: what the API server spent on each kind of request, from
		// receiving it to its response, in the same map under a prefix of
		// its own, so the snapshots diff alike.
		if !e.StageTimestamp.IsZero() && !e.RequestReceivedTimestamp.IsZero() {
			out[serverTimePrefix+kind] += int(e.StageTimestamp.Sub(e.RequestReceivedTimestamp.Time).Microseconds())
		}
	}
	return out
}

// serverTimePrefix marks the writes' entries that hold the API server's
// time on them, in microseconds.
const serverTimePrefix = "server µs: "

// writeKind names what a write of the controller was for.
func writeKind(e auditv1.Event) string {
	resource := resourceOf(e)
	switch {
	case strings.Contains(e.RequestURI, "dryRun="):
		return e.Verb + " dry-run apply (preview)"
	case resource == "addons/status":
		return e.Verb + " addons/status"
	case resource == "addons":
		return e.Verb + " addons (finalizer)"
	case e.ImpersonatedUser != nil && e.Verb == "patch":
		return "patch apply"
	}
	return e.Verb + " " + resource
}

// resourceOf is the resource an audited request wrote, with its
// subresource: "addons/status".
func resourceOf(e auditv1.Event) string {
	if e.ObjectRef == nil {
		return ""
	}
	if e.ObjectRef.Subresource != "" {
		return e.ObjectRef.Resource + "/" + e.ObjectRef.Subresource
	}
	return e.ObjectRef.Resource
}

func diff(a, b snapshot, wa, wb map[string]int) phase {
	p := phase{
		requests:   b.requests - a.requests,
		byMethod:   map[string]float64{},
		byCode:     map[string]float64{},
		reconciles: b.reconciles - a.reconciles,
		errors:     b.errors - a.errors,
		writes:     map[string]int{},
	}
	for k, v := range b.byMethod {
		if d := v - a.byMethod[k]; d != 0 {
			p.byMethod[k] = d
		}
	}
	for k, v := range b.byCode {
		if d := v - a.byCode[k]; d != 0 {
			p.byCode[k] = d
		}
	}
	for k, v := range wb {
		if d := v - wa[k]; d != 0 {
			p.writes[k] = d
		}
	}
	return p
}

func (f *figures) report(b *testing.B) {
	n := float64(f.addons)
	b.ReportMetric(float64(f.converge.Nanoseconds()), "ns/op")
	b.ReportMetric(f.converge.Seconds(), "s/converge")
	b.ReportMetric(f.install.requests/n, "req/addon-install")
	b.ReportMetric(f.resync.requests/n, "req/addon-resync")
	b.ReportMetric(float64(f.peakRSSKiB)/1024, "MiB-peak-rss")
	b.ReportMetric(f.cpu.Seconds(), "s-controller-cpu")
	b.ReportMetric(f.workers.workerCPU, "s-render-worker-cpu")
	b.ReportMetric(f.workers.workerPeak/(1<<20), "MiB-render-worker-peak-rss")
	if floor := f.floor(); floor > 0 {
		b.ReportMetric(f.floors[0].took.Seconds(), "s/floor-before")
		b.ReportMetric(f.floors[1].took.Seconds(), "s/floor-after")
		b.ReportMetric(f.converge.Seconds()/floor.Seconds(), "x-floor")
		for _, w := range sameWork {
			if g := f.gauge(w.part); g > 0 {
				b.ReportMetric(g, w.metric)
			}
		}
	}
	msOf := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(msOf(f.capstanSpeed.work), "ms-probe-capstan")
	b.ReportMetric(msOf(f.capstanSpeed.memory), "ms-probe-mem-capstan")
	if f.floor() > 0 {
		b.ReportMetric(msOf(f.floors[0].speed.work), "ms-probe-floor-before")
		b.ReportMetric(msOf(f.floors[1].speed.work), "ms-probe-floor-after")
		b.ReportMetric(msOf(f.floors[0].speed.memory), "ms-probe-mem-floor-before")
		b.ReportMetric(msOf(f.floors[1].speed.memory), "ms-probe-mem-floor-after")
	}
	if f.bookkept.took > 0 {
		b.ReportMetric(f.bookkept.took.Seconds(), "s/floor-bookkept")
		b.ReportMetric(f.converge.Seconds()/f.bookkept.took.Seconds(), "x-floor-bookkept")
	}
}

func (f *figures) log(b *testing.B) {
	n := float64(f.addons)
	var s strings.Builder
	fmt.Fprintf(&s, "%d add-ons of %d objects (+1 namespace from createNamespace) from %s, --max-concurrent-reconciles=%d\n",
		f.addons, objectsPerAddon, f.source, f.concurrency)
	fmt.Fprintf(&s, "  %-44s %10s\n", "wall time, first Addon created → all Ready", f.converge.Round(100*time.Millisecond))
	if floor := f.floor(); floor > 0 {
		fmt.Fprintf(&s, "  %-44s %10s   (%s)\n", fmt.Sprintf("the floor (bare SSA, %d workers) → all Available", floorWorkers), floor.Round(100*time.Millisecond), f.floorAs)
		fmt.Fprintf(&s, "  %-44s %10s / %s\n", "  its runs before / after Capstan's", f.floors[0].took.Round(100*time.Millisecond), f.floors[1].took.Round(100*time.Millisecond))
		fmt.Fprintf(&s, "  %-44s %10.2f   (%.2f and %.2f to each run)\n", "Capstan's time / the floor's", f.converge.Seconds()/floor.Seconds(),
			f.converge.Seconds()/f.floors[0].took.Seconds(), f.converge.Seconds()/f.floors[1].took.Seconds())
	}
	if f.bookkept.took > 0 {
		fmt.Fprintf(&s, "  %-44s %10s   (%.2f of the floor's)\n", "the floor with Capstan's bookkeeping, last", f.bookkept.took.Round(100*time.Millisecond), f.bookkept.took.Seconds()/f.floor().Seconds())
		fmt.Fprintf(&s, "  %-44s %10.2f\n", "Capstan's time / the bookkept floor's", f.converge.Seconds()/f.bookkept.took.Seconds())
	}
	fmt.Fprintf(&s, "  %-44s %10d B (status %d B)\n", "one Addon after the install, as JSON", f.addonBytes[0], f.addonBytes[1])
	fmt.Fprintf(&s, "  CPU during Capstan's install: %s\n", f.capstanCPU)
	if f.floor() > 0 {
		fmt.Fprintf(&s, "  CPU during the floor, before: %s\n", f.floors[0].cpu)
		fmt.Fprintf(&s, "  CPU during the floor, after:  %s\n", f.floors[1].cpu)
	}
	if f.bookkept.took > 0 {
		fmt.Fprintf(&s, "  CPU during the bookkept floor: %s\n", f.bookkept.cpu)
	}
	if floor := f.floor(); floor > 0 {
		// NOTE: a reading of the machine's speed, beside the ratio and not
		// in place of it: the target is the wall-time ratio above, and
		// this reading may take some of Capstan's cost for the machine's.
		var idle, read, adjusted []string
		for _, w := range sameWork {
			idle = append(idle, fmt.Sprintf("%s %.2f s", w.part, f.idle[w.part].Seconds()))
			if g := f.gauge(w.part); g > 0 {
				read = append(read, fmt.Sprintf("%s %.2f", w.part, g))
				adjusted = append(adjusted, fmt.Sprintf("at %s speed %.2f", w.label, f.converge.Seconds()/floor.Seconds()/g))
			}
		}
		if len(read) > 0 {
			fmt.Fprintf(&s, "  idle for %s before the first floor, CPU: %s\n", idleSample, strings.Join(idle, ", "))
			fmt.Fprintf(&s, "  the same work in each turn, CPU in Capstan's window / the floors' (idle taken out): %s\n", strings.Join(read, ", "))
			fmt.Fprintf(&s, "    so Capstan's time / the floor's, %s\n", strings.Join(adjusted, ", "))
		}
	}
	// NOTE: on a loaded machine the probe's work takes longer than alone
	// (BenchmarkSpeedProbe); what matters is how the turns compare.
	for _, probe := range []struct {
		what string
		of   func(probeReading) time.Duration
	}{
		{"speed probe, CPU for its fixed work: Capstan", func(r probeReading) time.Duration { return r.work }},
		{"  and for its walk through memory: Capstan", func(r probeReading) time.Duration { return r.memory }},
	} {
		fmt.Fprintf(&s, "  %-44s %10s", probe.what, ms(probe.of(f.capstanSpeed)))
		if f.floor() > 0 {
			fmt.Fprintf(&s, "   floor before %s, after %s", ms(probe.of(f.floors[0].speed)), ms(probe.of(f.floors[1].speed)))
		}
		if f.bookkept.took > 0 {
			fmt.Fprintf(&s, ", bookkept %s", ms(probe.of(f.bookkept.speed)))
		}
		fmt.Fprintf(&s, "\n")
	}
	if f.floor() > 0 {
		names := []string{"floor before", "Capstan", "floor after"}
		turns := []writeCensus{f.floors[0].writes, f.capstanWrites, f.floors[1].writes}
		if f.bookkept.took > 0 {
			names, turns = append(names, "bookkept"), append(turns, f.bookkept.writes)
		}
		logCensus(&s, f.addons, names, turns)
	}
	fmt.Fprintf(&s, "  %-44s %10s\n", "no-op resync of all, first touch → all done", f.resyncTime.Round(100*time.Millisecond))
	fmt.Fprintf(&s, "  %-44s %10.1f MiB\n", "controller peak RSS (VmHWM)", float64(f.peakRSSKiB)/1024)
	fmt.Fprintf(&s, "  %-44s %10.1f s\n", "controller CPU time (whole life)", f.cpu.Seconds())
	fmt.Fprintf(&s, "  %-44s %10.0f\n", "render workers started", f.workers.workers)
	fmt.Fprintf(&s, "  %-44s %10.1f MiB\n", "render worker peak RSS, largest", f.workers.workerPeak/(1<<20))
	fmt.Fprintf(&s, "  %-44s %10.1f s\n", "render workers' CPU time", f.workers.workerCPU)
	fmt.Fprintf(&s, "  %-44s %10s %10s\n", "API requests of the controller", "install", "resync")
	row := func(label string, install, resync float64) {
		fmt.Fprintf(&s, "  %-44s %10.1f %10.1f   (%.0f / %.0f in all)\n", label, install/n, resync/n, install, resync)
	}
	row("per add-on, all", f.install.requests, f.resync.requests)
	for _, k := range union(keys(f.install.byMethod), keys(f.resync.byMethod)) {
		row("  method "+k, f.install.byMethod[k], f.resync.byMethod[k])
	}
	for _, k := range union(keys(f.install.byCode), keys(f.resync.byCode)) {
		row("  code "+k, f.install.byCode[k], f.resync.byCode[k])
	}
	fmt.Fprintf(&s, "  writes by kind (audit log), per add-on\n")
	kinds := union(keys(f.install.writes), keys(f.resync.writes))
	for _, k := range kinds {
		if !strings.HasPrefix(k, serverTimePrefix) {
			row("  "+k, float64(f.install.writes[k]), float64(f.resync.writes[k]))
		}
	}
	fmt.Fprintf(&s, "  the API server's time on them (received → answered), ms per add-on\n")
	for _, k := range kinds {
		if name, ok := strings.CutPrefix(k, serverTimePrefix); ok {
			fmt.Fprintf(&s, "    %-42s %10.1f %10.1f\n", name, float64(f.install.writes[k])/1000/n, float64(f.resync.writes[k])/1000/n)
		}
	}
	row("reconciles of Addons", f.install.reconciles, f.resync.reconciles)
	row("  with an error", f.install.errors, f.resync.errors)
	fmt.Fprintf(&s, "  controller log: %d error line(s), %d client-side throttling line(s)\n", len(f.logErrors), f.throttled)
	for i, line := range f.logErrors {
		if i == 5 {
			fmt.Fprintf(&s, "    ... and %d more\n", len(f.logErrors)-5)
			break
		}
		fmt.Fprintf(&s, "    %s\n", truncate(line, 400))
	}
	b.Log("\n" + s.String())
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func union(a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, k := range append(a, b...) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// ms writes a duration in milliseconds, to a tenth.
func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
