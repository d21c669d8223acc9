package netguard

import (
	"errors"
	"net/netip"
	"testing"
)

// TestPolicyDecisions checks the pure decision function. Nothing here dials.
func TestPolicyDecisions(t *testing.T) {
	tests := []struct {
		name        string
		allow, deny []string
		denyPrivate bool
		host        string
		ip          string
		port        int
		want        Reason // "" means allowed
	}{
		{name: "public IPv4", ip: "93.184.216.34", port: 443},
		{name: "public IPv6", ip: "2606:2800:220:1:248:1893:25c8:1946", port: 443},
		{name: "loopback v4", ip: "127.0.0.1", port: 443, want: ReasonLoopback},
		{name: "loopback 127.0.0.2", ip: "127.0.0.2", port: 80, want: ReasonLoopback},
		{name: "loopback v6", ip: "::1", port: 443, want: ReasonLoopback},
		{name: "loopback v4-mapped v6", ip: "::ffff:127.0.0.1", port: 443, want: ReasonLoopback},
		{name: "metadata AWS/GCP", ip: "169.254.169.254", port: 80, want: ReasonMetadata},
		{name: "metadata v4-mapped", ip: "::ffff:169.254.169.254", port: 80, want: ReasonMetadata},
		{name: "metadata AWS IPv6", ip: "fd00:ec2::254", port: 80, want: ReasonMetadata},
		{name: "metadata Alibaba", ip: "100.100.100.200", port: 80, want: ReasonMetadata},
		{name: "metadata Azure wireserver", ip: "168.63.129.16", port: 80, want: ReasonMetadata},
		{name: "metadata ECS", ip: "169.254.170.2", port: 80, want: ReasonMetadata},
		{name: "metadata GCP IPv6", ip: "fd20:ce::254", port: 80, want: ReasonMetadata},
		{name: "metadata EKS Pod Identity", ip: "169.254.170.23", port: 80, want: ReasonMetadata},
		{name: "metadata EKS Pod Identity IPv6", ip: "fd00:ec2::23", port: 80, want: ReasonMetadata},
		{name: "metadata Scaleway", ip: "169.254.42.42", port: 80, want: ReasonMetadata},
		{name: "metadata Scaleway IPv6", ip: "fd00:42::42", port: 80, want: ReasonMetadata},
		{name: "metadata Oracle Cloud Classic", ip: "192.0.0.192", port: 80, want: ReasonMetadata},
		{name: "metadata GCP IPv6 with ::/0", allow: []string{"0.0.0.0/0", "::/0"}, ip: "fd20:ce::254", port: 80, want: ReasonMetadata},
		{name: "metadata EKS Pod Identity IPv6 with ::/0", allow: []string{"0.0.0.0/0", "::/0"}, ip: "fd00:ec2::23", port: 80, want: ReasonMetadata},
		{name: "metadata Scaleway IPv6 with ::/0", allow: []string{"0.0.0.0/0", "::/0"}, ip: "fd00:42::42", port: 80, want: ReasonMetadata},
		{name: "metadata EKS Pod Identity with 0.0.0.0/0", allow: []string{"0.0.0.0/0", "::/0"}, ip: "169.254.170.23", port: 80, want: ReasonMetadata},
		{name: "metadata Scaleway with 0.0.0.0/0", allow: []string{"0.0.0.0/0", "::/0"}, ip: "169.254.42.42", port: 80, want: ReasonMetadata},
		{name: "metadata Oracle Cloud Classic with 0.0.0.0/0", allow: []string{"0.0.0.0/0", "::/0"}, ip: "192.0.0.192", port: 80, want: ReasonMetadata},
		{name: "metadata GCP IPv6 with --fetch-deny-private and fc00::/7 allowed", denyPrivate: true, allow: []string{"fc00::/7"}, ip: "fd20:ce::254", port: 80, want: ReasonMetadata},
		{name: "only the exact metadata address, not its neighbour", ip: "fd20:ce::255", port: 80},
		{name: "metadata stays refused when allow-listed", allow: []string{"169.254.0.0/16"}, ip: "169.254.169.254", port: 80, want: ReasonMetadata},
		{name: "metadata stays refused with 0.0.0.0/0", allow: []string{"0.0.0.0/0", "::/0"}, ip: "fd00:ec2::254", port: 80, want: ReasonMetadata},
		{name: "metadata through NAT64", ip: "64:ff9b::a9fe:a9fe", port: 80, want: ReasonMetadata},
		{name: "loopback through 6to4", ip: "2002:7f00:1::1", port: 80, want: ReasonLoopback},
		{name: "local-use NAT64 refused", ip: "64:ff9b:1::5db8:d822", port: 443, want: ReasonTranslated},
		{name: "local-use NAT64 allow-listed", allow: []string{"64:ff9b:1::/96"}, ip: "64:ff9b:1::5db8:d822", port: 443},
		{name: "metadata through local-use NAT64 /96", ip: "64:ff9b:1::a9fe:a9fe", port: 80, want: ReasonMetadata},
		{name: "metadata through local-use NAT64 /96 allow-listed", allow: []string{"64:ff9b:1::/48"}, ip: "64:ff9b:1::a9fe:a9fe", port: 80, want: ReasonMetadata},
		{name: "metadata through local-use NAT64 /96, u octet set", allow: []string{"64:ff9b:1::/48"}, ip: "64:ff9b:1:0:ff00::a9fe:a9fe", port: 80, want: ReasonMetadata},
		{name: "metadata through local-use NAT64 /48", allow: []string{"64:ff9b:1::/48"}, ip: "64:ff9b:1:a9fe:a9:fe00::", port: 80, want: ReasonMetadata},
		{name: "metadata through local-use NAT64 /56", allow: []string{"64:ff9b:1::/48"}, ip: "64:ff9b:1:a9:fe:a9fe::", port: 80, want: ReasonMetadata},
		{name: "metadata through local-use NAT64 /64", allow: []string{"64:ff9b:1::/48"}, ip: "64:ff9b:1:0:a9:fea9:fe00:0", port: 80, want: ReasonMetadata},
		{name: "API server through local-use NAT64", allow: []string{"64:ff9b:1::/48"}, deny: []string{"10.96.0.1:443"}, ip: "64:ff9b:1::a60:1", port: 443, want: ReasonDenied},
		{name: "u octet set: only the /96 reading", allow: []string{"64:ff9b:1::/48"}, ip: "64:ff9b:1:a9fe:ffa9:fe00::", port: 80},
		{name: "link-local v4", ip: "169.254.1.1", port: 80, want: ReasonLinkLocal},
		{name: "link-local v6", ip: "fe80::1", port: 80, want: ReasonLinkLocal},
		{name: "link-local v6 with zone", ip: "fe80::1%eth0", port: 80, want: ReasonLinkLocal},
		{name: "unspecified v4", ip: "0.0.0.0", port: 80, want: ReasonUnspecified},
		{name: "this network 0.1.2.3", ip: "0.1.2.3", port: 80, want: ReasonUnspecified},
		{name: "unspecified v6", ip: "::", port: 80, want: ReasonUnspecified},
		{name: "multicast v4", ip: "224.0.0.1", port: 80, want: ReasonMulticast},
		{name: "multicast v6", ip: "ff02::1", port: 80, want: ReasonMulticast},
		{name: "broadcast", ip: "255.255.255.255", port: 80, want: ReasonMulticast},
		{name: "private allowed by default", ip: "10.1.2.3", port: 443},
		{name: "private refused when asked", denyPrivate: true, ip: "10.1.2.3", port: 443, want: ReasonPrivate},
		{name: "ULA refused when asked", denyPrivate: true, ip: "fd12::1", port: 443, want: ReasonPrivate},
		{name: "CGNAT refused when asked", denyPrivate: true, ip: "100.64.0.1", port: 443, want: ReasonPrivate},
		{name: "private allow-listed", denyPrivate: true, allow: []string{"10.0.0.0/8"}, ip: "10.1.2.3", port: 443},
		{name: "loopback allow-listed by CIDR", allow: []string{"127.0.0.1/32"}, ip: "127.0.0.1", port: 8443},
		{name: "allow-list CIDR does not cover 127.0.0.2", allow: []string{"127.0.0.1/32"}, ip: "127.0.0.2", port: 8443, want: ReasonLoopback},
		{name: "loopback allow-listed by IP:port", allow: []string{"127.0.0.1:8443"}, ip: "127.0.0.1", port: 8443},
		{name: "IP:port entry is one port only", allow: []string{"127.0.0.1:8443"}, ip: "127.0.0.1", port: 8444, want: ReasonLoopback},
		{name: "IPv6 IP:port entry", allow: []string{"[::1]:8443"}, ip: "::1", port: 8443},
		{name: "name entry lets its addresses through", allow: []string{"mirror.internal:443"}, host: "mirror.internal", ip: "127.0.0.1", port: 443},
		{name: "name entry is case-insensitive", allow: []string{"Mirror.Internal"}, host: "mirror.internal.", ip: "127.0.0.1", port: 8080},
		{name: "name entry needs the name", allow: []string{"mirror.internal:443"}, ip: "127.0.0.1", port: 443, want: ReasonLoopback},
		{name: "name entry is one port only", allow: []string{"mirror.internal:443"}, host: "mirror.internal", ip: "127.0.0.1", port: 80, want: ReasonLoopback},
		{name: "API server denied", deny: []string{"10.96.0.1:443"}, ip: "10.96.0.1", port: 443, want: ReasonDenied},
		{name: "API server deny wins over allow", allow: []string{"10.0.0.0/8"}, deny: []string{"10.96.0.1"}, ip: "10.96.0.1", port: 6443, want: ReasonDenied},
		{name: "API server other port passes", deny: []string{"10.96.0.1:443"}, ip: "10.96.0.1", port: 80},
		{name: "API server by name", deny: []string{"kubernetes.default.svc:443"}, host: "kubernetes.default.svc", ip: "8.8.8.8", port: 443, want: ReasonDenied},
		{name: "invalid port", ip: "93.184.216.34", port: 70000, want: ReasonInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPolicy(tt.allow, tt.deny, tt.denyPrivate)
			if err != nil {
				t.Fatal(err)
			}
			err = p.AllowedHost(tt.host, netip.MustParseAddr(tt.ip), tt.port)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("want allowed, got %v", err)
				}
				return
			}
			var r *RefusedError
			if !errors.As(err, &r) {
				t.Fatalf("want refusal %q, got %v", tt.want, err)
			}
			if r.Reason != tt.want {
				t.Fatalf("want reason %q, got %q (%v)", tt.want, r.Reason, err)
			}
			if !errors.Is(err, ErrRefused) || !IsRefused(err) {
				t.Fatal("a refusal must match ErrRefused and IsRefused")
			}
		})
	}
}

func TestRefusalMessageSaysWhatToDo(t *testing.T) {
	p, _ := NewPolicy(nil, nil, false)
	err := p.Allowed(netip.MustParseAddr("127.0.0.2"), 443)
	want := "fetch guard refused 127.0.0.2:443: it is a loopback address; if it is a trusted mirror, allow it with --fetch-allow=127.0.0.2/32"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}

func TestParseRuleErrors(t *testing.T) {
	for _, bad := range []string{"", "not a host!", "host:0", "host:99999", "10.0.0.0/33", "127.0.0.1:0", "-bad.example"} {
		if _, err := NewPolicy([]string{bad}, nil, false); err == nil {
			t.Errorf("allow entry %q: want an error", bad)
		}
	}
	for _, good := range []string{"10.0.0.0/8", "127.0.0.1", "::1", "[::1]:80", "127.0.0.1:8443", "mirror.example.com", "mirror.example.com:443", "fd00::/8"} {
		if _, err := NewPolicy([]string{good}, nil, false); err != nil {
			t.Errorf("allow entry %q: %v", good, err)
		}
	}
}

func TestAPIServerDenyEntries(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	got := APIServerDenyEntries("https://127.0.0.1:6443")
	want := []string{"127.0.0.1:6443", "10.96.0.1:443"}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got := APIServerDenyEntries("kube.example.com"); got[0] != "kube.example.com:443" {
		t.Fatalf("got %v", got)
	}
	if _, err := NewPolicy(nil, got, false); err != nil {
		t.Fatalf("entries must parse: %v", err)
	}
}

// TestDenyList checks that a guard refuses what its live deny-list holds
// when asked, on every port and whatever the allow-list says, that a list
// whose entries change is judged anew, and that bad entries leave it as
// it was.
func TestDenyList(t *testing.T) {
	d := &DenyList{}
	g, err := New(Config{Allow: []string{"0.0.0.0/0", "::/0"}, DenyLive: d})
	if err != nil {
		t.Fatal(err)
	}
	reason := func(ip string, port int) Reason {
		var r *RefusedError
		if errors.As(g.Allowed(netip.MustParseAddr(ip), port), &r) {
			return r.Reason
		}
		return ""
	}
	if got := reason("172.18.0.2", 6443); got != "" {
		t.Fatalf("an empty list refused 172.18.0.2: %s", got)
	}
	if err := d.Set([]string{"172.18.0.2", "fd00::2"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ip   string
		port int
		want Reason
	}{
		{"172.18.0.2", 6443, ReasonDenied},
		{"172.18.0.2", 443, ReasonDenied},
		{"::ffff:172.18.0.2", 10250, ReasonDenied},
		{"fd00::2", 6443, ReasonDenied},
		{"64:ff9b::ac12:2", 6443, ReasonDenied},
		{"172.18.0.3", 6443, ""},
	} {
		if got := reason(tc.ip, tc.port); got != tc.want {
			t.Errorf("%s port %d: got %q, want %q", tc.ip, tc.port, got, tc.want)
		}
	}
	if err := d.Set([]string{"172.18.0.3"}); err != nil {
		t.Fatal(err)
	}
	if reason("172.18.0.2", 6443) != "" || reason("172.18.0.3", 6443) != ReasonDenied {
		t.Error("a changed list is not judged anew")
	}
	if err := d.Set([]string{"not an address!"}); err == nil {
		t.Error("a bad entry was accepted")
	}
	if reason("172.18.0.3", 6443) != ReasonDenied {
		t.Error("a bad entry emptied the list")
	}
	// A policy without a live list, and a nil list, deny nothing more.
	p, _ := NewPolicy(nil, nil, false)
	if err := p.WithDenyList(nil).Allowed(netip.MustParseAddr("172.18.0.3"), 6443); err != nil {
		t.Errorf("a nil list refused: %v", err)
	}
}
