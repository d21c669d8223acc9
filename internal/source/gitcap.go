package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"golang.org/x/net/proxy"

	"capstan.dev/capstan/internal/netguard"
)

// A git server is untrusted input: any tenant may name their own in an
// Addon's git.url. Before any pack, it sends the list of its refs, which
// go-git reads whole into memory, with no bound of its own on their number.
// These bounds keep one server from taking the shared controller's memory
// with it.
const (
	// MaxRefAdvertisementBytes bounds a git server's list of refs: the
	// answer to /info/refs over http and https, the first answer of the
	// server over ssh. A ref takes some 60 bytes in it, so this holds a
	// quarter of a million refs; the largest public repositories advertise
	// tens of thousands. Without it, the list was held only to
	// --fetch-max-response-bytes over http, and to nothing over ssh.
	MaxRefAdvertisementBytes = 16 << 20
	// MaxGitRefs bounds the refs a repository may advertise. Each costs a
	// few hundred bytes once go-git has parsed it; a repository with more
	// is refused with what to do rather than read.
	MaxGitRefs = 100_000
	// sshOverheadBytes is what an ssh connection carries before and
	// around the refs: the handshake, and each packet's framing.
	sshOverheadBytes = 1 << 20
)

// ErrTooManyRefs is the error of a repository whose list of refs is over
// MaxRefAdvertisementBytes or MaxGitRefs.
var ErrTooManyRefs = errors.New("the repository advertises too many refs")

// tooManyRefs is ErrTooManyRefs with what was over which bound and what to do.
func tooManyRefs(what string) error {
	return fmt.Errorf("%w: %s; Capstan reads at most %d refs (branches, tags, pull-request and other refs) in at most %s: delete stale branches and tags, or keep the add-on in a repository with fewer refs",
		ErrTooManyRefs, what, MaxGitRefs, byteSize(MaxRefAdvertisementBytes))
}

// checkRefCount refuses a ref list longer than MaxGitRefs.
func checkRefCount(n int) error {
	if n > MaxGitRefs {
		return tooManyRefs(fmt.Sprintf("it lists %d refs", n))
	}
	return nil
}

// refsCapTransport caps the body of every ref advertisement request (a
// path ending in /info/refs, which git's smart and dumb http protocols
// both use) at MaxRefAdvertisementBytes, below the guard's cap on every
// response.
type refsCapTransport struct {
	next http.RoundTripper
}

func (t refsCapTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || !strings.HasSuffix(req.URL.Path, "/info/refs") {
		return resp, err
	}
	if resp.ContentLength > MaxRefAdvertisementBytes {
		_ = resp.Body.Close()
		return nil, tooManyRefs(fmt.Sprintf("its list of refs is %d bytes", resp.ContentLength))
	}
	resp.Body = netguard.CapBody(resp.Body, MaxRefAdvertisementBytes, func() error {
		return tooManyRefs("its list of refs is larger than " + byteSize(MaxRefAdvertisementBytes))
	})
	return resp, nil
}

// sshDialScheme is the scheme of the proxy URL through which go-git's ssh
// transport dials Capstan's capped connection. go-git dials ssh itself,
// with no option to hand it a connection, but it dials through
// golang.org/x/net/proxy, which takes dialers registered by scheme.
const sshDialScheme = "capstan-ssh"

// sshDials are the ssh dials being opened, by the token in their proxy URL.
var (
	sshDials     sync.Map // string → *sshDial
	sshDialToken atomic.Uint64
)

func init() {
	proxy.RegisterDialerType(sshDialScheme, func(u *url.URL, _ proxy.Dialer) (proxy.Dialer, error) {
		d, ok := sshDials.Load(u.Host)
		if !ok {
			return nil, errors.New("the guarded ssh dial is gone; try again")
		}
		return d.(*sshDial), nil
	})
}

// sshDial dials one ssh session's connection, to an address sshGuard has
// already checked and pinned, and caps what the server sends on it. It
// starts at limit bytes, what the server may send before its refs are read.
type sshDial struct {
	token   string
	timeout time.Duration
	limit   int64
	conn    atomic.Pointer[cappedConn]
}

// newSSHDial registers a dial; release it once the session is open.
func newSSHDial(timeout time.Duration, limit int64) *sshDial {
	d := &sshDial{token: strconv.FormatUint(sshDialToken.Add(1), 10), timeout: timeout, limit: limit}
	sshDials.Store(d.token, d)
	return d
}

func (d *sshDial) release() { sshDials.Delete(d.token) }

// proxyURL is the URL that makes go-git dial through d.
func (d *sshDial) proxyURL() string { return sshDialScheme + "://" + d.token }

func (d *sshDial) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

func (d *sshDial) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{Timeout: d.timeout, KeepAlive: 30 * time.Second}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	cc := newCappedConn(c, d.limit)
	d.conn.Store(cc)
	return cc, nil
}

// raise lets the server send by bytes more on the connection.
func (d *sshDial) raise(by int64) {
	if c := d.conn.Load(); c != nil {
		c.raise(by)
	}
}

// explain is err, or the cap's error when the connection went over it:
// the ssh library reports a closed connection as the end of its
// channels, which go-git reports as a truncated answer.
func (d *sshDial) explain(err error) error {
	if err == nil {
		return nil
	}
	if c := d.conn.Load(); c != nil && c.over.Load() {
		return c.tooLarge()
	}
	return err
}

// cappedConn is a connection that refuses to read more than its limit, as
// every response body over http is capped: the limit grows as a session
// moves from the server's refs to its pack.
type cappedConn struct {
	net.Conn
	read  atomic.Int64
	limit atomic.Int64
	// adverts is the limit before any raise: while the read stays within
	// it, the server is still sending its refs.
	adverts int64
	over    atomic.Bool
}

func newCappedConn(c net.Conn, limit int64) *cappedConn {
	cc := &cappedConn{Conn: c, adverts: limit}
	cc.limit.Store(limit)
	return cc
}

func (c *cappedConn) raise(by int64) { c.limit.Add(by) }

func (c *cappedConn) Read(p []byte) (int, error) {
	left := c.limit.Load() - c.read.Load()
	if left <= 0 {
		// One byte more tells an exact fit from an overflow.
		var one [1]byte
		n, err := c.Conn.Read(one[:])
		if n > 0 {
			c.over.Store(true)
			return 0, c.tooLarge()
		}
		return 0, err
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// tooLarge says which bound the server went over.
func (c *cappedConn) tooLarge() error {
	if c.limit.Load() == c.adverts {
		return tooManyRefs("over ssh, its list of refs is larger than " + byteSize(MaxRefAdvertisementBytes))
	}
	return fmt.Errorf("%w: over ssh, the server sent more than %s, the cap on what one fetch reads (--fetch-max-response-bytes)",
		ErrGitTooLarge, byteSize(c.limit.Load()))
}

// cappedUploadPack is an ssh fetch whose connection is capped: at
// MaxRefAdvertisementBytes until the server's refs are read, then at
// packBytes more for the pack.
type cappedUploadPack struct {
	transport.UploadPackSession
	dial      *sshDial
	packBytes int64
	raised    bool
}

func (s *cappedUploadPack) AdvertisedReferences() (*packp.AdvRefs, error) {
	return s.AdvertisedReferencesContext(context.Background())
}

func (s *cappedUploadPack) AdvertisedReferencesContext(ctx context.Context) (*packp.AdvRefs, error) {
	ar, err := s.UploadPackSession.AdvertisedReferencesContext(ctx)
	if err != nil {
		return nil, s.dial.explain(err)
	}
	if !s.raised {
		s.raised = true
		s.dial.raise(s.packBytes)
	}
	return ar, nil
}

func (s *cappedUploadPack) UploadPack(ctx context.Context, req *packp.UploadPackRequest) (*packp.UploadPackResponse, error) {
	if _, err := s.AdvertisedReferencesContext(ctx); err != nil {
		return nil, err
	}
	resp, err := s.UploadPackSession.UploadPack(ctx, req)
	if err != nil {
		return nil, s.dial.explain(err)
	}
	out := packp.NewUploadPackResponseWithPackfile(req, &explainingReader{rc: resp, dial: s.dial})
	out.ShallowUpdate = resp.ShallowUpdate
	out.ServerResponse = resp.ServerResponse
	return out, nil
}

// explainingReader reads a pack, with the cap's error when the connection
// went over it.
type explainingReader struct {
	rc   io.ReadCloser
	dial *sshDial
}

func (r *explainingReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	return n, r.dial.explain(err)
}

func (r *explainingReader) Close() error { return r.rc.Close() }

// cappedReceivePack is an ssh push whose connection is capped: at
// MaxRefAdvertisementBytes until the server's refs are read, then as much
// again for its report and messages.
type cappedReceivePack struct {
	transport.ReceivePackSession
	dial   *sshDial
	raised bool
}

func (s *cappedReceivePack) AdvertisedReferences() (*packp.AdvRefs, error) {
	return s.AdvertisedReferencesContext(context.Background())
}

func (s *cappedReceivePack) AdvertisedReferencesContext(ctx context.Context) (*packp.AdvRefs, error) {
	ar, err := s.ReceivePackSession.AdvertisedReferencesContext(ctx)
	if err != nil {
		return nil, s.dial.explain(err)
	}
	if !s.raised {
		s.raised = true
		s.dial.raise(MaxRefAdvertisementBytes)
	}
	return ar, nil
}

func (s *cappedReceivePack) ReceivePack(ctx context.Context, req *packp.ReferenceUpdateRequest) (*packp.ReportStatus, error) {
	if _, err := s.AdvertisedReferencesContext(ctx); err != nil {
		return nil, err
	}
	rs, err := s.ReceivePackSession.ReceivePack(ctx, req)
	return rs, s.dial.explain(err)
}
