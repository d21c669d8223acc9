package cli

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/crdschema"
	"capstan.dev/capstan/internal/testcluster"
)

// crdReader answers the CRD check's reads with get; List is never called.
type crdReader struct {
	get func(ctx context.Context, name string, obj *apiextensionsv1.CustomResourceDefinition) error
}

func (r crdReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	return r.get(ctx, key.Name, obj.(*apiextensionsv1.CustomResourceDefinition))
}

func (r crdReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("not listed")
}

// hanging is an API server that never answers: a read ends only with its
// context.
var hanging = crdReader{get: func(ctx context.Context, _ string, _ *apiextensionsv1.CustomResourceDefinition) error {
	<-ctx.Done()
	return ctx.Err()
}}

// logLines records what a crdCheck logs.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, prefix+" "+args)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func probeAddress(t *testing.T) string {
	t.Helper()
	ports, err := testcluster.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
}

func getProbe(addr, path string) (int, string) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestCRDCheckWhileTheAPIServerHangs: while the first reading of the CRDs
// has no answer, /healthz is served (ok, so the kubelet does not kill the
// pod) and /readyz says the CRDs are being checked; a reading that times
// out is reported and tried again; and a stop during a reading returns
// with no error logged.
func TestCRDCheckWhileTheAPIServerHangs(t *testing.T) {
	want, err := crdschema.Expected()
	if err != nil {
		t.Fatal(err)
	}
	addr := probeAddress(t)
	logs := &logLines{}
	k := &crdCheck{reader: hanging, want: want, interval: 100 * time.Millisecond, timeout: time.Hour,
		log: funcr.New(logs.add, funcr.Options{})}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- k.wait(ctx, addr) }()

	var code int
	var body string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if code, body = getProbe(addr, "/healthz"); code != 0 {
			break
		}
	}
	if code != http.StatusOK {
		t.Fatalf("/healthz answers %d while the first reading hangs; want 200, or the kubelet kills the pod: %s", code, body)
	}
	if code, body := getProbe(addr, "/readyz"); code != http.StatusInternalServerError || !strings.Contains(body, checkingCRDs) {
		t.Errorf("/readyz answers %d while the first reading hangs; want 500 saying %q:\n%s", code, checkingCRDs, body)
	}

	// SIGTERM during a reading.
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("stopped during a reading: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the check did not return within 10 s of its stop")
	}
	if strings.Contains(logs.String(), "Cannot check") || strings.Contains(logs.String(), "context canceled") {
		t.Errorf("a stop during a reading was logged as a fault:\n%s", logs)
	}

	// A reading bounded in time is reported, and the probes keep answering.
	addr = probeAddress(t)
	k = &crdCheck{reader: hanging, want: want, interval: 100 * time.Millisecond, timeout: 200 * time.Millisecond,
		log: funcr.New((&logLines{}).add, funcr.Options{})}
	ctx, stop = context.WithCancel(context.Background())
	defer stop()
	done = make(chan error, 1)
	go func() { done <- k.wait(ctx, addr) }()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if code, body = getProbe(addr, "/readyz"); strings.Contains(body, "deadline exceeded") {
			break
		}
	}
	if code != http.StatusInternalServerError || !strings.Contains(body, "cannot read CRD") || !strings.Contains(body, "deadline exceeded") {
		t.Errorf("/readyz answers %d once a reading timed out; want 500 saying it cannot read the CRD:\n%s", code, body)
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("stopped: %v", err)
	}
}

// TestCRDCheckFreesTheProbeAddress: once the CRDs match, the check has
// let go of the probes' address, so the manager can bind its own there,
// even when they matched at once.
func TestCRDCheckFreesTheProbeAddress(t *testing.T) {
	want, err := crdschema.Expected()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, c := range want {
		byName[c.Name] = c
	}
	matching := crdReader{get: func(_ context.Context, name string, obj *apiextensionsv1.CustomResourceDefinition) error {
		byName[name].DeepCopyInto(obj)
		return nil
	}}
	for i := range 50 {
		addr := probeAddress(t)
		k := &crdCheck{reader: matching, want: want, interval: time.Second, log: funcr.New(func(string, string) {}, funcr.Options{})}
		if err := k.wait(context.Background(), addr); err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("run %d: the probes' address is still bound once the CRDs match: %v", i, err)
		}
		_ = ln.Close()
	}
}
