package controller

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/render"
)

// Capstan's Prometheus metrics, served with controller-runtime's (which
// include rest_client_requests_total, the API requests).
var (
	reconcileDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "capstan_reconcile_duration_seconds",
		Help:    "Time one Addon reconcile takes, by profile and resulting phase.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
	}, []string{"profile", "phase"})
	addonsByPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "capstan_addons",
		Help: "Addons by phase.",
	}, []string{"phase"})
	objectsApplied = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "capstan_objects_applied_total",
		Help: "Objects applied by server-side apply.",
	})
	objectsPruned = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "capstan_objects_pruned_total",
		Help: "Objects deleted by pruning or by an uninstall.",
	})
	reconcilesDeferred = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "capstan_reconciles_deferred_total",
		Help: "Addon reconciles put off because their restricted namespace had its share of the workers (--max-concurrent-per-tenant) reconciling already.",
	})
)

func init() {
	metrics.Registry.MustRegister(reconcileDuration, addonsByPhase, objectsApplied, objectsPruned, reconcilesDeferred)
}

// phases remembers each Addon's phase, so the by-phase gauge counts each
// Addon once.
var phases = struct {
	sync.Mutex
	m map[types.NamespacedName]capstanv1.Phase
}{m: map[types.NamespacedName]capstanv1.Phase{}}

func recordPhase(key types.NamespacedName, p capstanv1.Phase) {
	phases.Lock()
	defer phases.Unlock()
	if old, ok := phases.m[key]; ok {
		addonsByPhase.WithLabelValues(string(old)).Dec()
	}
	phases.m[key] = p
	addonsByPhase.WithLabelValues(string(p)).Inc()
}

func forgetPhase(key types.NamespacedName) {
	phases.Lock()
	defer phases.Unlock()
	if old, ok := phases.m[key]; ok {
		addonsByPhase.WithLabelValues(string(old)).Dec()
		delete(phases.m, key)
	}
}

func observeReconcile(s *scope, d time.Duration) {
	reconcileDuration.WithLabelValues(string(s.profile), string(s.outcome.Phase)).Observe(d.Seconds())
}

// sandboxCollector exports the render sandbox's figures at each scrape.
type sandboxCollector struct {
	s                                          *render.Sandbox
	renders, stopped, workers, cpu, peakMemory *prometheus.Desc
}

// RegisterSandboxMetrics exports the figures of the render sandbox: renders,
// renders stopped by a bound, worker processes, their CPU time and the
// largest peak memory of one.
func RegisterSandboxMetrics(s *render.Sandbox) error {
	return metrics.Registry.Register(&sandboxCollector{
		s:          s,
		renders:    prometheus.NewDesc("capstan_render_sandbox_renders_total", "Chart renders run in a sandbox worker.", nil, nil),
		stopped:    prometheus.NewDesc("capstan_render_sandbox_stopped_total", "Chart renders stopped by a bound, by bound (time or memory).", []string{"bound"}, nil),
		workers:    prometheus.NewDesc("capstan_render_sandbox_workers_started_total", "Render worker processes started.", nil, nil),
		cpu:        prometheus.NewDesc("capstan_render_sandbox_cpu_seconds_total", "CPU time of the render workers, running ones included.", nil, nil),
		peakMemory: prometheus.NewDesc("capstan_render_sandbox_peak_rss_bytes", "The most memory one render worker has held.", nil, nil),
	})
}

func (c *sandboxCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.renders, c.stopped, c.workers, c.cpu, c.peakMemory} {
		ch <- d
	}
}

func (c *sandboxCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	ch <- prometheus.MustNewConstMetric(c.renders, prometheus.CounterValue, float64(st.Renders))
	ch <- prometheus.MustNewConstMetric(c.stopped, prometheus.CounterValue, float64(st.TimeBound), "time")
	ch <- prometheus.MustNewConstMetric(c.stopped, prometheus.CounterValue, float64(st.MemoryBound), "memory")
	ch <- prometheus.MustNewConstMetric(c.workers, prometheus.CounterValue, float64(st.Workers))
	ch <- prometheus.MustNewConstMetric(c.cpu, prometheus.CounterValue, st.CPU.Seconds())
	ch <- prometheus.MustNewConstMetric(c.peakMemory, prometheus.GaugeValue, float64(st.PeakRSS))
}
