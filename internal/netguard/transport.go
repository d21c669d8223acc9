package netguard

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Default limits of the guarded transport.
const (
	DefaultDialTimeout           = 10 * time.Second
	DefaultTLSHandshakeTimeout   = 10 * time.Second
	DefaultResponseHeaderTimeout = 30 * time.Second
	DefaultTimeout               = 5 * time.Minute
	DefaultMaxRedirects          = 10
	DefaultMaxResponseBytes      = 256 << 20
)

// Config configures the guard. The zero value refuses loopback, link-local,
// metadata, unspecified and multicast addresses and uses the default timeouts.
type Config struct {
	// Allow lists what may be dialled although the guard would refuse it:
	// CIDRs ("10.0.0.0/8"), IPs ("127.0.0.1"), IP:port ("127.0.0.1:8443",
	// "[::1]:8443") or host names with or without a port
	// ("mirror.internal:443"). It is the only way past the guard. Cloud
	// metadata addresses and Deny entries stay refused.
	Allow []string
	// Deny lists the cluster API server's own addresses, in the same forms. A
	// Deny entry wins over an Allow entry.
	Deny []string
	// DenyLive holds more Deny entries that change while the guard runs:
	// the addresses of the API server's endpoints, kept current by the
	// controller. Copies of a Config share it; nil holds none.
	DenyLive *DenyList
	// DenyPrivate also refuses RFC 1918, unique-local (fc00::/7) and shared
	// (100.64.0.0/10) addresses, unless allow-listed.
	DenyPrivate bool
	// LoopbackOnly, for tests only, refuses every host that
	// is not an IP literal in 127.0.0.0/8 or ::1, or the name localhost
	// (dialled as 127.0.0.1), before any name is resolved
	// (CheckLoopbackOnly): nothing, not even a DNS question, leaves the
	// machine. It only narrows the guard: a loopback address still needs
	// an Allow entry. Outside tests, only the controller's hidden
	// --fetch-loopback-only (which the tests that start the binary pass)
	// sets it; test harnesses and fetchers set it directly.
	LoopbackOnly bool

	// DialTimeout bounds one TCP connect.
	DialTimeout time.Duration
	// TLSHandshakeTimeout bounds one TLS handshake.
	TLSHandshakeTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for a response's headers.
	ResponseHeaderTimeout time.Duration
	// Timeout bounds one request from start to the end of its body.
	Timeout time.Duration
	// MaxRedirects bounds the redirects of one request.
	MaxRedirects int
	// MaxResponseBytes caps every response body.
	MaxResponseBytes int64

	// RootCAs are the certificate authorities trusted for TLS; nil means the
	// system's.
	RootCAs *x509.CertPool
}

func (c Config) withDefaults() Config {
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.TLSHandshakeTimeout <= 0 {
		c.TLSHandshakeTimeout = DefaultTLSHandshakeTimeout
	}
	if c.ResponseHeaderTimeout <= 0 {
		c.ResponseHeaderTimeout = DefaultResponseHeaderTimeout
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxRedirects <= 0 {
		c.MaxRedirects = DefaultMaxRedirects
	}
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	return c
}

// Guard is the one gate every fetch passes: a policy, and the dialer and HTTP
// transport that enforce it on the socket address actually dialled.
type Guard struct {
	*Policy
	cfg       Config
	transport *http.Transport
}

// New builds a guard from its configuration.
func New(cfg Config) (*Guard, error) {
	cfg = cfg.withDefaults()
	p, err := NewPolicy(cfg.Allow, cfg.Deny, cfg.DenyPrivate)
	if err != nil {
		return nil, err
	}
	g := &Guard{Policy: p.WithDenyList(cfg.DenyLive), cfg: cfg}
	g.transport = &http.Transport{
		// NOTE: no proxy, ever: through a proxy the guard would check the
		// proxy's address instead of the source's.
		Proxy:                 nil,
		DialContext:           g.DialContext,
		TLSClientConfig:       &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   cfg.TLSHandshakeTimeout,
		ResponseHeaderTimeout: cfg.ResponseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
	}
	return g, nil
}

// Config returns the guard's configuration, defaults filled in.
func (g *Guard) Config() Config { return g.cfg }

// CheckHost decides, before host is resolved, whether it may be looked up
// and dialled at all: in a loopback-only guard only loopback passes
// (CheckLoopbackOnly); any other guard leaves the decision to the
// addresses host resolves to. A dialler of its own that resolves names
// asks it first, and dials localhost as LoopbackAddr says.
func (g *Guard) CheckHost(host string) error {
	if g.cfg.LoopbackOnly {
		return CheckLoopbackOnly(host)
	}
	return nil
}

// LoopbackAddr is the address a loopback-only guard dials for the name
// localhost, which it never resolves.
var LoopbackAddr = netip.MustParseAddr("127.0.0.1")

// DialContext dials a TCP address, refusing it when the policy does. Names are
// resolved by the dialer; the policy is checked on every resolved address in
// the socket's Control hook, right before connect, so DNS rebinding cannot
// slip an address past the check.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("fetch guard refused network %q: only TCP is dialled", network)
	}
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("fetch guard: cannot read address %q: %w", address, err)
	}
	// NOTE: before anything else, so that a loopback-only guard resolves
	// no name, and localhost is dialled as itself, never looked up.
	if err := g.CheckHost(host); err != nil {
		return nil, err
	}
	if g.cfg.LoopbackOnly && isLocalhost(host) {
		address = net.JoinHostPort(LoopbackAddr.String(), portStr)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("fetch guard: port of %q is not a number", address)
	}
	if g.nameDenied(host, port) {
		return nil, &RefusedError{Host: host, Reason: ReasonDenied}
	}
	// An IP literal is refused before the dialer even starts.
	if ip, err := netip.ParseAddr(host); err == nil {
		if err := g.Allowed(ip, port); err != nil {
			return nil, err
		}
	}
	d := &net.Dialer{
		Timeout:   g.cfg.DialTimeout,
		KeepAlive: 30 * time.Second,
		Control: func(_, raddr string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(raddr)
			if err != nil {
				return &RefusedError{Host: host, Reason: ReasonInvalid}
			}
			if g.cfg.LoopbackOnly {
				// NOTE: defensive: CheckHost passed and localhost dials 127.0.0.1.
				if err := CheckLoopbackOnly(ap.Addr().String()); err != nil {
					return err
				}
			}
			return g.AllowedHost(host, ap.Addr(), int(ap.Port()))
		},
	}
	return d.DialContext(ctx, network, address)
}

// CheckURL checks a request URL before anything is dialled: the scheme must be
// https or http, an IP literal host must pass the policy, and in a
// loopback-only guard the host must be loopback (CheckLoopbackOnly).
func (g *Guard) CheckURL(u *url.URL) error {
	switch u.Scheme {
	case "https", "http":
	default:
		return fmt.Errorf("fetch guard refused %s: only https and http URLs are fetched", redact(u))
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("fetch guard refused %s: the URL has no host", redact(u))
	}
	if err := g.CheckHost(host); err != nil {
		return err
	}
	p, err := strconv.Atoi(portOf(u))
	if err != nil {
		return fmt.Errorf("fetch guard refused %s: the port is not a number", redact(u))
	}
	if g.nameDenied(host, p) {
		return &RefusedError{Host: host, Reason: ReasonDenied}
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return g.Allowed(ip, p)
	}
	return nil
}

// Transport returns the guarded round tripper: it checks every request's URL
// (so every redirect hop too) before dialling, dials through DialContext and
// caps every response body at MaxResponseBytes.
func (g *Guard) Transport() http.RoundTripper {
	return &roundTripper{g: g, next: g.transport}
}

// Client returns an HTTP client that uses the guarded transport, the total
// timeout, and a redirect policy that checks every hop before it is followed.
func (g *Guard) Client() *http.Client {
	return &http.Client{
		Transport:     g.Transport(),
		Timeout:       g.cfg.Timeout,
		CheckRedirect: g.CheckRedirect,
	}
}

// CheckRedirect refuses a redirect beyond MaxRedirects, a downgrade from https
// to http, and a target the policy refuses, before it is followed. A hop to
// another origin than the first request's (scheme, host or port) goes
// without the first request's credentials. Its errors name the target by
// its origin only (Origin).
func (g *Guard) CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= g.cfg.MaxRedirects {
		return fmt.Errorf("fetch guard stopped after %d redirects", len(via))
	}
	target := Origin(req.URL)
	if len(via) > 0 && via[len(via)-1].URL.Scheme == "https" && req.URL.Scheme != "https" {
		return fmt.Errorf("fetch guard refused a redirect from https to %s", target)
	}
	// NOTE: the policy judges only the scheme, host and port, so the
	// origin alone is checked: the refusal then quotes no path either.
	if err := g.CheckURL(&url.URL{Scheme: req.URL.Scheme, Host: req.URL.Host}); err != nil {
		return fmt.Errorf("redirect to %s: %w", target, err)
	}
	if len(via) > 0 && !SameOrigin(via[0].URL, req.URL) {
		// NOTE: net/http copies the first request's headers to every hop,
		// and keeps Authorization and Cookie for the same host name on
		// any port and for its subdomains: another port is another
		// server, so they are dropped here, on every hop that leaves the
		// origin (the next hop gets a fresh copy, judged again).
		for _, h := range credentialHeaders {
			req.Header.Del(h)
		}
	}
	return nil
}

// credentialHeaders are the request headers that carry credentials: a
// redirect to another origin drops them.
var credentialHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie", "Cookie2"}

// SameOrigin reports whether two URLs have the same scheme, host name and
// port (a missing port is the scheme's default): the one server a
// request's credentials are meant for.
func SameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) &&
		strings.EqualFold(strings.TrimSuffix(a.Hostname(), "."), strings.TrimSuffix(b.Hostname(), ".")) &&
		portOf(a) == portOf(b)
}

// portOf is a URL's port, or its scheme's default.
func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	return map[string]string{"https": "443", "http": "80"}[strings.ToLower(u.Scheme)]
}

type roundTripper struct {
	g    *Guard
	next http.RoundTripper
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := rt.g.CheckURL(req.URL); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	resp, err := rt.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	limit := rt.g.cfg.MaxResponseBytes
	if resp.ContentLength > limit {
		_ = resp.Body.Close()
		return nil, &TooLargeError{URL: redact(req.URL), Limit: limit}
	}
	url := redact(req.URL)
	resp.Body = CapBody(resp.Body, limit, func() error { return &TooLargeError{URL: url, Limit: limit} })
	return resp, nil
}

// TooLargeError is returned when a response body exceeds MaxResponseBytes.
type TooLargeError struct {
	URL   string
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("response from %s is larger than %d bytes, the fetch limit; raise the limit if the source is trusted", e.URL, e.Limit)
}

// CapBody returns rc, which fails with the error over returns once more
// than limit bytes are read from it: the bound of a response whose
// sender Capstan does not trust to end it.
func CapBody(rc io.ReadCloser, limit int64, over func() error) io.ReadCloser {
	return &cappedBody{rc: rc, left: limit, over: over}
}

type cappedBody struct {
	rc   io.ReadCloser
	left int64
	over func() error
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells an exact fit from an overflow.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, b.over()
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

// Origin prints a URL as its scheme, host and port alone: how a message
// names where a redirect led. NOTE: a signed address (a chart or blob on
// object storage or a CDN, which a redirect hands out to whoever holds the
// credentials) may carry its token in the path as well as in the query,
// and a path segment cannot be told from a token, so neither is shown;
// the origin is what a user checks or allows (--fetch-allow).
func Origin(u *url.URL) string {
	if u == nil {
		return ""
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
}

// redact prints a URL without its user information.
func redact(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	c.User = nil
	return c.String()
}

// Redact prints a URL string without its user information. A string Go
// cannot parse as a URL (a password with a bare %, a git address such as
// git@host:org/repo) loses, as text, whatever comes before the last @ of
// its authority; a git address with no scheme names only a user. A string
// with no "//" after its scheme, such as admin:s3cret@host/charts (which
// Go reads as the scheme "admin") or https:admin:s3cret@host/charts, has
// no authority for Go, and keeps only what follows its "@".
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err == nil && u.Scheme != "" && u.Host != "" {
		return redact(u)
	}
	if _, userinfo := splitUserinfo(raw); userinfo != "" {
		return strings.Replace(raw, userinfo+"@", "", 1)
	}
	if prefix := userinfoWithoutAuthority(raw); prefix != "" {
		return raw[len(prefix)+1:]
	}
	if err == nil && u.Scheme != "" {
		return redact(u)
	}
	return raw
}

// userinfoWithoutAuthority finds, as text, the user information of a URL
// string whose scheme's colon is not followed by an authority Go reads:
// all that comes before the last "@" ahead of the first "/", "?" or "#"
// after the colon and any slashes that follow it, scheme included (it may
// be the user: admin:s3cret@host parses as the scheme "admin").
func userinfoWithoutAuthority(raw string) string {
	colon := strings.Index(raw, ":")
	if colon < 0 {
		return ""
	}
	body := strings.TrimLeft(raw[colon+1:], "/")
	end := strings.IndexAny(body, "/?#")
	if end < 0 {
		end = len(body)
	}
	at := strings.LastIndex(body[:end], "@")
	if at < 0 {
		return ""
	}
	return raw[:len(raw)-len(body)+at]
}

// splitUserinfo finds, as text, the user information of a URL string with
// a scheme: what comes between "://" and the last "@" of the authority.
func splitUserinfo(raw string) (scheme, userinfo string) {
	i := strings.Index(raw, "://")
	if i < 0 {
		return "", ""
	}
	rest := raw[i+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		return raw[:i], ""
	}
	return raw[:i], rest[:at]
}

// RedactError is err with the user information of raw taken out of its
// text, wherever it appears: a *url.Error quotes the whole URL it could not
// parse, password and all, and go-git and net/http keep a URL's user,
// which may be a token. It still answers errors.Is and errors.As as err
// does.
func RedactError(err error, raw string) error {
	if err == nil {
		return nil
	}
	_, userinfo := splitUserinfo(raw)
	if userinfo == "" {
		userinfo = userinfoWithoutAuthority(raw)
	}
	if userinfo == "" {
		return err
	}
	msg := strings.ReplaceAll(err.Error(), userinfo+"@", "")
	if user, _, _ := strings.Cut(userinfo, ":"); user != "" {
		// NOTE: a client that hid the password kept the user, which may be
		// a token: https://token@host, or user:xxxxx@host.
		msg = regexp.MustCompile(regexp.QuoteMeta(user)+`(:[^@/\s]*)?@`).ReplaceAllString(msg, "")
	}
	return Retext(err, msg)
}

// Retext is err reading msg, its text with what must not be shown taken
// out, that still answers errors.Is and errors.As as err does.
func Retext(err error, msg string) error { return &redactedError{msg: msg, err: err} }

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// ErrRefused can be matched with errors.Is against any *RefusedError.
var ErrRefused = errors.New("fetch guard refused the address")

// Is makes errors.Is(err, ErrRefused) true for every refusal.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// ShownAddress is what may be shown of u: its origin alone (Origin) when it
// is of another origin than own's (a redirect's target, often signed), its
// path without the query on one of own's origins.
func ShownAddress(u *url.URL, own ...*url.URL) *url.URL {
	shown := &url.URL{Scheme: u.Scheme, Host: u.Host}
	for _, o := range own {
		if o != nil && SameOrigin(o, u) {
			shown.Path = u.Path
			break
		}
	}
	return shown
}

// HideAddresses is err with every http and https address it names cut to
// what may be shown: an address of another origin than own's (a redirect's
// target) by its origin alone (Origin), one of own's origins by its path
// without the query. NOTE: a redirect's target is often a signed address,
// whose token is in the query and, on some CDNs, in the path
// (/t/eyJhbGciOi.../repo.git), which no rule can tell from an ordinary
// segment; net/http quotes it in its url.Error and go-git in its status
// and "changes scheme" messages, as plain text. So every *url.Error in the
// chain is rewritten in place, and the text is scrubbed too: the result
// reads the scrubbed text and still answers errors.Is and errors.As as err
// does. A go-git status error is reworded to name only the origin.
func HideAddresses(err error, own ...*url.URL) error {
	if err == nil {
		return nil
	}
	hide := func(u *url.URL) string { return ShownAddress(u, own...).String() }
	var rewrite func(e error)
	rewrite = func(e error) {
		for e != nil {
			if ue, ok := e.(*url.Error); ok {
				if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
					ue.URL = hide(u)
				} else {
					ue.URL = Redact(ue.URL)
				}
			}
			if joined, ok := e.(interface{ Unwrap() []error }); ok {
				for _, c := range joined.Unwrap() {
					rewrite(c)
				}
				return
			}
			e = errors.Unwrap(e)
		}
	}
	rewrite(err)
	text := err.Error()
	msg := gitStatusRE.ReplaceAllStringFunc(text, func(s string) string {
		m := gitStatusRE.FindStringSubmatch(s)
		return "unexpected status " + m[2] + " from " + originText(m[1])
	})
	msg = addressRE.ReplaceAllStringFunc(msg, func(s string) string {
		trimmed := strings.TrimRight(s, ".,;:)]}")
		u, perr := url.Parse(trimmed)
		if perr != nil || u.Host == "" {
			return originText(trimmed) + s[len(trimmed):]
		}
		return hide(u) + s[len(trimmed):]
	})
	if msg == text {
		return err
	}
	return Retext(err, msg)
}

var (
	// addressRE finds an http or https address in a message, quoted or not.
	addressRE = regexp.MustCompile("(?i)\\bhttps?://[^\\s\"'<>`]+")
	// gitStatusRE finds go-git's message for a status it did not expect
	// (plumbing/transport/http.Err), which quotes the last hop's address.
	gitStatusRE = regexp.MustCompile(`unexpected requesting "([^"]*)" status code: (\d+)`)
)

// originText is the scheme and authority of an address given as text, its
// user information left out; what comes after them is cut even when Go
// cannot parse the address.
func originText(s string) string {
	if u, err := url.Parse(s); err == nil && u.Host != "" {
		return Origin(u)
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	return scheme + "://" + rest
}
