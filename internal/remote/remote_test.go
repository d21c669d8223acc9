package remote

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"capstan.dev/capstan/internal/netguard"
)

const good = `apiVersion: v1
kind: Config
current-context: edge
contexts:
- name: edge
  context: {cluster: edge, user: installer}
clusters:
- name: edge
  cluster:
    server: https://edge.example.com:6443
    certificate-authority-data: ""
users:
- name: installer
  user:
    token: abc
    as: system:serviceaccount:capstan:installer
`

// TestCheckRefuses covers each thing a kubeconfig from a Secret may not
// do, on the decision alone: nothing is read or dialled.
func TestCheckRefuses(t *testing.T) {
	guard, err := netguard.New(netguard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Load([]byte(good), guard)
	if err != nil {
		t.Fatalf("a good kubeconfig was refused: %v", err)
	}
	if cfg.As != "system:serviceaccount:capstan:installer" || cfg.Server != "https://edge.example.com:6443" || cfg.Impersonate.UserName != cfg.As {
		t.Errorf("Load read %+v", cfg)
	}
	cases := []struct{ name, from, to, says string }{
		{"exec plugin", "    token: abc\n", "    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh}\n", "exec credential plugin"},
		{"token file", "    token: abc\n", "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n", "tokenFile names a file"},
		{"client cert file", "    token: abc\n", "    client-certificate: /etc/cert.pem\n    client-key: /etc/key.pem\n", "client-certificate or client-key names a file"},
		{"CA file", `    certificate-authority-data: ""`, "    certificate-authority: /etc/ca.pem", "certificate-authority names a file"},
		{"insecure", `    certificate-authority-data: ""`, "    insecure-skip-tls-verify: true", "insecure-skip-tls-verify"},
		{"proxy", `    certificate-authority-data: ""`, "    proxy-url: http://proxy:3128", "proxy-url"},
		{"plain http", "https://edge", "http://edge", "is not https"},
		{"no account", "    as: system:serviceaccount:capstan:installer\n", "", "names no account to act as"},
		{"no context", "current-context: edge", "current-context: other", "not one of its contexts"},
		{"auth provider", "    token: abc\n", "    auth-provider: {name: oidc}\n", "auth-provider"},
		{"password in server", "https://edge", "https://admin:hunter2@edge", "carries a user name or password"},
		{"user in server", "https://edge", "https://hunter2@edge", "carries a user name or password"},
		{"password in plain http server", "https://edge", "http://admin:hunter2@edge", "is not https"},
		{"password in unparsable server", "https://edge.example.com:6443", "https://admin:hunter2%@edge.example.com:6443", "is not an https:// URL"},
	}
	for _, tc := range cases {
		bad := strings.Replace(good, tc.from, tc.to, 1)
		if bad == good {
			t.Fatalf("%s: the case changes nothing", tc.name)
		}
		_, err := Load([]byte(bad), guard)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: got %v, want an error saying %q", tc.name, err, tc.says)
		}
		// The message goes into the Addon's status: it never carries
		// the server URL's credentials.
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the message carries the server's credentials: %v", tc.name, err)
		}
	}
	for _, bad := range []string{"", "{", strings.Repeat("#", MaxKubeconfigBytes+1)} {
		if _, err := Load([]byte(bad), guard); err == nil {
			t.Errorf("Load(%.20q) was accepted", bad)
		}
	}
}

// TestIdentity checks what names a cluster in a plan's hash: another API
// server, another certificate authority behind the same URL, or another
// account or group impersonated is another cluster; a rotated token is the
// same one.
func TestIdentity(t *testing.T) {
	guard, err := netguard.New(netguard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	identity := func(kubeconfig string) string {
		t.Helper()
		cfg, err := Load([]byte(kubeconfig), guard)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Identity()
	}
	staging := identity(good)
	const ca = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="
	for _, tc := range []struct {
		name, from, to string
		same           bool
	}{
		{name: "another server", from: "https://edge.example.com:6443", to: "https://prod.example.com:6443"},
		{name: "another CA behind the same URL", from: `certificate-authority-data: ""`, to: "certificate-authority-data: " + ca},
		{name: "another TLS server name", from: `    certificate-authority-data: ""`, to: "    certificate-authority-data: \"\"\n    tls-server-name: prod"},
		{name: "another account", from: "as: system:serviceaccount:capstan:installer", to: "as: system:serviceaccount:capstan:admin"},
		{name: "another group", from: "    as: system:serviceaccount:capstan:installer\n", to: "    as: system:serviceaccount:capstan:installer\n    as-groups: [admins]\n"},
		{name: "a rotated token", from: "token: abc", to: "token: def", same: true},
	} {
		changed := strings.Replace(good, tc.from, tc.to, 1)
		if changed == good {
			t.Fatalf("%s: the case changes nothing", tc.name)
		}
		if got := identity(changed); (got == staging) != tc.same {
			t.Errorf("%s: same identity %v, want %v", tc.name, got == staging, tc.same)
		}
	}
	if again := identity(good); again != staging {
		t.Error("one kubeconfig gives two identities")
	}
}

// TestEndpoint checks what names the cluster alone, for where the
// inventory is: another server or TLS server name is another cluster;
// another account, group, certificate authority or token, or the same
// server spelled otherwise, is not.
func TestEndpoint(t *testing.T) {
	guard, err := netguard.New(netguard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	endpoint := func(kubeconfig string) string {
		t.Helper()
		cfg, err := Load([]byte(kubeconfig), guard)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Endpoint()
	}
	staging := endpoint(good)
	const ca = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="
	for _, tc := range []struct {
		name, from, to string
		same           bool
	}{
		{name: "another server", from: "https://edge.example.com:6443", to: "https://prod.example.com:6443"},
		{name: "another port", from: "https://edge.example.com:6443", to: "https://edge.example.com:7443"},
		{name: "another path", from: "https://edge.example.com:6443", to: "https://edge.example.com:6443/k8s/clusters/c-1"},
		{name: "another TLS server name", from: `    certificate-authority-data: ""`, to: "    certificate-authority-data: \"\"\n    tls-server-name: prod"},
		{name: "the URL's own host as TLS server name", from: `    certificate-authority-data: ""`, to: "    certificate-authority-data: \"\"\n    tls-server-name: Edge.example.com", same: true},
		{name: "the host in capitals, with a slash", from: "https://edge.example.com:6443", to: "https://EDGE.example.com:6443/", same: true},
		{name: "another CA behind the same URL", from: `certificate-authority-data: ""`, to: "certificate-authority-data: " + ca, same: true},
		{name: "another account", from: "as: system:serviceaccount:capstan:installer", to: "as: system:serviceaccount:capstan:admin", same: true},
		{name: "another group", from: "    as: system:serviceaccount:capstan:installer\n", to: "    as: system:serviceaccount:capstan:installer\n    as-groups: [admins]\n", same: true},
		{name: "a rotated token", from: "token: abc", to: "token: def", same: true},
	} {
		changed := strings.Replace(good, tc.from, tc.to, 1)
		if changed == good {
			t.Fatalf("%s: the case changes nothing", tc.name)
		}
		if got := endpoint(changed); (got == staging) != tc.same {
			t.Errorf("%s: same endpoint %v, want %v", tc.name, got == staging, tc.same)
		}
	}
	for _, tc := range []struct{ a, b string }{
		{"https://10.0.0.1", "https://10.0.0.1:443/"},
		{"https://[FD00::1]:6443", "https://[fd00::1]:6443"},
	} {
		if NormalServer(tc.a) != NormalServer(tc.b) {
			t.Errorf("%s and %s are one server, normalised as %s and %s", tc.a, tc.b, NormalServer(tc.a), NormalServer(tc.b))
		}
	}
}

// TestDialsThroughTheGuard checks that the configuration dials through the
// guard: an address it refuses (here a loopback one, as a test may only
// dial loopback) is refused before any connection is made.
func TestDialsThroughTheGuard(t *testing.T) {
	guard, err := netguard.New(netguard.Config{Deny: []string{"127.0.0.1:6443"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Load([]byte(good), guard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err = cfg.Dial(context.Background(), "tcp", "127.0.0.1:6443"); !netguard.IsRefused(err) {
		t.Errorf("dialling a denied address: got %v, want the guard's refusal", err)
	}
	if p, _ := cfg.Proxy(nil); p != nil {
		t.Errorf("the configuration uses a proxy: %v", p)
	}
}

// TestLoopbackNeedsTheAllowList checks that a remote API server on
// loopback is refused by the guard's defaults and reached only once
// --remote-cluster-allow names it, as the local control plane tests do.
func TestLoopbackNeedsTheAllowList(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for _, tc := range []struct {
		allow   []string
		refused bool
	}{{nil, true}, {[]string{"127.0.0.0/8"}, false}} {
		guard, err := netguard.New(netguard.Config{Allow: tc.allow})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := Load([]byte(good), guard)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := cfg.Dial(context.Background(), "tcp", l.Addr().String())
		if conn != nil {
			conn.Close()
		}
		if netguard.IsRefused(err) != tc.refused || (!tc.refused && err != nil) {
			t.Errorf("allow %v: dialling %s gave %v; refused by the guard: want %v", tc.allow, l.Addr(), err, tc.refused)
		}
	}
}

// TestWatchOutlivesTheRequestTimeout: a watch's response streams for as
// long as the API server keeps it open. Through the configuration of
// single requests it is cut at the request time bound; through WatchConfig
// it runs to its end, with the same guarded dialling and credentials. The
// API server is a loopback stand-in, and the time bound is shortened to
// keep the test short.
func TestWatchOutlivesTheRequestTimeout(t *testing.T) {
	const events, every = 8, 100 * time.Millisecond
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer abc" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		for i := 0; i < events; i++ {
			fmt.Fprintf(w, "{\"type\":\"BOOKMARK\",\"n\":%d}\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(every):
			}
		}
	}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	kc := strings.Replace(good, "https://edge.example.com:6443", srv.URL, 1)
	kc = strings.Replace(kc, `certificate-authority-data: ""`, "certificate-authority-data: "+base64.StdEncoding.EncodeToString(ca), 1)
	guard, err := netguard.New(netguard.Config{Allow: []string{"127.0.0.0/8"}, Deny: []string{"127.0.0.2:6443"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Load([]byte(kc), guard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Timeout != RequestTimeout {
		t.Errorf("single requests are bounded by %s; want %s", cfg.Timeout, RequestTimeout)
	}
	cfg.Timeout = 3 * every

	watch := func(c *rest.Config) (int, error) {
		hc, err := rest.HTTPClientFor(c)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Get(srv.URL + "/api/v1/configmaps?watch=true")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the watch got %s", resp.Status)
		}
		n := 0
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			n++
		}
		return n, sc.Err()
	}
	// NOTE: cut means fewer events than the stream sends in 7 × every;
	// the read's error may be nil when the cut meets the end of a chunk.
	if n, err := watch(cfg.Config); n == events {
		t.Errorf("through the single-request configuration, the watch was not cut (%d events, %v); the test proves nothing", n, err)
	}
	w := WatchConfig(cfg.Config)
	if n, err := watch(w); err != nil || n != events {
		t.Errorf("through WatchConfig the watch got %d of %d events: %v", n, events, err)
	}
	if cfg.Timeout != 3*every {
		t.Errorf("WatchConfig changed the single-request configuration")
	}
	if _, err := w.Dial(context.Background(), "tcp", "127.0.0.2:6443"); !netguard.IsRefused(err) {
		t.Errorf("WatchConfig does not dial through the guard: %v", err)
	}
	if p, _ := w.Proxy(nil); p != nil || w.Impersonate.UserName != cfg.As {
		t.Errorf("WatchConfig lost the proxy refusal or the impersonation: proxy %v, as %q", p, w.Impersonate.UserName)
	}
}

// TestNormalServer: two spellings of one server are one, and two paths a
// client sends differently are two, an escaped slash too.
func TestNormalServer(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"https://Edge.example.com:443/", "https://edge.example.com", true},
		{"https://edge.example.com:6443/k8s/c-1/", "https://edge.example.com:6443/k8s/c-1", true},
		{"https://[::1]:6443", "https://[::1]:6443/", true},
		{"https://edge.example.com/k8s/a%2Fb", "https://edge.example.com/k8s/a/b", false},
		{"https://edge.example.com/k8s?cluster=a", "https://edge.example.com/k8s?cluster=b", false},
		{"http://edge.example.com", "https://edge.example.com", false},
	} {
		if got := NormalServer(tc.a) == NormalServer(tc.b); got != tc.same {
			t.Errorf("%s (%s) and %s (%s): same %v, want %v", tc.a, NormalServer(tc.a), tc.b, NormalServer(tc.b), got, tc.same)
		}
	}
}
