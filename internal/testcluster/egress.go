package testcluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The egress guard is the only way out of the local control plane. A chart
// that registers an admission webhook, a conversion webhook or an APIService
// makes kube-apiserver dial the Service it names. In a real cluster a pod
// answers there; here kwok runs no containers, the Service's ClusterIP is in
// 10.96.0.0/16 and the machine's default route would carry the call off the
// machine. kube-apiserver's egress selector sends every such connection (its
// "cluster" egress) as an HTTP CONNECT through a Unix socket that the guard
// serves. The guard lets a connection through only to loopback, or to a
// loopback server that a test has routed a Service to, and refuses anything
// else at once, so that a webhook with failurePolicy Fail fails as fast as
// a webhook whose pod is down.

// egressDialTimeout bounds the guard's own dial of a loopback destination.
const egressDialTimeout = 5 * time.Second

// egressHeaderTimeout bounds how long a caller may take to send its CONNECT.
const egressHeaderTimeout = 10 * time.Second

// Refusal is one connection that the egress guard refused.
type Refusal struct {
	// Time is when it was refused.
	Time time.Time
	// Caller is the component that asked, found from the socket's peer
	// credentials, and its egress selection: "kube-apiserver (cluster
	// egress)". Another process is "pid N".
	Caller string
	// Destination is the host and port that the caller asked for.
	Destination string
	// Reason says why it was refused.
	Reason string
}

// String is the refusal in one line, for logs and `capstan dev`.
func (r Refusal) String() string {
	return fmt.Sprintf("%s -> %s refused: %s", r.Caller, r.Destination, r.Reason)
}

// Egress is the control plane's egress guard. Every connection that
// kube-apiserver makes toward the cluster (webhooks, aggregated APIs,
// kubelets, the proxy subresources) passes through it.
type Egress struct {
	dir     string
	lns     []net.Listener
	logPath string
	caller  func(pid int32) string
	// describe adds what a refused destination is (a Service's name) to the
	// first report of it; it may be nil.
	describe func(ctx context.Context, host string) string
	report   func(Refusal)

	mu       sync.Mutex
	routes   map[string]string
	refusals []Refusal
	reported map[string]bool
	allowed  map[string]int
}

// egressSelections are the API server's egress selections that the guard
// serves, one socket each, so that a refusal says which one asked:
//   - cluster: Service-referenced admission and conversion webhooks,
//     aggregated APIs (proxy, availability checks, discovery, OpenAPI),
//     kubelets, and the pod, service and node proxy subresources;
//   - controlplane: URL-referenced admission and conversion webhooks, and
//     the authentication, authorization and audit webhooks if any are
//     configured.
//
// etcd stays direct: it is on loopback and is the API server's own store.
var egressSelections = []string{"cluster", "controlplane"}

// newEgress listens on one socket per egress selection in dir. report, when
// not nil, is called once for the first refusal of each destination.
func newEgress(dir, logPath string, caller func(int32) string, report func(Refusal)) (*Egress, error) {
	e := &Egress{
		dir:      dir,
		logPath:  logPath,
		caller:   caller,
		report:   report,
		routes:   map[string]string{},
		reported: map[string]bool{},
		allowed:  map[string]int{},
	}
	for _, selection := range egressSelections {
		socket := e.Socket(selection)
		_ = os.Remove(socket)
		ln, err := net.Listen("unix", socket)
		if err != nil {
			e.close()
			return nil, fmt.Errorf("testcluster: the egress guard cannot listen on %s: %w", socket, err)
		}
		e.lns = append(e.lns, ln)
		go e.accept(ln, selection)
	}
	return e, nil
}

// Socket is the path of the Unix socket that kube-apiserver's egress
// selection sends its connections to.
func (e *Egress) Socket(selection string) string {
	return filepath.Join(e.dir, "egress-"+selection+".sock")
}

// Route sends every connection for dest ("IP:port" or "host:port", as the
// API server dials it) to target, a loopback "IP:port". A test uses it to
// serve a real webhook or aggregated API on loopback.
func (e *Egress) Route(dest, target string) error {
	key, err := destinationKey(dest)
	if err != nil {
		return fmt.Errorf("testcluster: route from %q: %w", dest, err)
	}
	ap, err := netip.ParseAddrPort(target)
	if err != nil || !ap.Addr().Unmap().IsLoopback() {
		return fmt.Errorf("testcluster: route from %s to %q: the target must be a loopback IP and port, such as 127.0.0.1:8443", dest, target)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.routes[key] = ap.String()
	return nil
}

// Unroute removes the route from dest.
func (e *Egress) Unroute(dest string) {
	key, err := destinationKey(dest)
	if err != nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.routes, key)
}

// Refusals returns every refusal so far, oldest first.
func (e *Egress) Refusals() []Refusal {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Refusal(nil), e.refusals...)
}

// RefusalsTo counts the refusals of dest.
func (e *Egress) RefusalsTo(dest string) int {
	key, _ := destinationKey(dest)
	n := 0
	for _, r := range e.Refusals() {
		if k, _ := destinationKey(r.Destination); k == key {
			n++
		}
	}
	return n
}

// Allowed returns how many connections the guard opened to each loopback
// target.
func (e *Egress) Allowed() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]int, len(e.allowed))
	for k, v := range e.allowed {
		out[k] = v
	}
	return out
}

// close stops accepting and removes the socket. Open tunnels end with
// their processes.
func (e *Egress) close() {
	for i, ln := range e.lns {
		_ = ln.Close()
		_ = os.Remove(e.Socket(egressSelections[i]))
	}
}

func (e *Egress) accept(ln net.Listener, selection string) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go e.serve(conn, selection)
	}
}

// serve answers one CONNECT. It refuses before it dials, so a refused
// destination never sees a packet.
func (e *Egress) serve(conn net.Conn, selection string) {
	defer conn.Close()
	caller := e.callerOf(conn) + " (" + selection + " egress)"
	_ = conn.SetReadDeadline(time.Now().Add(egressHeaderTimeout))
	br := bufio.NewReader(conn)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Method != http.MethodConnect {
		writeStatus(conn, http.StatusMethodNotAllowed, "the egress guard only tunnels CONNECT")
		return
	}
	dest := req.Host
	e.mu.Lock()
	target, reason := decideEgress(dest, e.routes)
	e.mu.Unlock()
	if reason != "" {
		r := Refusal{Time: time.Now(), Caller: caller, Destination: dest, Reason: reason}
		first := e.record(r)
		writeStatus(conn, http.StatusForbidden, "refused by the local control plane's egress guard: "+dest+" is "+reason)
		// NOTE: the answer goes first: describing the destination lists
		// the API server's Services, and the caller, often that API
		// server itself, must not wait for it.
		e.describeAndLog(r, first)
		return
	}
	upstream, err := dialLoopback(target)
	if err != nil {
		writeStatus(conn, http.StatusBadGateway, "the egress guard could not reach "+target+": "+oneLine(err.Error()))
		return
	}
	defer upstream.Close()
	e.mu.Lock()
	e.allowed[target]++
	e.mu.Unlock()
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	done := make(chan struct{}, 2)
	go func() {
		// NOTE: bytes the caller sent right behind its CONNECT are in br.
		_, _ = io.Copy(upstream, br)
		closeWrite(upstream)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(conn, upstream)
		closeWrite(conn)
		done <- struct{}{}
	}()
	<-done
	<-done
}

// record keeps r among the refusals, and reports whether it is the first
// of its destination.
func (e *Egress) record(r Refusal) (first bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.refusals = append(e.refusals, r)
	first = !e.reported[r.Destination]
	e.reported[r.Destination] = true
	return first
}

// describeAndLog logs the refusal r and, when it is the first of its
// destination, says what the destination is and reports it.
func (e *Egress) describeAndLog(r Refusal, first bool) {
	e.mu.Lock()
	describe := e.describe
	e.mu.Unlock()
	if first && describe != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if host, _, err := net.SplitHostPort(r.Destination); err == nil {
			if what := describe(ctx, host); what != "" {
				r.Reason += " (" + what + ")"
			}
		}
		cancel()
	}
	if f, err := os.OpenFile(e.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
		fmt.Fprintf(f, "%s %s\n", r.Time.UTC().Format(time.RFC3339Nano), r)
		_ = f.Close()
	}
	if first && e.report != nil {
		e.report(r)
	}
}

func (e *Egress) callerOf(conn net.Conn) string {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return "unknown"
	}
	pid, err := peerPID(uc)
	if err != nil {
		return "unknown"
	}
	if e.caller != nil {
		if name := e.caller(pid); name != "" {
			return name
		}
	}
	return "pid " + strconv.Itoa(int(pid))
}

// peerPID reads the process ID of the other end of a Unix socket.
func peerPID(uc *net.UnixConn) (int32, error) {
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, credErr
	}
	return cred.Pid, nil
}

// dialLoopback dials target and checks, on the address actually dialled,
// that it is loopback: the guard itself never opens anything else.
func dialLoopback(target string) (net.Conn, error) {
	d := net.Dialer{
		Timeout: egressDialTimeout,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || !ap.Addr().Unmap().IsLoopback() {
				return fmt.Errorf("the egress guard dials only loopback, not %s", address)
			}
			return nil
		},
	}
	return d.Dial("tcp", target)
}

func writeStatus(w io.Writer, code int, text string) {
	// NOTE: kube-apiserver's CONNECT client puts the status line into the
	// error it returns, so the reason goes there, on one line; a webhook's
	// failure message then says why the call was refused.
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", code, oneLine(text))
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func closeWrite(c net.Conn) {
	type writeCloser interface{ CloseWrite() error }
	if wc, ok := c.(writeCloser); ok {
		_ = wc.CloseWrite()
		return
	}
	_ = c.Close()
}

var (
	serviceCIDR = netip.MustParsePrefix(ServiceCIDR)
	podCIDR     = netip.MustParsePrefix(PodCIDR)
	cgnat       = netip.MustParsePrefix("100.64.0.0/10")
	metadataIP  = netip.MustParseAddr("169.254.169.254")
)

// destinationKey normalises "host:port" for the routes: a lower-case host
// without a trailing dot, an IP in its canonical form.
func destinationKey(dest string) (string, error) {
	host, port, err := net.SplitHostPort(dest)
	if err != nil {
		return "", fmt.Errorf("not a host and port: %w", err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return "", fmt.Errorf("%q is not a port", port)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return netip.AddrPortFrom(a.Unmap(), uint16(p)).String(), nil
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" {
		return "", errors.New("the host is empty")
	}
	return net.JoinHostPort(host, port), nil
}

// decideEgress says where a CONNECT to dest goes: target is the loopback
// address to dial, or reason says why dest is refused. Only a loopback IP,
// "localhost" or a routed destination is let through. A host name is never
// resolved: resolving it could itself leave the machine, and whatever it
// names is not a server of this control plane.
func decideEgress(dest string, routes map[string]string) (target, reason string) {
	key, err := destinationKey(dest)
	if err != nil {
		return "", "not a valid destination (" + err.Error() + ")"
	}
	if to, ok := routes[key]; ok {
		return to, ""
	}
	host, port, _ := net.SplitHostPort(key)
	if strings.EqualFold(host, "localhost") {
		return net.JoinHostPort("127.0.0.1", port), ""
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return "", "a host name, which the guard does not resolve; only loopback is reachable here"
	}
	a = a.Unmap()
	switch {
	case a.IsLoopback():
		return key, ""
	case serviceCIDR.Contains(a):
		return "", "a Service's ClusterIP (" + ServiceCIDR + "): no pod runs behind a Service here, because kwok starts no containers"
	case podCIDR.Contains(a):
		return "", "a pod IP (" + PodCIDR + "): kwok starts no containers, so nothing listens there"
	case a == metadataIP:
		return "", "the cloud metadata address, which is off loopback"
	case a.IsUnspecified():
		return "", "the unspecified address, which is off loopback"
	case a.IsMulticast():
		return "", "a multicast address, which is off loopback"
	case a.IsLinkLocalUnicast():
		return "", "a link-local address, which is off loopback"
	case a.IsPrivate() || cgnat.Contains(a):
		return "", "a private address, which is off loopback"
	}
	return "", "a public address, which is off loopback"
}

// describeService names the Service whose ClusterIP is host, if any.
func describeService(cs kubernetes.Interface) func(ctx context.Context, host string) string {
	return func(ctx context.Context, host string) string {
		a, err := netip.ParseAddr(host)
		if err != nil || !serviceCIDR.Contains(a.Unmap()) {
			return ""
		}
		list, err := cs.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return ""
		}
		for _, s := range list.Items {
			for _, ip := range append([]string{s.Spec.ClusterIP}, s.Spec.ClusterIPs...) {
				if ip == a.Unmap().String() {
					return "Service " + s.Namespace + "/" + s.Name
				}
			}
		}
		return ""
	}
}

// RouteService routes a Service's ClusterIP and its DNS names, on port, to
// target, a loopback "IP:port". A webhook or APIService that names the
// Service then reaches the test's server.
func (c *Cluster) RouteService(ctx context.Context, namespace, name string, port int32, target string) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("testcluster: building the admin client: %w", err)
	}
	svc, err := cs.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("testcluster: routing Service %s/%s: %w", namespace, name, err)
	}
	p := strconv.Itoa(int(port))
	dests := []string{
		net.JoinHostPort(name+"."+namespace+".svc", p),
		net.JoinHostPort(name+"."+namespace+".svc.cluster.local", p),
	}
	for _, ip := range append([]string{svc.Spec.ClusterIP}, svc.Spec.ClusterIPs...) {
		if ip != "" && ip != "None" {
			dests = append(dests, net.JoinHostPort(ip, p))
		}
	}
	for _, d := range dests {
		if err := c.Egress.Route(d, target); err != nil {
			return err
		}
	}
	return nil
}

// egressSocketDir is the cluster's folder, or a short folder of the
// sockets' own when a socket path there would be too long (108 bytes on
// Linux): in the temporary folder, or in /tmp when $TMPDIR is itself too
// long, as a test's own temporary folder can be.
func egressSocketDir(dir string) (socketDir, ownDir string, err error) {
	fits := func(dir string) bool { return len(filepath.Join(dir, "egress-controlplane.sock")) < 100 }
	if fits(dir) {
		return dir, "", nil
	}
	base := ""
	if !fits(filepath.Join(os.TempDir(), "capstan-egress-0123456789")) {
		base = "/tmp"
	}
	ownDir, err = os.MkdirTemp(base, "capstan-egress-")
	if err != nil {
		return "", "", fmt.Errorf("testcluster: creating a folder for the egress sockets: %w", err)
	}
	return ownDir, ownDir, nil
}

// egressSelectorConfig sends the cluster and control plane egress through
// the guard's sockets. etcd stays direct.
func (e *Egress) selectorConfig() string {
	var b strings.Builder
	b.WriteString("apiVersion: apiserver.k8s.io/v1beta1\nkind: EgressSelectorConfiguration\negressSelections:\n")
	for _, selection := range egressSelections {
		fmt.Fprintf(&b, "  - name: %s\n    connection:\n      proxyProtocol: HTTPConnect\n      transport:\n        uds:\n          udsName: %q\n", selection, e.Socket(selection))
	}
	b.WriteString("  - name: etcd\n    connection:\n      proxyProtocol: Direct\n")
	return b.String()
}

// startEgress starts the guard, writes the egress selector's configuration
// and returns kube-apiserver's flag for it.
func (c *Cluster) startEgress() (string, error) {
	socketDir, ownDir, err := egressSocketDir(c.Dir)
	if err != nil {
		return "", err
	}
	c.egressDir = ownDir
	e, err := newEgress(socketDir, filepath.Join(c.Dir, "logs", "egress.log"), c.componentOf, c.opts.egressReport)
	if err != nil {
		return "", err
	}
	c.Egress = e
	if cs, err := kubernetes.NewForConfig(c.Config); err == nil {
		e.describe = describeService(cs)
	}
	config := filepath.Join(c.Dir, "egress-selector.yaml")
	if err := os.WriteFile(config, []byte(e.selectorConfig()), 0o600); err != nil {
		return "", fmt.Errorf("testcluster: writing the egress selector's configuration: %w", err)
	}
	return "--egress-selector-config-file=" + config, nil
}

func (c *Cluster) stopEgress() {
	if c.Egress != nil {
		c.Egress.close()
	}
	if c.egressDir != "" {
		_ = os.RemoveAll(c.egressDir)
	}
}

// componentOf names the component whose process is pid.
func (c *Cluster) componentOf(pid int32) string {
	c.procsMu.Lock()
	defer c.procsMu.Unlock()
	for _, p := range c.procs {
		if p.cmd.Process != nil && int32(p.cmd.Process.Pid) == pid {
			return p.name
		}
	}
	return ""
}

// CACertPEM is the cluster's CA certificate, for a webhook's or an
// APIService's caBundle.
func (c *Cluster) CACertPEM() []byte { return append([]byte(nil), c.ca.certPEM...) }

// ServingCertificate issues a serving certificate for hosts (names or IPs)
// that the cluster's CA signs, for a test's webhook or aggregated API
// server on loopback. The API server checks a Service's webhook against the
// name <service>.<namespace>.svc.
func (c *Cluster) ServingCertificate(hosts ...string) (tls.Certificate, error) {
	var names []string
	var ips []net.IP
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else {
			names = append(names, h)
		}
	}
	pair, err := c.ca.serving("test-server", names, ips)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("testcluster: issuing a serving certificate: %w", err)
	}
	return tls.X509KeyPair(pair.certPEM, pair.keyPEM)
}
