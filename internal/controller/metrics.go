package controller

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
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
)

func init() {
	metrics.Registry.MustRegister(reconcileDuration, addonsByPhase, objectsApplied, objectsPruned)
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
