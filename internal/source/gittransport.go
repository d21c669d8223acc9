package source

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"capstan.dev/capstan/internal/netguard"
)

// NOTE: go-git picks its transport from a process-wide table by URL scheme,
// with no per-call option. The table's http, https and ssh entries are
// replaced once, at package init (before any goroutine can read the table),
// by a dispatcher that sends a fetch or a push carrying a *guardedAuth
// through that auth's guarded transport. Fetches and pushes without one,
// from code outside this package, keep go-git's own transports.
func init() {
	for _, scheme := range []string{"http", "https", "ssh"} {
		client.InstallProtocol(scheme, &dispatcher{fallback: client.Protocols[scheme]})
	}
}

// guardedAuth carries the transport a fetch must use, and the real auth method.
type guardedAuth struct {
	transport transport.Transport
	inner     transport.AuthMethod
}

func (a *guardedAuth) Name() string { return "capstan-guarded" }

func (a *guardedAuth) String() string {
	if a.inner == nil {
		return "capstan-guarded (anonymous)"
	}
	// go-git's auth methods print without secrets.
	return "capstan-guarded (" + a.inner.Name() + ")"
}

type dispatcher struct {
	fallback transport.Transport
}

func (d *dispatcher) NewUploadPackSession(ep *transport.Endpoint, auth transport.AuthMethod) (transport.UploadPackSession, error) {
	if g, ok := auth.(*guardedAuth); ok {
		return g.transport.NewUploadPackSession(ep, g.inner)
	}
	return d.fallback.NewUploadPackSession(ep, auth)
}

// NewReceivePackSession opens a push. The server's commits (gitops.Writer
// with Fetcher.GitAuth) push to repositories any tenant admin may name in an
// AddonRepository, so a push is dialled through the same guard as a fetch.
func (d *dispatcher) NewReceivePackSession(ep *transport.Endpoint, auth transport.AuthMethod) (transport.ReceivePackSession, error) {
	if g, ok := auth.(*guardedAuth); ok {
		return g.transport.NewReceivePackSession(ep, g.inner)
	}
	return d.fallback.NewReceivePackSession(ep, auth)
}

// gitTransports are a Fetcher's guarded git transports.
type gitTransports struct {
	http transport.Transport
	ssh  transport.Transport
}

// newGitTransports builds the guarded transports. Over http and https, go-git
// sends the credentials to the repository's origin only, and drops them when
// the ref listing is redirected to another origin; the guard's client checks
// every hop, bounds every request by the guard's timeout and caps every
// response body, a ref advertisement at MaxRefAdvertisementBytes. Over ssh,
// the connection is pinned to an address the guard allows and capped as
// the bodies are (gitcap.go). A push is bounded by the guard's timeout on
// both.
func newGitTransports(c *http.Client, g *netguard.Guard) gitTransports {
	timeout := g.Config().Timeout
	capped := *c
	capped.Transport = refsCapTransport{next: c.Transport}
	return gitTransports{
		http: boundedPush{
			Transport: keptCauses{githttp.NewClientWithOptions(&capped, &githttp.ClientOptions{RedirectPolicy: githttp.FollowInitialRedirects})},
			timeout:   timeout,
		},
		ssh: boundedPush{Transport: &sshGuard{guard: g, next: gitssh.DefaultClient}, timeout: timeout},
	}
}

// keptCauses keeps the cause of an http fetch's error within reach of
// errors.As: go-git wraps the client's error of the pack request in a
// plumbing.UnexpectedError, which does not unwrap, and Capstan tells a
// server's answer to come back later (RetryAfterError) from a broken fetch
// by its type.
type keptCauses struct {
	transport.Transport
}

func (k keptCauses) NewUploadPackSession(ep *transport.Endpoint, auth transport.AuthMethod) (transport.UploadPackSession, error) {
	s, err := k.Transport.NewUploadPackSession(ep, auth)
	if err != nil {
		return nil, err
	}
	return causeKeptUploadPack{s}, nil
}

type causeKeptUploadPack struct {
	transport.UploadPackSession
}

func (s causeKeptUploadPack) UploadPack(ctx context.Context, req *packp.UploadPackRequest) (*packp.UploadPackResponse, error) {
	resp, err := s.UploadPackSession.UploadPack(ctx, req)
	if ue, ok := err.(*plumbing.UnexpectedError); ok {
		err = unwrappingError{ue}
	}
	return resp, err
}

// unwrappingError is a plumbing.UnexpectedError, same message, that
// unwraps to its cause.
type unwrappingError struct {
	*plumbing.UnexpectedError
}

func (e unwrappingError) Unwrap() error { return e.Err }

// boundedPush bounds every push session in time: go-git's ssh session has
// no timeout of its own, and a server that answers a byte a minute would
// hold the request that pushes for good.
type boundedPush struct {
	transport.Transport
	timeout time.Duration
}

func (b boundedPush) NewReceivePackSession(ep *transport.Endpoint, auth transport.AuthMethod) (transport.ReceivePackSession, error) {
	s, err := b.Transport.NewReceivePackSession(ep, auth)
	if err != nil {
		return nil, err
	}
	return &boundedReceivePack{ReceivePackSession: s, timeout: b.timeout}, nil
}

// boundedReceivePack gives each step of a push the push's time bound.
type boundedReceivePack struct {
	transport.ReceivePackSession
	timeout time.Duration
}

func (s *boundedReceivePack) AdvertisedReferences() (*packp.AdvRefs, error) {
	return s.AdvertisedReferencesContext(context.Background())
}

func (s *boundedReceivePack) AdvertisedReferencesContext(ctx context.Context) (*packp.AdvRefs, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.ReceivePackSession.AdvertisedReferencesContext(ctx)
}

func (s *boundedReceivePack) ReceivePack(ctx context.Context, req *packp.ReferenceUpdateRequest) (*packp.ReportStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.ReceivePackSession.ReceivePack(ctx, req)
}

// sshGuard resolves an ssh endpoint's host, checks every address with the
// guard, and pins the connection to the first allowed address, so the name
// cannot resolve to another address between the check and the dial.
type sshGuard struct {
	guard *netguard.Guard
	next  transport.Transport
}

func (s *sshGuard) NewUploadPackSession(ep *transport.Endpoint, auth transport.AuthMethod) (transport.UploadPackSession, error) {
	pinned, d, err := s.dial(ep)
	if err != nil {
		return nil, err
	}
	defer d.release()
	sess, err := s.next.NewUploadPackSession(pinned, auth)
	if err != nil {
		return nil, d.explain(err)
	}
	return &cappedUploadPack{UploadPackSession: sess, dial: d, packBytes: s.guard.Config().MaxResponseBytes}, nil
}

func (s *sshGuard) NewReceivePackSession(ep *transport.Endpoint, auth transport.AuthMethod) (transport.ReceivePackSession, error) {
	pinned, d, err := s.dial(ep)
	if err != nil {
		return nil, err
	}
	defer d.release()
	sess, err := s.next.NewReceivePackSession(pinned, auth)
	if err != nil {
		return nil, d.explain(err)
	}
	return &cappedReceivePack{ReceivePackSession: sess, dial: d}, nil
}

// dial pins ep and has go-git dial it through a capped connection: go-git
// opens the connection while it opens the session, so the dial is
// released once the session is open.
func (s *sshGuard) dial(ep *transport.Endpoint) (*transport.Endpoint, *sshDial, error) {
	pinned, err := s.pin(ep)
	if err != nil {
		return nil, nil, err
	}
	d := newSSHDial(s.guard.Config().DialTimeout, MaxRefAdvertisementBytes+sshOverheadBytes)
	// NOTE: a proxy of Capstan's own also keeps go-git from dialling
	// through one named by ALL_PROXY, where the guard would have checked
	// the proxy's address instead of the server's.
	pinned.Proxy = transport.ProxyOptions{URL: d.proxyURL()}
	return pinned, d, nil
}

func (s *sshGuard) pin(ep *transport.Endpoint) (*transport.Endpoint, error) {
	port := ep.Port
	if port == 0 {
		port = 22
	}
	addrs, err := s.resolve(ep.Host)
	if err != nil {
		return nil, err
	}
	var firstErr error
	for _, a := range addrs {
		if err := s.guard.AllowedHost(ep.Host, a, port); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		pinned := *ep
		pinned.Host = a.String()
		pinned.Port = port
		return &pinned, nil
	}
	return nil, firstErr
}

func (s *sshGuard) resolve(host string) ([]netip.Addr, error) {
	// NOTE: a loopback-only guard refuses a name before it is looked up,
	// and dials localhost without looking it up.
	if err := s.guard.CheckHost(host); err != nil {
		return nil, err
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	if s.guard.Config().LoopbackOnly {
		return []netip.Addr{netguard.LoopbackAddr}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.guard.Config().DialTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("cannot resolve %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s resolves to no address", host)
	}
	return addrs, nil
}

// sshKeyAuth is an SSH key whose host key check uses the name from the URL
// (the connection is pinned to an IP) and whose dial has a timeout.
type sshKeyAuth struct {
	*gitssh.PublicKeys
	timeout time.Duration
}

func (a *sshKeyAuth) ClientConfig() (*ssh.ClientConfig, error) {
	c, err := a.PublicKeys.ClientConfig()
	if err != nil {
		return nil, err
	}
	c.Timeout = a.timeout
	return c, nil
}

// newSSHAuth builds SSH key auth whose host keys come from known_hosts only.
func newSSHAuth(ep *transport.Endpoint, creds *Credentials, timeout time.Duration) (*sshKeyAuth, error) {
	user := ep.User
	if user == "" {
		user = creds.Username
	}
	if user == "" {
		user = "git"
	}
	keys, err := gitssh.NewPublicKeys(user, creds.Identity, creds.Password)
	if err != nil {
		return nil, fmt.Errorf("key %s of the credentials Secret is not a usable SSH private key (%v); check its format and passphrase", SecretKeyIdentity, err)
	}
	check, err := knownHostsCallback(creds.KnownHosts)
	if err != nil {
		return nil, err
	}
	port := ep.Port
	if port == 0 {
		port = 22
	}
	hostPort := net.JoinHostPort(ep.Host, strconv.Itoa(port))
	keys.HostKeyCallback = func(_ string, remote net.Addr, key ssh.PublicKey) error {
		if err := check(hostPort, remote, key); err != nil {
			return fmt.Errorf("the SSH host key of %s is not in known_hosts of the credentials Secret: %w", hostPort, err)
		}
		return nil
	}
	return &sshKeyAuth{PublicKeys: keys, timeout: timeout}, nil
}

// knownHostsCallback parses known_hosts content. x/crypto's parser reads
// files only, so the content goes through a private temporary file.
func knownHostsCallback(content []byte) (ssh.HostKeyCallback, error) {
	f, err := os.CreateTemp("", "capstan-known-hosts-*")
	if err != nil {
		return nil, fmt.Errorf("cannot write known_hosts: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(content); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot write known_hosts: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("cannot write known_hosts: %w", err)
	}
	cb, err := knownhosts.New(f.Name())
	if err != nil {
		return nil, fmt.Errorf("key %s of the credentials Secret is not valid known_hosts content: %v", SecretKeyKnownHosts, err)
	}
	return cb, nil
}
