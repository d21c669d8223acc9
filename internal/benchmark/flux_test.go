package benchmark_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testcluster"
	"capstan.dev/capstan/internal/testcontroller"
)

// Settings of BenchmarkAgainstFlux, besides envAddons (default 100 here)
// and envTimeout (the bound of every wait for the add-ons, default 20m).
const (
	// envOrder is the order the three tools run in, comma-separated;
	// default "capstan,floor,flux".
	envOrder = "CAPSTAN_BENCH_ORDER"
	// envControllerBin is a capstan binary to run as the controller
	// instead of one built from the checkout, such as one built from a
	// commit, so that a run measures a known controller.
	envControllerBin = "CAPSTAN_BENCH_CONTROLLER_BIN"
)

// The identities of Flux's controllers: service accounts bound to
// cluster-admin, as Flux's own install binds its controllers, so that the
// API server authorizes their requests with RBAC as it does Capstan's, and
// the audit log tells their writes apart from everyone else's.
const (
	helmControllerUser   = "system:serviceaccount:" + fluxNamespace + ":helm-controller"
	sourceControllerUser = "system:serviceaccount:" + fluxNamespace + ":source-controller"
)

// settleBetween is the pause between two tools, so that the control
// plane's own controllers (endpoints, garbage collection) finish with the
// last tool's objects before the next tool's time starts.
const settleBetween = 10 * time.Second

// againstFlux holds the figures of the one run in this process.
var againstFlux *fluxFigures

// BenchmarkAgainstFlux is issue 19's comparison: on one local control
// plane, n add-ons (100 by default) of one 21-object chart with 7
// Deployments, from one https chart repository on loopback, installed by
// Capstan, by the floor (a bare server-side-apply client), and by Flux's
// helm-controller with source-controller, each tool at its default
// concurrency, one after the other, into namespaces of their own. Each
// tool is stopped before the next one starts. It reports each tool's wall
// time until every add-on is ready, peak RSS and CPU, and Capstan's ratios
// to Flux and to the floor.
//
// The scenario runs once per process, whatever b.N is: run it with
// -benchtime=1x (make bench-flux). It needs bin/flux (make flux) and
// skips without it, so that `make bench` does not fail for want of Flux.
func BenchmarkAgainstFlux(b *testing.B) {
	b.StopTimer()
	if againstFlux == nil {
		f := runAgainstFlux(b)
		againstFlux = &f
		againstFlux.log(b)
	} else {
		b.Logf("the scenario ran once in this process; b.N=%d reports its figures again", b.N)
	}
	againstFlux.report(b)
}

// toolFigures are what one tool's run measured.
type toolFigures struct {
	wall    time.Duration // first add-on created → every add-on ready
	latency latencies     // each add-on's creation → Ready
	phases  addonPhases   // the same time in three parts
	procs   []procFigures // the tool's processes
	// requests are the API requests of the tool's processes (their
	// rest_client_requests_total), from before the first add-on was
	// created until the tool was idle again.
	requests float64
	writes   map[string]int // the tool's writes by kind, and the API server's µs on them
	load     [2]string      // /proc/loadavg before and after
	busy     cpuWindow      // the machine's CPU while the tool's time ran
	as       string         // the floor's identity
}

// cpuWindow is how busy the machine's cores were between two readings of
// /proc/stat, and how much of that this benchmark's own processes were:
// the test binary (the floor runs in it) and everything it started, the
// control plane and the tool. The rest is other work sharing the cores.
type cpuWindow struct {
	busy, total time.Duration            // the machine's, summed over the cores
	ours        map[string]time.Duration // by command name
}

// machineCPU reads the machine's busy and total CPU time so far, and this
// process's and its descendants'.
func machineCPU() cpuWindow {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return cpuWindow{}
	}
	st, err := fs.Stat()
	if err != nil {
		return cpuWindow{}
	}
	c := st.CPUTotal
	total := c.User + c.Nice + c.System + c.Idle + c.Iowait + c.IRQ + c.SoftIRQ + c.Steal
	sec := func(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }
	w := cpuWindow{busy: sec(total - c.Idle - c.Iowait), total: sec(total), ours: map[string]time.Duration{}}
	procs, err := fs.AllProcs()
	if err != nil {
		return w
	}
	stats := map[int]procfs.ProcStat{}
	for _, p := range procs {
		if ps, err := p.Stat(); err == nil {
			stats[p.PID] = ps
		}
	}
	self := os.Getpid()
	ours := func(pid int) bool {
		for range 64 { // deeper than any tree here
			if pid == self {
				return true
			}
			ps, ok := stats[pid]
			if !ok || ps.PPID == pid {
				return false
			}
			pid = ps.PPID
		}
		return false
	}
	for pid, ps := range stats {
		if ours(pid) {
			name := ps.Comm
			if pid == self {
				name = "benchmark"
			}
			w.ours[name] += sec(ps.CPUTime())
		}
	}
	return w
}

func (w cpuWindow) since(before cpuWindow) cpuWindow {
	out := cpuWindow{busy: w.busy - before.busy, total: w.total - before.total, ours: map[string]time.Duration{}}
	for k, v := range w.ours {
		if d := v - before.ours[k]; d > 0 {
			out.ours[k] = d
		}
	}
	return out
}

// oursTotal is the CPU of this run's processes in the window.
func (w cpuWindow) oursTotal() time.Duration {
	var t time.Duration
	for _, v := range w.ours {
		t += v
	}
	return t
}

func (w cpuWindow) String() string {
	if w.total <= 0 {
		return "?"
	}
	var ours time.Duration
	names := keys(w.ours)
	slices.SortFunc(names, func(a, b string) int { return int(w.ours[b] - w.ours[a]) })
	parts := make([]string, 0, len(names))
	for _, k := range names {
		ours += w.ours[k]
		parts = append(parts, fmt.Sprintf("%s %.1f", k, w.ours[k].Seconds()))
	}
	return fmt.Sprintf("%.0f%% busy, %.1f s of CPU: this run's %.1f s (%s), other work's %.1f s",
		100*w.busy.Seconds()/w.total.Seconds(), w.busy.Seconds(), ours.Seconds(), strings.Join(parts, ", "), (w.busy - ours).Seconds())
}

// procFigures are one process's figures at the end of its tool's run.
type procFigures struct {
	name       string
	peakRSSKiB int64
	cpu        time.Duration // all of its life
	logErrors  int
}

// fluxFigures are what one run of BenchmarkAgainstFlux measured.
type fluxFigures struct {
	addons                int
	order                 []string
	helmVersion, srcVer   string
	capstan, floor, flux  toolFigures
	capstanInstall        phase    // the controller's requests and writes
	workers               snapshot // Capstan's render workers, at the end
	capstanReconciles     float64
	capstanThrottledLines int
}

func runAgainstFlux(b *testing.B) fluxFigures {
	n := envInt(b, envAddons, 100)
	timeout := 20 * time.Minute
	if v := os.Getenv(envTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("%s=%q: %v", envTimeout, v, err)
		}
		timeout = d
	}
	order := []string{"capstan", "floor", "flux"}
	if v := os.Getenv(envOrder); v != "" {
		order = strings.Split(v, ",")
	}
	for _, tool := range order {
		if tool != "capstan" && tool != "floor" && tool != "flux" {
			b.Fatalf("%s=%q: want a comma-separated order of capstan, floor and flux", envOrder, os.Getenv(envOrder))
		}
	}
	binDir := os.Getenv(testcluster.EnvBinDir)
	if binDir == "" {
		binDir = filepath.Join("..", "..", "bin")
	}
	fluxDir, err := filepath.Abs(filepath.Join(binDir, "flux"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(fluxDir, "helm-controller")); err != nil {
		b.Skipf("%s/helm-controller is missing: make bench-flux builds Flux (make flux) and runs this", fluxDir)
	}
	ctx := b.Context()
	c := clusterFor(b)
	admin, err := client.New(c.Config, client.Options{Scheme: scheme()})
	if err != nil {
		b.Fatal(err)
	}
	if err := install.Apply(ctx, admin, false); err != nil {
		b.Fatalf("installing Capstan's CRDs and RBAC: %v", err)
	}
	var existing capstanv1.AddonList
	if err := admin.List(ctx, &existing, client.MatchingLabels{runLabel: "converge"}); err != nil {
		b.Fatal(err)
	}
	if len(existing.Items) > 0 {
		// NOTE: census counts the Addons by their label, so another
		// benchmark's would count as this one's.
		b.Skipf("%d Addons of BenchmarkConverge are on this control plane; run BenchmarkAgainstFlux in a process of its own (make bench-flux)", len(existing.Items))
	}
	if err := installFluxCRDs(ctx, admin, fluxDir); err != nil {
		b.Fatal(err)
	}

	dir := b.TempDir()
	archive, err := sevenChartArchive()
	if err != nil {
		b.Fatal(err)
	}
	repo, err := serveChart(dir, sevenChart, sevenVersion, archive)
	if err != nil {
		b.Fatalf("serving the chart repository: %v", err)
	}
	defer repo.srv.Close()
	capstanBin := os.Getenv(envControllerBin)
	if capstanBin == "" {
		buildCtx, cancel := context.WithTimeout(ctx, 20*time.Minute)
		capstanBin, err = testcontroller.Build(buildCtx, dir)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	} else if capstanBin, err = testcontroller.Named(capstanBin, dir, "capstan"); err != nil {
		// NOTE: a copy named capstan, as testcontroller.Start names the
		// controller's log after the binary.
		b.Fatal(err)
	}

	f := fluxFigures{addons: n, order: order}
	f.helmVersion, _ = readTrimmed(filepath.Join(fluxDir, "helm-controller.version"))
	f.srcVer, _ = readTrimmed(filepath.Join(fluxDir, "source-controller.version"))
	for i, tool := range order {
		if i > 0 {
			if err := clearTurn(ctx, admin, order[i-1], turnNamespaces[order[i-1]], n, timeout); err != nil {
				b.Fatal(err)
			}
			time.Sleep(settleBetween)
		}
		b.Logf("%s: installing %d add-ons", tool, n)
		profiled := startProfile(ctx, c.Config, "apiserver-"+tool)
		switch tool {
		case "capstan":
			f.runCapstan(b, c, admin, capstanBin, dir, repo, timeout)
		case "floor":
			floor, as, err := floorClient(c)
			if err != nil {
				b.Fatal(err)
			}
			f.floor.as = as
			f.floor.load[0] = loadAverage()
			cpu0 := machineCPU()
			f.floor.wall, err = runFloorOf(ctx, floor, c.Config, n, timeout, sevenManifest, sevenDeployments, nil)
			if err != nil {
				b.Fatal(err)
			}
			f.floor.busy = machineCPU().since(cpu0)
			f.floor.load[1] = loadAverage()
		case "flux":
			f.runFlux(b, c, admin, fluxDir, dir, repo, timeout)
		}
		if err := profiled(); err != nil {
			b.Logf("%s: %v", tool, err)
		}
	}
	return f
}

// turnNamespaces names the namespaces each tool's turn installs into.
var turnNamespaces = map[string]func(int) string{
	"capstan": capstanSevenName,
	"floor":   floorName,
	"flux":    fluxReleaseName,
}

// clearTurn deletes the namespaces that tool's turn installed into,
// namespace(0) to namespace(n-1), and
// waits until they are gone, so that every tool starts on a control plane
// that holds no other tool's objects. Without it the tool that runs last
// pays for the others': what a request costs the control plane grows with
// what it holds (the API server allocates each Service's ClusterIP by
// listing every address allocated so far, and the chart has seven
// Services), and a tool's turn cost the API server 23-39% more when it ran
// third than when it ran first.
func clearTurn(ctx context.Context, c client.Client, tool string, namespace func(int) string, n int, timeout time.Duration) error {
	names := make(map[string]bool, n)
	for i := range n {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace(i)}}
		if err := c.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("clearing %s's turn: deleting namespace %s: %w", tool, ns.Name, err)
		}
		names[ns.Name] = true
	}
	const interval = time.Second
	left := n
	for range int(timeout / interval) {
		var list corev1.NamespaceList
		if err := c.List(ctx, &list); err != nil {
			return fmt.Errorf("clearing %s's turn: listing namespaces: %w", tool, err)
		}
		left = 0
		for _, ns := range list.Items {
			if names[ns.Name] {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		time.Sleep(interval)
	}
	return fmt.Errorf("clearing %s's turn: %d of its %d namespaces were still there after %s", tool, left, n, timeout)
}

// clusterFor returns the control plane that TestMain started, or starts
// one: TestMain starts it only for BenchmarkConverge.
func clusterFor(b *testing.B) *testcluster.Cluster {
	if cluster != nil {
		return cluster
	}
	ctx, cancel := context.WithTimeout(b.Context(), 2*time.Minute)
	defer cancel()
	c, err := testcluster.Start(ctx)
	if err != nil {
		b.Fatalf("the test cluster did not start: %v", err)
	}
	cluster = c
	b.Cleanup(func() {
		c.Stop()
		cluster = nil
	})
	return c
}

// runCapstan runs `capstan controller` as it ships (its default
// --max-concurrent-reconciles) and installs the cluster-profile Addons.
func (f *fluxFigures) runCapstan(b *testing.B, c *testcluster.Cluster, admin client.Client, bin, dir string, repo *chartRepo, timeout time.Duration) {
	ctx := b.Context()
	args := []string{
		// Long enough that no periodic resync falls inside the run, as
		// the HelmReleases' interval is.
		"--resync-interval=1h",
		"--ca-file=" + repo.caFile,
		"--fetch-allow=" + repo.srv.Listener.Addr().String(),
	}
	ctrl := testcontroller.Start(b, c, bin, dir, append(args, strings.Fields(os.Getenv(envControllerArgs))...)...)
	base := mustQuiet(b, ctrl, "the controller to settle after its start")
	baseWrites := writesBy(b, install.ControllerUser)
	watched, stopWatch, err := watchFor(ctx, c.Config, &capstanv1.Addon{}, install.Namespace, map[string]string{runLabel: "converge"})
	if err != nil {
		b.Fatal(err)
	}
	defer stopWatch()
	f.capstan.load[0] = loadAverage()
	cpu0 := machineCPU()
	b.StartTimer()
	began := time.Now()
	for i := range f.addons {
		if err := admin.Create(ctx, newSevenAddon(i, repo.srv.URL)); err != nil {
			b.Fatalf("creating Addon %s: %v", capstanSevenName(i), err)
		}
	}
	readyAt, err := waitAllReady(ctx, watched, f.addons, timeout, ctrl.Alive, b.Logf)
	b.StopTimer()
	if err != nil {
		b.Fatalf("%v\ncontroller log:\n%s", err, ctrl.LogTail(20))
	}
	f.capstan.wall = readyAt.Sub(began)
	f.capstan.busy = machineCPU().since(cpu0)
	installed := mustQuiet(b, ctrl, "the controller to go idle after the install")
	f.capstan.load[1] = loadAverage()
	f.capstanInstall = diff(base, installed, baseWrites, writesBy(b, install.ControllerUser))
	f.capstan.requests = f.capstanInstall.requests
	f.capstan.writes = f.capstanInstall.writes
	f.capstanReconciles = f.capstanInstall.reconciles
	f.workers = installed
	peak, cpu, err := ctrl.ProcStatus()
	if err != nil {
		b.Fatalf("reading the controller's /proc status: %v", err)
	}
	if f.capstan.latency, err = addonLatencies(ctx, admin); err != nil {
		b.Fatal(err)
	}
	f.capstan.phases = mustPhases(b, admin, "Addon", "addons", install.ControllerUser)
	ctrl.Stop()
	errs, throttled := ctrl.LogProblems()
	f.capstanThrottledLines = throttled
	f.capstan.procs = []procFigures{{name: "capstan controller", peakRSSKiB: peak, cpu: cpu, logErrors: len(errs)}}
}

// runFlux runs source-controller and helm-controller at their default
// concurrency, creates the HelmRepository and waits until it is Ready,
// then creates the HelmReleases.
func (f *fluxFigures) runFlux(b *testing.B, c *testcluster.Cluster, admin client.Client, fluxDir, dir string, repo *chartRepo, timeout time.Duration) {
	ctx := b.Context()
	ports, err := testcluster.FreePorts(1)
	if err != nil {
		b.Fatal(err)
	}
	storageAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	storage := filepath.Join(dir, "flux-storage")
	if err := os.MkdirAll(storage, 0o700); err != nil {
		b.Fatal(err)
	}
	if err := fluxAccounts(ctx, admin); err != nil {
		b.Fatalf("creating Flux's service accounts: %v", err)
	}
	// helm-controller fetches each chart's artifact from source-controller's
	// file server, at the address it advertises.
	src := startFlux(b, c, fluxDir, dir, "source-controller", sourceControllerUser,
		"--storage-path="+storage, "--storage-addr="+storageAddr, "--storage-adv-addr="+storageAddr)
	helm := startFlux(b, c, fluxDir, dir, "helm-controller", helmControllerUser)
	procs := []*testcontroller.Process{src, helm}
	alive := func() error {
		for _, p := range procs {
			if err := p.Alive(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := createFluxRepository(ctx, admin, repo.srv.URL, repo.caFile); err != nil {
		b.Fatalf("%v\nsource-controller log:\n%s", err, src.LogTail(20))
	}
	before := fluxQuiet(b, procs, "Flux to settle after the HelmRepository")
	beforeWrites := writesBy(b, helmControllerUser, sourceControllerUser)
	release := &unstructured.Unstructured{}
	release.SetAPIVersion(helmReleaseAPI)
	release.SetKind("HelmRelease")
	watched, stopWatch, err := watchFor(ctx, c.Config, release, fluxNamespace, map[string]string{runLabel: fluxRunLabelValue})
	if err != nil {
		b.Fatal(err)
	}
	defer stopWatch()
	f.flux.load[0] = loadAverage()
	cpu0 := machineCPU()
	began := time.Now()
	for i := range f.addons {
		hr, err := newHelmRelease(i)
		if err != nil {
			b.Fatal(err)
		}
		if err := admin.Create(ctx, hr); err != nil {
			b.Fatalf("creating HelmRelease %s: %v", hr.GetName(), err)
		}
	}
	readyAt, err := waitReleasesReady(ctx, watched, f.addons, timeout, alive, b.Logf)
	if err != nil {
		b.Fatalf("%v\nhelm-controller log:\n%s", err, helm.LogTail(20))
	}
	f.flux.wall = readyAt.Sub(began)
	f.flux.busy = machineCPU().since(cpu0)
	after := fluxQuiet(b, procs, "Flux to go idle after the install")
	f.flux.load[1] = loadAverage()
	f.flux.requests = after - before
	f.flux.writes = writesSince(beforeWrites, writesBy(b, helmControllerUser, sourceControllerUser))
	if f.flux.latency, err = releaseLatencies(ctx, admin); err != nil {
		b.Fatal(err)
	}
	f.flux.phases = mustPhases(b, admin, "HelmRelease", "helmreleases", helmControllerUser, sourceControllerUser)
	for _, p := range procs {
		peak, cpu, err := p.ProcStatus()
		if err != nil {
			b.Fatalf("reading %s's /proc status: %v", p.Name(), err)
		}
		f.flux.procs = append(f.flux.procs, procFigures{name: p.Name(), peakRSSKiB: peak, cpu: cpu})
	}
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop()
		errs, _ := procs[i].LogProblems()
		f.flux.procs[i].logErrors = len(errs)
	}
}

// fluxQuiet waits until the Flux controllers' request count has not moved
// for three scrapes a second apart, up to 5 minutes, and returns it.
func fluxQuiet(b *testing.B, procs []*testcontroller.Process, what string) float64 {
	b.Helper()
	last, stable := -1.0, 0
	var lastErr error
	for range 300 {
		total := 0.0
		for _, p := range procs {
			if err := p.Alive(); err != nil {
				b.Fatal(err)
			}
			r, err := requestsOf(b.Context(), p)
			if err != nil {
				lastErr, total = err, -1
				break
			}
			total += r
		}
		switch {
		case total < 0:
			stable = 0
		case total == last:
			stable++
		default:
			stable, last = 0, total
		}
		if stable >= 3 {
			return last
		}
		time.Sleep(time.Second)
	}
	b.Fatalf("waited 5 minutes for %s; last scrape error: %v", what, lastErr)
	return 0
}

// writesBy counts the writes of users so far by kind, and the API
// server's time on them, as mustWrites does for Capstan's controller.
func writesBy(b *testing.B, users ...string) map[string]int {
	b.Helper()
	events, err := cluster.AuditEvents()
	if err != nil {
		b.Fatalf("reading the audit log: %v", err)
	}
	out := map[string]int{}
	for _, e := range events {
		if e.Stage != auditv1.StageResponseComplete || !slices.Contains(users, e.User.Username) {
			continue
		}
		kind := writeKind(e)
		out[kind]++
		if !e.StageTimestamp.IsZero() && !e.RequestReceivedTimestamp.IsZero() {
			out[serverTimePrefix+kind] += int(e.StageTimestamp.Sub(e.RequestReceivedTimestamp.Time).Microseconds())
		}
	}
	return out
}

// mustPhases reads the phases of each add-on of kind (its resource)
// whose tool's users are users.
func mustPhases(b *testing.B, admin client.Client, kind, resource string, users ...string) addonPhases {
	b.Helper()
	ready, err := readyTimes(b.Context(), admin, kind)
	if err != nil {
		b.Fatal(err)
	}
	events, err := cluster.AuditEvents()
	if err != nil {
		b.Fatalf("reading the audit log: %v", err)
	}
	return phasesOf(events, resource, users, ready)
}

// writesSince is what the counts of writesBy rose by from before to after.
func writesSince(before, after map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// loadAverage is the machine's load average (1, 5 and 15 minutes), as
// uptime prints it.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	fields := strings.Fields(string(data))
	if len(fields) < 3 {
		return "?"
	}
	return strings.Join(fields[:3], " ")
}

func readTrimmed(path string) (string, error) {
	data, err := os.ReadFile(path)
	return strings.TrimSpace(string(data)), err
}

func (t toolFigures) cpu() time.Duration {
	var sum time.Duration
	for _, p := range t.procs {
		sum += p.cpu
	}
	return sum
}

func (t toolFigures) peakRSSMiB() float64 {
	var sum int64
	for _, p := range t.procs {
		sum += p.peakRSSKiB
	}
	return float64(sum) / 1024
}

func (f *fluxFigures) report(b *testing.B) {
	n := float64(f.addons)
	b.ReportMetric(float64(f.capstan.wall.Nanoseconds()), "ns/op")
	b.ReportMetric(f.capstan.wall.Seconds(), "s/capstan")
	b.ReportMetric(f.floor.wall.Seconds(), "s/floor")
	b.ReportMetric(f.flux.wall.Seconds(), "s/flux")
	b.ReportMetric(f.capstan.wall.Seconds()/f.flux.wall.Seconds(), "x-flux")
	b.ReportMetric(f.capstan.wall.Seconds()/f.floor.wall.Seconds(), "x-floor")
	b.ReportMetric(f.capstan.busy.oursTotal().Seconds()/f.flux.busy.oursTotal().Seconds(), "x-flux-cpu")
	b.ReportMetric(f.capstan.requests/n, "req/addon-capstan")
	b.ReportMetric(f.flux.requests/n, "req/addon-flux")
	b.ReportMetric(f.capstan.peakRSSMiB(), "MiB-capstan-peak-rss")
	b.ReportMetric(f.capstan.cpu().Seconds(), "s-capstan-cpu")
	b.ReportMetric(f.workers.workerCPU, "s-render-worker-cpu")
	for _, p := range f.flux.procs {
		b.ReportMetric(float64(p.peakRSSKiB)/1024, "MiB-"+p.name+"-peak-rss")
		b.ReportMetric(p.cpu.Seconds(), "s-"+p.name+"-cpu")
	}
}

func (f *fluxFigures) log(b *testing.B) {
	n := float64(f.addons)
	var s strings.Builder
	fmt.Fprintf(&s, "%d add-ons of the chart %s %s (%d objects, %d Deployments; +1 namespace each), from one https chart repository on loopback\n",
		f.addons, sevenChart, sevenVersion, sevenObjects, sevenDeployments)
	fmt.Fprintf(&s, "  order %s; Flux: helm-controller %s, source-controller %s; each at its default concurrency\n",
		strings.Join(f.order, ", "), f.helmVersion, f.srcVer)
	tool := func(name, goal string, t toolFigures) {
		fmt.Fprintf(&s, "  %-9s %-44s %10s   load %s → %s\n", name, goal, t.wall.Round(100*time.Millisecond), t.load[0], t.load[1])
		if t.as != "" {
			fmt.Fprintf(&s, "  %-9s   applying %s\n", "", t.as)
		}
		fmt.Fprintf(&s, "  %-9s   the machine's cores meanwhile: %s\n", "", t.busy)
		if len(t.latency) > 0 {
			fmt.Fprintf(&s, "  %-9s   each add-on, created → Ready: %s\n", "", t.latency)
			fmt.Fprintf(&s, "  %-9s     queued, until its tool wrote its namespace: %s\n", "", t.phases.queued)
			fmt.Fprintf(&s, "  %-9s     rolled out, until its last Deployment was Available: %s\n", "", t.phases.rolledOut)
			fmt.Fprintf(&s, "  %-9s     reported, until Ready (to the second): %s\n", "", t.phases.reported)
		}
		for _, p := range t.procs {
			fmt.Fprintf(&s, "  %-9s   %-24s peak RSS %6.1f MiB, CPU %5.1f s, %d error line(s) in its log\n",
				"", p.name, float64(p.peakRSSKiB)/1024, p.cpu.Seconds(), p.logErrors)
		}
		if t.requests > 0 {
			fmt.Fprintf(&s, "  %-9s   API requests per add-on: %.1f (%.0f in all)\n", "", t.requests/n, t.requests)
		}
	}
	tool("Capstan", "first Addon created → all Synced and Ready", f.capstan)
	fmt.Fprintf(&s, "  %-9s   render workers: %.0f started, %.1f s CPU, largest peak RSS %.1f MiB; %.0f reconciles; %d throttling line(s)\n",
		"", f.workers.workers, f.workers.workerCPU, f.workers.workerPeak/(1<<20), f.capstanReconciles, f.capstanThrottledLines)
	fmt.Fprintf(&s, "  %-9s   controller and the largest render worker: peak RSS %.1f MiB summed (the binary's pages they share counted twice), CPU %.1f s (with every worker's)\n",
		"", f.capstan.peakRSSMiB()+f.workers.workerPeak/(1<<20), f.capstan.cpu().Seconds()+f.workers.workerCPU)
	tool("floor", fmt.Sprintf("bare SSA, %d workers → all Available", floorWorkers), f.floor)
	tool("Flux", "first HelmRelease created → all Ready", f.flux)
	fmt.Fprintf(&s, "  %-54s %10.2f\n", "Capstan's time / Flux's", f.capstan.wall.Seconds()/f.flux.wall.Seconds())
	fmt.Fprintf(&s, "  %-54s %10.2f\n", "Capstan's time / the floor's", f.capstan.wall.Seconds()/f.floor.wall.Seconds())
	fmt.Fprintf(&s, "  %-54s %10.2f\n", "Flux's time / the floor's", f.flux.wall.Seconds()/f.floor.wall.Seconds())
	// NOTE: with the cores busy throughout, a tool's time follows the CPU
	// spent while it runs, other work's included; this run's own share of
	// it moves less with what else shares the machine.
	fmt.Fprintf(&s, "  %-54s %10.2f\n", "Capstan's CPU / Flux's (this run's processes)", f.capstan.busy.oursTotal().Seconds()/f.flux.busy.oursTotal().Seconds())
	fmt.Fprintf(&s, "  %-54s %10.2f\n", "Capstan's CPU / the floor's (this run's processes)", f.capstan.busy.oursTotal().Seconds()/f.floor.busy.oursTotal().Seconds())
	for _, k := range union(keys(f.capstanInstall.byMethod), nil) {
		fmt.Fprintf(&s, "  Capstan's requests per add-on, method %-10s %10.1f\n", k, f.capstanInstall.byMethod[k]/n)
	}
	// NOTE: Helm sends a release's objects at once, so the API server's
	// times on Flux's writes overlap; Capstan's controller sends one
	// add-on's in turn. The sums are work, not the time an add-on waited.
	writes := func(who string, w map[string]int, rename func(string) string) {
		fmt.Fprintf(&s, "  %s's writes per add-on (audit log), and the API server's ms on them per add-on\n", who)
		for _, k := range union(keys(w), nil) {
			if strings.HasPrefix(k, serverTimePrefix) {
				continue
			}
			fmt.Fprintf(&s, "    %-46s %8.1f %8.1f ms\n", rename(k), float64(w[k])/n, float64(w[serverTimePrefix+k])/1000/n)
		}
	}
	writes("Capstan", f.capstan.writes, func(k string) string { return k })
	// writeKind names dry runs after Capstan's preview; Helm's are its own.
	writes("Flux", f.flux.writes, func(k string) string { return strings.TrimSuffix(k, " (preview)") })
	b.Log("\n" + s.String())
}
