package remote

import (
	"context"
	"net"
	"strings"
	"testing"

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
