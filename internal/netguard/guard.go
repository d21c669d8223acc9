// Package netguard decides which network addresses Capstan may fetch sources
// from, and provides the one dialer and HTTP transport that enforce the decision
// on the address actually dialled.
package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
)

// Reason says why the guard refused an address.
type Reason string

// The reasons an address is refused.
const (
	ReasonLoopback    Reason = "loopback address"
	ReasonLinkLocal   Reason = "link-local address"
	ReasonMetadata    Reason = "cloud metadata address"
	ReasonUnspecified Reason = "unspecified address"
	ReasonMulticast   Reason = "multicast or broadcast address"
	ReasonPrivate     Reason = "private address"
	ReasonDenied      Reason = "the cluster API server's address"
	ReasonTranslated  Reason = "local-use IPv4/IPv6 translation address"
	ReasonInvalid     Reason = "invalid address"
	// ReasonNotLoopback refuses, in a loopback-only guard
	// (Config.LoopbackOnly), a name or an address that is not loopback,
	// before the name is resolved.
	ReasonNotLoopback Reason = "name or address other than loopback"
)

// RefusedError is the error of every refusal. It names the address, never a
// URL's credentials.
type RefusedError struct {
	// Host is the name that was asked for, if any.
	Host string
	// Addr is the address that was refused.
	Addr netip.AddrPort
	// Reason says why.
	Reason Reason
}

func (e *RefusedError) Error() string {
	target := e.Addr.String()
	switch {
	case !e.Addr.IsValid() && e.Host != "":
		target = e.Host
	case e.Host != "" && e.Host != e.Addr.Addr().String():
		target = fmt.Sprintf("%s (%s)", e.Host, e.Addr)
	}
	switch e.Reason {
	case ReasonNotLoopback:
		return fmt.Sprintf("fetch guard refused %s: this guard is loopback-only (for tests) and dials nothing but 127.0.0.0/8, ::1 and localhost; the name was not resolved and nothing was dialled", target)
	case ReasonDenied:
		return fmt.Sprintf("fetch guard refused %s: it is %s, which is never a source", target, e.Reason)
	case ReasonMetadata:
		return fmt.Sprintf("fetch guard refused %s: it is a %s, which no allow-list entry opens", target, e.Reason)
	case ReasonInvalid:
		return fmt.Sprintf("fetch guard refused %s: %s", target, e.Reason)
	}
	return fmt.Sprintf("fetch guard refused %s: it is a %s; if it is a trusted mirror, allow it with --fetch-allow=%s", target, e.Reason, allowHint(e.Addr))
}

func allowHint(ap netip.AddrPort) string {
	a := ap.Addr()
	if a.Is4() {
		return a.String() + "/32"
	}
	return a.String() + "/128"
}

// IsRefused reports whether err, or an error it wraps, is a refusal of the guard.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}

// CheckLoopbackOnly is the decision of a loopback-only guard
// (Config.LoopbackOnly) on host, a URL's or a dial address's host without
// brackets: only an IP literal in 127.0.0.0/8, ::1 (an IPv4-mapped
// loopback address too) and the name localhost pass. It returns nil or a
// *RefusedError of ReasonNotLoopback, and never resolves host: any other
// name is refused as it is written, so not even a DNS question leaves the
// machine.
func CheckLoopbackOnly(host string) error {
	if isLocalhost(host) {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return &RefusedError{Host: host, Reason: ReasonNotLoopback}
	}
	// NOTE: the zone is dropped, as decide drops it; ::1%lo is still ::1.
	if a := ip.Unmap().WithZone(""); !a.IsLoopback() {
		return &RefusedError{Host: host, Reason: ReasonNotLoopback}
	}
	return nil
}

// isLocalhost reports whether host is the name localhost, which a
// loopback-only guard dials as 127.0.0.1 without resolving it.
func isLocalhost(host string) bool {
	return strings.EqualFold(strings.TrimSuffix(host, "."), "localhost")
}

// metadataAddrs are the cloud metadata and workload credential endpoints.
// They are refused even when an allow-list entry covers them: nothing Capstan
// fetches lives there, and they hand out the node's or the pod's cloud
// credentials to whoever asks.
// NOTE: the IPv6 ones are unique-local (fc00::/7), not link-local, so the
// default policy would let them through (private addresses are refused only
// with --fetch-deny-private), as would an allow-list entry of ::/0.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack and most others
	netip.MustParseAddr("169.254.170.2"),   // AWS ECS task metadata
	netip.MustParseAddr("169.254.170.23"),  // AWS EKS Pod Identity agent
	netip.MustParseAddr("fd00:ec2::254"),   // AWS IPv6 metadata
	netip.MustParseAddr("fd00:ec2::23"),    // AWS EKS Pod Identity agent, IPv6
	netip.MustParseAddr("fd20:ce::254"),    // GCP IPv6 metadata
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
	netip.MustParseAddr("168.63.129.16"),   // Azure WireServer
	netip.MustParseAddr("169.254.42.42"),   // Scaleway
	netip.MustParseAddr("fd00:42::42"),     // Scaleway IPv6
	netip.MustParseAddr("192.0.0.192"),     // Oracle Cloud Classic
}

var (
	// thisNetwork is 0.0.0.0/8: "this host on this network", dialled as loopback on Linux.
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	broadcast   = netip.MustParseAddr("255.255.255.255")
	// nat64 and sixToFour embed an IPv4 address that a gateway dials on our behalf.
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
	// nat64Local is RFC 8215's local-use translation prefix, from which a
	// network takes its own translation prefixes, of any RFC 6052 length.
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	// sharedAddressSpace is the carrier-grade NAT range, private in effect.
	sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")
)

// rule is one allow-list or deny-list entry. Exactly one of prefix, addrPort
// and name is set; port 0 means any port.
type rule struct {
	prefix   netip.Prefix
	addrPort netip.AddrPort
	name     string
	port     uint16
}

func (r rule) matchesAddr(a netip.Addr, port uint16) bool {
	switch {
	case r.prefix.IsValid():
		return r.prefix.Contains(a)
	case r.addrPort.IsValid():
		return r.addrPort.Addr() == a && r.addrPort.Port() == port
	}
	return false
}

func (r rule) matchesName(host string, port uint16) bool {
	return r.name != "" && strings.EqualFold(strings.TrimSuffix(host, "."), r.name) && (r.port == 0 || r.port == port)
}

// parseRule reads one entry: a CIDR ("10.0.0.0/8"), an IP ("127.0.0.1"), an
// IP and port ("127.0.0.1:8443", "[::1]:8443"), or a host name with or without
// a port ("mirror.example.com:443").
func parseRule(s string) (rule, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return rule{}, errors.New("empty entry")
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		return rule{prefix: p.Masked()}, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		a = a.Unmap()
		return rule{prefix: netip.PrefixFrom(a, a.BitLen())}, nil
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		if ap.Port() == 0 {
			return rule{}, fmt.Errorf("%q: port 0 is not a port", s)
		}
		return rule{addrPort: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())}, nil
	}
	host, port := s, uint16(0)
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return rule{}, fmt.Errorf("%q: the port must be a number from 1 to 65535", s)
		}
		host, port = h, uint16(n)
	}
	if !validHostName(host) {
		return rule{}, fmt.Errorf("%q is neither a CIDR, an IP, IP:port nor host[:port]", s)
	}
	return rule{name: strings.ToLower(strings.TrimSuffix(host, ".")), port: port}, nil
}

func validHostName(h string) bool {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

func parseRules(what string, entries []string) ([]rule, error) {
	out := make([]rule, 0, len(entries))
	for _, e := range entries {
		r, err := parseRule(e)
		if err != nil {
			return nil, fmt.Errorf("fetch guard %s entry %w", what, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Policy is the pure decision part of the guard: which addresses may be dialled.
type Policy struct {
	allow       []rule
	deny        []rule
	denyPrivate bool
	// live holds deny-list entries that change while the policy is used;
	// nil holds none.
	live *DenyList
}

// DenyList is a deny-list that may change while guards use it, such as the
// addresses of the cluster API server's endpoints, which move when a
// control plane node is replaced. Its zero value denies nothing; it is
// safe for concurrent use, and several guards may share one.
type DenyList struct {
	rules atomic.Pointer[[]rule]
}

// Set replaces the entries (in the forms of Config.Deny). On an error the
// entries are left as they were.
func (d *DenyList) Set(entries []string) error {
	r, err := parseRules("deny-list", entries)
	if err != nil {
		return err
	}
	d.rules.Store(&r)
	return nil
}

// list returns the current entries; a nil list has none.
func (d *DenyList) list() []rule {
	if d == nil {
		return nil
	}
	if r := d.rules.Load(); r != nil {
		return *r
	}
	return nil
}

// WithDenyList makes the policy also refuse what d holds, whenever it is
// asked, and returns it. It is for a policy being built: the list is read
// without a lock.
func (p *Policy) WithDenyList(d *DenyList) *Policy {
	p.live = d
	return p
}

// NewPolicy builds a policy from allow-list and deny-list entries (see
// Config.Allow and Config.Deny for their forms).
func NewPolicy(allow, deny []string, denyPrivate bool) (*Policy, error) {
	a, err := parseRules("allow-list", allow)
	if err != nil {
		return nil, err
	}
	d, err := parseRules("deny-list", deny)
	if err != nil {
		return nil, err
	}
	return &Policy{allow: a, deny: d, denyPrivate: denyPrivate}, nil
}

// Allowed decides whether ip:port may be dialled when no host name is known.
// It returns nil or a *RefusedError. It never touches the network.
func (p *Policy) Allowed(ip netip.Addr, port int) error {
	return p.decide("", ip, port)
}

// AllowedHost decides whether ip:port may be dialled for the host name that
// resolved to it. An allow-list entry naming the host lets every address the
// name resolves to through, except metadata and denied addresses.
func (p *Policy) AllowedHost(host string, ip netip.Addr, port int) error {
	return p.decide(host, ip, port)
}

func (p *Policy) decide(host string, ip netip.Addr, port int) error {
	if port < 0 || port > 65535 || !ip.IsValid() {
		return &RefusedError{Host: host, Reason: ReasonInvalid}
	}
	// NOTE: the zone is dropped for the comparison only; fe80::1%eth0 is still link-local.
	a := ip.Unmap().WithZone("")
	ap := netip.AddrPortFrom(a, uint16(port))
	refuse := func(r Reason) error { return &RefusedError{Host: host, Addr: ap, Reason: r} }

	if r := p.neverAllowed(host, a, port); r != "" {
		return refuse(r)
	}
	// An address embedded in a NAT64 or 6to4 address is judged as itself.
	if embedded, ok := embeddedIPv4(a); ok {
		if err := p.decide(host, embedded, port); err != nil {
			return err
		}
	}
	// NOTE: an address of the local-use prefix does not say which of its
	// RFC 6052 formats (/48, /56, /64 or /96) the network's translator
	// uses, so where its IPv4 address sits is unknown: every reading is
	// judged for what no allow-list entry opens, and the address is
	// refused unless an allow-list entry names it.
	if nat64Local.Contains(a) {
		for _, v4 := range localUseIPv4Readings(a) {
			if r := p.neverAllowed("", v4, port); r != "" {
				return refuse(r)
			}
		}
	}
	for _, r := range p.allow {
		if r.matchesAddr(a, uint16(port)) || (host != "" && r.matchesName(host, uint16(port))) {
			return nil
		}
	}
	switch {
	case a.IsUnspecified() || (a.Is4() && thisNetwork.Contains(a)):
		return refuse(ReasonUnspecified)
	case a.IsLoopback():
		return refuse(ReasonLoopback)
	case a.IsLinkLocalUnicast():
		return refuse(ReasonLinkLocal)
	case a.IsMulticast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() || a == broadcast:
		return refuse(ReasonMulticast)
	case p.denyPrivate && (a.IsPrivate() || sharedAddressSpace.Contains(a)):
		return refuse(ReasonPrivate)
	case nat64Local.Contains(a):
		return refuse(ReasonTranslated)
	}
	return nil
}

// neverAllowed returns the reason an address is refused whatever the
// allow-list says, a deny-list entry or a metadata address, or "".
func (p *Policy) neverAllowed(host string, a netip.Addr, port int) Reason {
	for _, list := range [][]rule{p.deny, p.live.list()} {
		for _, r := range list {
			if r.matchesAddr(a, uint16(port)) || (host != "" && r.matchesName(host, uint16(port))) {
				return ReasonDenied
			}
		}
	}
	for _, m := range metadataAddrs {
		if a == m {
			return ReasonMetadata
		}
	}
	return ""
}

// nameDenied reports whether a host name itself is on the deny-list.
func (p *Policy) nameDenied(host string, port int) bool {
	for _, list := range [][]rule{p.deny, p.live.list()} {
		for _, r := range list {
			if r.matchesName(host, uint16(port)) {
				return true
			}
		}
	}
	return false
}

func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	}
	return netip.Addr{}, false
}

// localUseIPv4Readings returns the IPv4 addresses an address of
// 64:ff9b:1::/48 embeds under each RFC 6052 format its prefix may have
// been cut to (section 2.2): for a /48, /56 or /64 prefix the IPv4 bits
// skip bits 64 to 71, the u octet, which is then zero; for a /96 they are
// the last 32 bits.
func localUseIPv4Readings(a netip.Addr) []netip.Addr {
	b := a.As16()
	out := []netip.Addr{netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})}
	if b[8] == 0 {
		out = append(out,
			netip.AddrFrom4([4]byte{b[6], b[7], b[9], b[10]}),   // /48
			netip.AddrFrom4([4]byte{b[7], b[9], b[10], b[11]}),  // /56
			netip.AddrFrom4([4]byte{b[9], b[10], b[11], b[12]}), // /64
		)
	}
	return out
}
