package testcluster

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/server/egressselector"
)

func TestDecideEgress(t *testing.T) {
	routes := map[string]string{
		"10.96.7.7:443":                     "127.0.0.1:9443",
		"hook.egress.svc:443":               "127.0.0.1:9444",
		"[fd00::1]:8443":                    "[::1]:9445",
		"webhook.example.internal:443":      "127.0.0.1:9446",
		"127.0.0.9:80":                      "127.0.0.1:9447",
		"169.254.169.254:80":                "127.0.0.1:9448",
		"hook.egress.svc.cluster.local:443": "127.0.0.1:9449",
	}
	cases := []struct {
		dest, target, reason string
	}{
		{"127.0.0.1:10250", "127.0.0.1:10250", ""},
		{"127.3.4.5:99", "127.3.4.5:99", ""},
		{"[::1]:443", "[::1]:443", ""},
		{"[::ffff:127.0.0.1]:443", "127.0.0.1:443", ""},
		{"localhost:8080", "127.0.0.1:8080", ""},
		{"LocalHost.:8080", "127.0.0.1:8080", ""},
		// Routed destinations go where the route says, whatever they are.
		{"10.96.7.7:443", "127.0.0.1:9443", ""},
		{"HOOK.egress.svc.:443", "127.0.0.1:9444", ""},
		{"hook.egress.svc.cluster.local:443", "127.0.0.1:9449", ""},
		{"[fd00::1]:8443", "[::1]:9445", ""},
		{"webhook.example.internal:443", "127.0.0.1:9446", ""},
		{"127.0.0.9:80", "127.0.0.1:9447", ""},
		{"169.254.169.254:80", "127.0.0.1:9448", ""},
		// A route is per port.
		{"10.96.7.7:8443", "", "ClusterIP"},
		{"10.96.0.1:443", "", "ClusterIP"},
		{"10.244.0.5:8080", "", "pod IP"},
		{"10.1.2.3:443", "", "private"},
		{"172.16.0.1:443", "", "private"},
		{"192.168.1.1:443", "", "private"},
		{"100.64.0.1:443", "", "private"},
		{"[fd12::1]:443", "", "private"},
		{"169.254.169.254:80", "", ""}, // routed above; see the next case
		{"169.254.169.254:8080", "", "metadata"},
		{"169.254.1.1:80", "", "link-local"},
		{"[fe80::1]:80", "", "link-local"},
		{"0.0.0.0:443", "", "unspecified"},
		{"[::]:443", "", "unspecified"},
		{"224.0.0.1:443", "", "multicast"},
		{"8.8.8.8:53", "", "public"},
		{"[2001:db8::1]:443", "", "public"},
		{"gatekeeper-webhook-service.gatekeeper-system.svc:443", "", "host name"},
		{"kwok-node-0:10250", "", "host name"},
		{"example.com:443", "", "host name"},
		{"10.96.7.7", "", "not a valid destination"},
		{"10.96.7.7:0", "", "not a valid destination"},
		{"10.96.7.7:http", "", "not a valid destination"},
		{":443", "", "not a valid destination"},
	}
	for _, tc := range cases {
		target, reason := decideEgress(tc.dest, routes)
		if tc.dest == "169.254.169.254:80" {
			tc.target = "127.0.0.1:9448"
		}
		if tc.reason == "" {
			if reason != "" || target != tc.target {
				t.Errorf("decideEgress(%q) = %q, %q; want %q let through", tc.dest, target, reason, tc.target)
			}
			continue
		}
		if target != "" || !strings.Contains(reason, tc.reason) {
			t.Errorf("decideEgress(%q) = %q, %q; want a refusal that mentions %q", tc.dest, target, reason, tc.reason)
		}
	}
}

func TestEgressRouteTakesOnlyLoopbackTargets(t *testing.T) {
	e := startTestEgress(t, nil)
	for _, target := range []string{"10.0.0.1:443", "example.com:443", "127.0.0.1", "8.8.8.8:53"} {
		if err := e.Route("10.96.1.1:443", target); err == nil {
			t.Errorf("Route to %q was accepted; a route must end on loopback", target)
		}
	}
	if err := e.Route("10.96.1.1", "127.0.0.1:1"); err == nil {
		t.Error("Route from a destination without a port was accepted")
	}
	if err := e.Route("10.96.1.1:443", "127.0.0.1:8443"); err != nil {
		t.Errorf("Route to loopback: %v", err)
	}
}

// startTestEgress serves an egress guard in a folder of the test's own.
func startTestEgress(t *testing.T, report func(Refusal)) *Egress {
	t.Helper()
	dir, err := os.MkdirTemp("", "egress-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	e, err := newEgress(dir, filepath.Join(dir, "egress.log"), func(int32) string { return "the test" }, report)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	return e
}

// TestEgressSpeaksTheAPIServersProtocol drives the guard with
// kube-apiserver's own egress dialer, built from the configuration that
// Start writes: what the API server would do, in process. Refused
// destinations are never dialled, so nothing leaves loopback.
//
// The refusal comes before the guard has said what the destination is: that
// lists the API server's Services, which may take long, and the caller is
// often that same API server.
func TestEgressSpeaksTheAPIServersProtocol(t *testing.T) {
	var (
		mu      sync.Mutex
		reports []Refusal
	)
	e := startTestEgress(t, func(r Refusal) {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, r)
	})
	// describe holds until the test lets it go, or its own timeout.
	release := make(chan struct{})
	var described atomic.Bool
	e.mu.Lock()
	e.describe = func(ctx context.Context, host string) string {
		defer described.Store(true)
		select {
		case <-release:
			return "the Service kube-system/kube-dns"
		case <-ctx.Done():
			return ""
		}
	}
	e.mu.Unlock()
	config := filepath.Join(t.TempDir(), "egress-selector.yaml")
	if err := os.WriteFile(config, []byte(e.selectorConfig()), 0o600); err != nil {
		t.Fatal(err)
	}
	parsed, err := egressselector.ReadEgressSelectorConfiguration(config)
	if err != nil {
		t.Fatalf("kube-apiserver cannot read the egress configuration: %v", err)
	}
	if errs := egressselector.ValidateEgressSelectorConfiguration(parsed); len(errs) > 0 {
		t.Fatalf("kube-apiserver refuses the egress configuration: %v", errs.ToAggregate())
	}
	selector, err := egressselector.NewEgressSelector(parsed)
	if err != nil {
		t.Fatal(err)
	}

	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			conn, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { defer conn.Close(); _, _ = io.Copy(conn, conn) }()
		}
	}()
	if err := e.Route("10.96.9.9:443", echo.Addr().String()); err != nil {
		t.Fatal(err)
	}

	for _, ctxName := range []egressselector.EgressType{egressselector.Cluster, egressselector.ControlPlane} {
		dial, err := selector.Lookup(ctxName.AsNetworkContext())
		if err != nil || dial == nil {
			t.Fatalf("%s egress: no dialer (%v); the guard would be bypassed", ctxName, err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		began := time.Now()
		_, err = dial(ctx, "tcp", "10.96.0.10:443")
		took := time.Since(began)
		cancel()
		if err == nil {
			t.Fatalf("%s egress: a dial to a ClusterIP went through", ctxName)
		}
		for _, want := range []string{"code 403", "egress guard", "10.96.0.10:443", "ClusterIP"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s egress: the refusal %q does not mention %q", ctxName, err, want)
			}
		}
		if took > 2*time.Second {
			t.Errorf("%s egress: the refusal took %s; it must come at once", ctxName, took)
		}
		if ctxName == egressselector.Cluster {
			if described.Load() {
				t.Errorf("the refusal came only after the guard had described its destination")
			}
			close(release)
		}

		for _, dest := range []string{"10.96.9.9:443", echo.Addr().String()} {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			conn, err := dial(ctx, "tcp", dest)
			cancel()
			if err != nil {
				t.Fatalf("%s egress: dialling %s: %v", ctxName, dest, err)
			}
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.WriteString(conn, "ping\n"); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(conn).ReadString('\n')
			conn.Close()
			if err != nil || line != "ping\n" {
				t.Errorf("%s egress: through the tunnel to %s came %q, %v", ctxName, dest, line, err)
			}
		}
	}

	refusals := e.Refusals()
	if len(refusals) != 2 || e.RefusalsTo("10.96.0.10:443") != 2 {
		t.Fatalf("refusals = %v; want the two refused dials", refusals)
	}
	if !strings.Contains(refusals[0].Caller, "the test (cluster egress)") || !strings.Contains(refusals[1].Caller, "(controlplane egress)") {
		t.Errorf("callers = %q, %q; want the caller and its egress", refusals[0].Caller, refusals[1].Caller)
	}
	// The report and the log follow the answer.
	for deadline := time.Now().Add(5 * time.Second); ; {
		log, _ := os.ReadFile(e.logPath)
		mu.Lock()
		n := len(reports)
		mu.Unlock()
		if n > 0 && strings.Count(string(log), "10.96.0.10:443 refused") == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	if len(reports) != 1 || !strings.Contains(reports[0].Reason, "kube-system/kube-dns") {
		t.Errorf("reported %v; want one refusal for the one destination, naming what it is", reports)
	}
	mu.Unlock()
	if got := e.Allowed()[echo.Addr().String()]; got != 4 {
		t.Errorf("allowed connections to the echo server = %d; want 4", got)
	}
	log, err := os.ReadFile(e.logPath)
	if err != nil || strings.Count(string(log), "10.96.0.10:443 refused") != 2 {
		t.Errorf("egress.log = %q, %v; want both refusals", log, err)
	}
}

func TestParseProcNet(t *testing.T) {
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1 0000000000000000 100 0 0 10 0
   1: 0100007F:C350 0A600A0A:01BB 02 00000000:00000000 00:00000000 00000000     0        0 1002 1 0000000000000000 100 0 0 10 0
`
	socks, err := parseProcNet(bufio.NewScanner(strings.NewReader(table)), "tcp")
	if err != nil {
		t.Fatal(err)
	}
	listen, conn := socks["1001"], socks["1002"]
	if listen.Local != netip.MustParseAddrPort("127.0.0.1:8080") || offLoopback(listen.Remote.Addr()) {
		t.Errorf("listening socket = %v", listen)
	}
	if conn.Remote != netip.MustParseAddrPort("10.10.96.10:443") || !offLoopback(conn.Remote.Addr()) || conn.State != "02" {
		t.Errorf("connecting socket = %v; want 10.10.96.10:443, off loopback, state 02", conn)
	}
	six := `  sl  local_address                         remote_address                        st
   0: 00000000000000000000000001000000:1F90 00000000000000000000000001000000:C350 01 00000000:00000000 00:00000000 00000000     0        0 2001 1
`
	socks, err = parseProcNet(bufio.NewScanner(strings.NewReader(six)), "tcp6")
	if err != nil {
		t.Fatal(err)
	}
	if got := socks["2001"].Remote; got != netip.MustParseAddrPort("[::1]:50000") || offLoopback(got.Addr()) {
		t.Errorf("IPv6 loopback socket = %v", socks["2001"])
	}
}
