package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/crdschema"
)

// defaultCRDCheckInterval is how often a controller held by CRDs of
// another version reads them again.
const defaultCRDCheckInterval = 10 * time.Second

// crdCheckTimeout bounds one reading of the CRDs, so that an API server
// that does not answer is reported, and read again, instead of holding the
// controller for good.
const crdCheckTimeout = 10 * time.Second

// checkingCRDs is what /readyz says until the CRDs have been read once.
const checkingCRDs = "checking Capstan's CRDs"

// crdCheck holds the controller until Capstan's CRDs on the API server are
// the ones it was built with (internal/crdschema). It runs before the
// manager is built: no informer, no Lease, no controller. Meanwhile it
// serves the health probes itself, /healthz ok and /readyz failing with
// what is wrong, so a rollout (`helm upgrade --wait`, `kubectl rollout
// status`) stops at this pod and, when the new pod comes up beside them as
// the chart's rollout does with leader election, the replicas of the
// former version keep their work.
//
// NOTE: the check comes before the campaign for the Lease. A replica that
// led while it could not reconcile would stall every add-on, and take the
// Lease from a former replica that still works.
type crdCheck struct {
	reader   client.Reader
	want     []*apiextensionsv1.CustomResourceDefinition
	interval time.Duration
	timeout  time.Duration // of one reading; 0: crdCheckTimeout
	log      logr.Logger

	mu      sync.Mutex
	problem string // what /readyz says; "" once the CRDs match
}

// waitForOwnCRDs returns once Capstan's CRDs match this binary's, or nil
// when ctx ends first; probeAddr ("0": none) serves the probes meanwhile.
func waitForOwnCRDs(ctx context.Context, cfg *rest.Config, probeAddr string, interval time.Duration) error {
	want, err := crdschema.Expected()
	if err != nil {
		return fmt.Errorf("the CRDs built into this controller: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return err
	}
	if interval <= 0 {
		interval = defaultCRDCheckInterval
	}
	check := &crdCheck{reader: c, want: want, interval: interval, log: ctrl.Log.WithName("crd-check")}
	return check.wait(ctx, probeAddr)
}

// NOTE: the probes are served before the first reading: an API server that
// does not answer would otherwise leave /healthz unserved, and the kubelet
// would kill the pod for it, over and over, when it only has to wait.
func (k *crdCheck) wait(ctx context.Context, probeAddr string) error {
	k.mu.Lock()
	k.problem = checkingCRDs
	k.mu.Unlock()
	stop, err := k.serveProbes(probeAddr)
	if err != nil {
		return err
	}
	defer stop()
	m := k.check(ctx)
	if ctx.Err() != nil {
		return nil // stopping: a reading cut short is no fault of the CRDs
	}
	if m == nil {
		return nil
	}
	k.report(m)
	tick := time.NewTicker(k.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		m = k.check(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if m == nil {
			k.log.Info("Capstan's CRDs are now this controller's; starting")
			return nil
		}
		k.report(m)
	}
}

// check reads the CRDs once, within k.timeout.
func (k *crdCheck) check(ctx context.Context) *crdschema.Mismatch {
	timeout := k.timeout
	if timeout <= 0 {
		timeout = crdCheckTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return crdschema.Check(ctx, k.reader, k.want)
}

// report logs a mismatch when it is new, and keeps it for /readyz.
func (k *crdCheck) report(m *crdschema.Mismatch) {
	msg := m.Error()
	k.mu.Lock()
	changed := msg != k.problem
	k.problem = msg
	k.mu.Unlock()
	if !changed {
		return
	}
	if m.ReadError != nil {
		k.log.Error(m.ReadError, "Cannot check Capstan's CRDs; no add-on is reconciled until they are read", "crd", m.Name, "message", msg)
		return
	}
	k.log.Error(errors.New(msg), "Capstan's CRDs are not this controller's; no add-on is reconciled",
		"crd", m.Name, "annotation", crdschema.Annotation, "live", m.Live, "want", m.Want, "fix", crdschema.FixCommand)
}

func (k *crdCheck) readyz(w http.ResponseWriter, _ *http.Request) {
	k.mu.Lock()
	problem := k.problem
	k.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusInternalServerError)
	fmt.Fprintf(w, "[-]crds failed: %s\nreadyz check failed\n", problem)
}

// serveProbes serves /healthz and /readyz on addr until stop, which
// releases the address for the manager's own probes.
func (k *crdCheck) serveProbes(addr string) (stop func(), err error) {
	if addr == "" || addr == "0" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--health-probe-bind-address %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", k.readyz)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		// NOTE: Shutdown closes only the listeners Serve has taken; when
		// the goroutine has not reached Serve yet, the address would still
		// be bound as the manager binds its own probes there.
		_ = ln.Close()
	}, nil
}
