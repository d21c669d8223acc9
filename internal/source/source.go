// Package source fetches what an Addon installs: Helm charts from chart
// repositories, OCI registries and https archives, and git trees, through one
// guarded HTTP transport, with bounded in-memory caches.
package source

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"

	"capstan.dev/capstan/internal/netguard"
)

// Default cache settings.
const (
	DefaultIndexTTL        = 5 * time.Minute
	DefaultIndexStaleFor   = 24 * time.Hour
	DefaultChartCacheSize  = 128
	DefaultChartCacheBytes = 512 << 20
	DefaultGitCacheSize    = 32
	DefaultGitCacheBytes   = 512 << 20
	DefaultIndexCacheSize  = 64
	DefaultIndexCacheBytes = 64 << 20 // what the parsed indexes keep (retainedSize), not their text
)

// Options configure a Fetcher. Zero values take the defaults.
type Options struct {
	// Guard is the fetch guard: allow-list, deny-list, timeouts, response cap.
	Guard netguard.Config
	// CABundle is PEM certificates trusted in addition to the system's, for
	// private mirrors and for tests.
	CABundle []byte
	// Limits bound archives, trees and indexes.
	Limits Limits
	// IndexTTL is how long a chart repository's index.yaml is reused.
	IndexTTL time.Duration
	// IndexStaleFor is how long after it was read a cached index.yaml is
	// still used while the repository cannot be read (Chart.StaleIndex).
	IndexStaleFor time.Duration
	// ChartCacheSize and ChartCacheBytes bound the chart cache.
	ChartCacheSize  int
	ChartCacheBytes int64
	// GitCacheSize and GitCacheBytes bound the git tree cache.
	GitCacheSize  int
	GitCacheBytes int64
	// GitBudget bounds the git data in memory of every fetch of the
	// process together; nil means ProcessGitBudget.
	GitBudget *GitBudget
	// AllowFileGit allows file:// git URLs, which read the controller's own
	// filesystem: for tests and `capstan render` only.
	AllowFileGit bool
	// Now is the clock, for tests; nil means time.Now.
	Now func() time.Time
}

// Fetcher fetches charts and git trees through one guarded HTTP transport,
// with caches. It is safe for concurrent use.
type Fetcher struct {
	opts   Options
	limits Limits
	guard  *netguard.Guard
	client *http.Client
	// docClient is client, but follows no redirect: a document such as an
	// add-on's manifest from a Service a tenant runs is read at the
	// address named, not where its server sends the controller.
	docClient *http.Client
	// ociClient caps every registry response at the archive limit, on top
	// of the manifest and layer limits of an OCI pull.
	ociClient *http.Client
	now       func() time.Time

	charts  *lru[*cachedChart]
	indexes *lru[*cachedIndex]
	trees   *lru[*Tree]
	flights flights

	gitHTTP gitTransports
	// githubApps keeps one installation transport per App credentials, so
	// its token is reused until it nears expiry; at most maxGitHubApps,
	// the least recently used let go, so the parsed private keys of
	// credentials no longer used are not held for good.
	githubApps *lru[*ghinstallation.Transport]
	stats      Stats
}

// maxGitHubApps bounds the GitHub App transports a Fetcher keeps: one per
// App credentials in use, each counted as size 1.
const maxGitHubApps = 64

// Stats counts what a Fetcher did, for tests and metrics.
type Stats struct {
	IndexFetches   atomic.Int64
	ArchiveFetches atomic.Int64
	ChartCacheHits atomic.Int64
	GitFetches     atomic.Int64
	GitCacheHits   atomic.Int64
}

// NewFetcher builds a Fetcher.
func NewFetcher(opts Options) (*Fetcher, error) {
	if len(opts.CABundle) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(opts.CABundle) {
			return nil, errors.New("the CA bundle holds no PEM certificate; check the file given for it")
		}
		opts.Guard.RootCAs = pool
	}
	g, err := netguard.New(opts.Guard)
	if err != nil {
		return nil, err
	}
	if opts.IndexTTL <= 0 {
		opts.IndexTTL = DefaultIndexTTL
	}
	if opts.IndexStaleFor <= 0 {
		opts.IndexStaleFor = DefaultIndexStaleFor
	}
	if opts.ChartCacheSize <= 0 {
		opts.ChartCacheSize = DefaultChartCacheSize
	}
	if opts.ChartCacheBytes <= 0 {
		opts.ChartCacheBytes = DefaultChartCacheBytes
	}
	if opts.GitCacheSize <= 0 {
		opts.GitCacheSize = DefaultGitCacheSize
	}
	if opts.GitCacheBytes <= 0 {
		opts.GitCacheBytes = DefaultGitCacheBytes
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	lim := opts.Limits.withDefaults()
	ociCfg := opts.Guard
	ociCfg.MaxResponseBytes = lim.MaxArchiveBytes + 1<<20
	og, err := netguard.New(ociCfg)
	if err != nil {
		return nil, err
	}
	client, ociClient := g.Client(), og.Client()
	client.Transport = retryAfterTransport{next: client.Transport, now: now}
	ociClient.Transport = retryAfterTransport{next: ociClient.Transport, now: now}
	docClient := *client
	docClient.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	f := &Fetcher{
		docClient:  &docClient,
		githubApps: newLRU[*ghinstallation.Transport](maxGitHubApps, maxGitHubApps),
		opts:       opts,
		limits:     lim,
		guard:      g,
		client:     client,
		ociClient:  ociClient,
		now:        now,
		charts:     newLRU[*cachedChart](opts.ChartCacheSize, opts.ChartCacheBytes),
		indexes:    newLRU[*cachedIndex](DefaultIndexCacheSize, DefaultIndexCacheBytes),
		trees:      newLRU[*Tree](opts.GitCacheSize, opts.GitCacheBytes),
	}
	f.gitHTTP = newGitTransports(f.client, g)
	return f, nil
}

// Stats returns the Fetcher's counters.
func (f *Fetcher) Stats() *Stats { return &f.stats }

// Guard is the fetch guard every request of the Fetcher goes through, for
// other requests Capstan makes on an add-on's behalf (notifications).
func (f *Fetcher) Guard() *netguard.Guard { return f.guard }

// Chart is a loaded Helm chart and where it came from.
type Chart struct {
	// Chart is the chart, with its dependencies from charts/. Every call
	// returns a fresh copy, so a caller may change it.
	Chart *chartv2.Chart
	// Name and Version are the chart's, from Chart.yaml.
	Name, Version string
	// Digest is "sha256:<hex>" of the archive bytes.
	Digest string
	// URL is where it came from, as it may be shown: the archive's address
	// without its query (only its origin for an archive that a chart
	// repository's index names on another host), or the OCI reference.
	URL string
	// Manifest is the OCI manifest's digest, for a chart from a registry:
	// what a cosign signature signs.
	Manifest string
	// StaleIndex, for a chart from a chart repository, says that the
	// repository's index.yaml could not be read again and an older copy
	// chose the version, and why; empty when the index is fresh.
	StaleIndex string

	// credHost is the one host the chart's credentials were sent to: the
	// repository's for a chart from an index, the archive's own for
	// spec.chart.url. Its provenance file is fetched with them only from
	// there; empty sends them nowhere.
	credHost string
	// fetchURL is the address the archive was fetched from, query and all,
	// for its provenance file; empty for a chart from an OCI registry or a
	// file.
	fetchURL string
}

// FileName is the archive's file name, as its provenance file signs it:
// the last segment of the path it was fetched from. URL, which is for
// display, may hold only the origin of an archive on another host than
// its repository, so the name is taken from the address fetched.
func (c *Chart) FileName() string {
	addr := c.fetchURL
	if addr == "" {
		addr = c.URL
	}
	if u, err := url.Parse(addr); err == nil {
		return path.Base(u.Path)
	}
	return path.Base(addr)
}

// Tree is one commit of a git repository.
type Tree struct {
	// Commit is the full commit hash.
	Commit string
	// FS is the whole tree at Commit, read-only and in memory. Symlinks are
	// followed inside the tree; one that leaves it is refused when read.
	FS fs.FS
	// URL is the repository.
	URL string

	size int64
}

// cachedChart is a verified archive, loaded once. Every caller gets a copy
// of the loaded chart, because Helm's rendering changes charts; copying
// costs a small part of parsing the chart's files again.
type cachedChart struct {
	loaded  *chartv2.Chart
	name    string
	version string
	digest  string
	url     string
	size    int64
	// manifest is the OCI manifest digest, which a pin may name instead.
	manifest string
	// credHost is the host the credentials are sent to (Chart.credHost).
	credHost string
	// fetchURL is the address the archive was fetched from (Chart.fetchURL).
	fetchURL string
}

// matches reports whether the chart satisfies a digest pin.
func (c *cachedChart) matches(pinned string) bool {
	return pinned == "" || pinned == c.digest || pinned == c.manifest
}

func (c *cachedChart) chart() *Chart {
	return &Chart{Chart: CloneChart(c.loaded), Name: c.name, Version: c.version, Digest: c.digest, URL: c.url, Manifest: c.manifest, credHost: c.credHost, fetchURL: c.fetchURL}
}

// FetchError is a failed fetch from a source. It never holds credentials.
type FetchError struct {
	URL    string
	Status int
	Err    error
	Hint   string
}

func (e *FetchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cannot fetch %s", e.URL)
	if e.Status != 0 {
		fmt.Fprintf(&b, ": HTTP %d %s", e.Status, http.StatusText(e.Status))
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.Hint != "" {
		b.WriteString("; ")
		b.WriteString(e.Hint)
	}
	return b.String()
}

func (e *FetchError) Unwrap() error { return e.Err }

// SpecError is a field of an Addon's spec that is wrong in itself,
// whatever the source holds: a version that is no version or range, a
// source named twice or not at all, a URL of a scheme Capstan does not
// fetch, or a credentials Secret that does not fit the URL. Reading the
// source again cannot help; only a change to the spec, or to the Secret
// it names, does.
type SpecError struct {
	// Problem says what is wrong and what to set.
	Problem string
}

func (e *SpecError) Error() string { return e.Problem }

// specError is a SpecError of a formatted problem.
func specError(format string, args ...any) error {
	return &SpecError{Problem: fmt.Sprintf(format, args...)}
}

// DigestMismatchError is an archive whose sha256 is not the pinned digest.
type DigestMismatchError struct {
	Source   string
	Expected string
	Actual   string
}

func (e *DigestMismatchError) Error() string {
	return fmt.Sprintf("chart archive from %s has digest %s, but spec.chart.digest pins %s; nothing was applied: update the digest if the new chart is trusted",
		e.Source, e.Actual, e.Expected)
}

// httpAuth says how a request is authenticated.
type httpAuth struct {
	creds *Credentials
	// host limits the credentials to one host, so an index that points to
	// another host does not receive them.
	host string
	// chart says the request fetches a chart, whose credentials come from
	// spec.chart.secretRef; a document is always read without any.
	chart bool
}

// chartAuth is how a chart's files on host are fetched.
func chartAuth(creds *Credentials, host string) httpAuth {
	return httpAuth{creds: creds, host: host, chart: true}
}

// sends says whether a request to u carries the credentials.
func (a httpAuth) sends(u *url.URL) bool {
	return a.creds != nil && strings.EqualFold(u.Host, a.host)
}

func (a httpAuth) apply(req *http.Request) error {
	if !a.sends(req.URL) {
		return nil
	}
	if req.URL.Scheme != "https" {
		return fmt.Errorf("credentials are only sent over https, and %s is not https", netguard.ShownAddress(req.URL, req.URL))
	}
	switch {
	case a.creds.hasBasic():
		req.SetBasicAuth(a.creds.Username, a.creds.Password)
	case a.creds.Token != "":
		req.Header.Set("Authorization", "Bearer "+a.creds.Token)
	default:
		return errors.New("a chart source takes username and password, or a token; the Secret holds another kind of credentials")
	}
	return nil
}

// get downloads a URL into memory, refusing more than limit bytes.
func (f *Fetcher) get(ctx context.Context, rawURL string, auth httpAuth, limit int64, what string) ([]byte, error) {
	return f.getWith(ctx, f.client, rawURL, auth, limit, what)
}

// getWith is get through client.
func (f *Fetcher) getWith(ctx context.Context, client *http.Client, rawURL string, auth httpAuth, limit int64, what string) ([]byte, error) {
	shown := shownFetchAddress(rawURL, auth)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, &FetchError{URL: shown, Err: errors.New("invalid URL"), Hint: "check " + what}
	}
	if err := auth.apply(req); err != nil {
		return nil, &FetchError{URL: shown, Err: err}
	}
	req.Header.Set("User-Agent", "capstan")
	resp, err := client.Do(req)
	if err != nil {
		hint := "check " + what + " and that the server is up"
		if netguard.IsRefused(err) {
			hint = "the fetch guard protects the cluster from requests to internal addresses"
		}
		return nil, &FetchError{URL: shown, Err: unwrapURLError(err), Hint: hint}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		hint := "check " + what
		switch code := resp.StatusCode; {
		case code >= 300 && code < 400:
			// NOTE: only docClient stops at a redirect; the other clients
			// follow it, each hop checked by the guard's CheckRedirect.
			hint = "the server answered with a redirect" + redirectedTo(resp) + ", which is not followed: " + what + " is served at its own address, not redirected"
		case code == http.StatusUnauthorized || code == http.StatusForbidden:
			hint = refusedHint(auth, req.URL, answered(resp, req), what)
		case code == http.StatusNotFound:
			hint = "check " + what + "; the server has no such file"
		}
		return nil, &FetchError{URL: shown, Status: resp.StatusCode, Hint: hint}
	}
	if resp.ContentLength > limit {
		return nil, &FetchError{URL: shown, Err: &TooLargeError{msg: fmt.Sprintf("%s is %d bytes; at most %s", what, resp.ContentLength, byteSize(limit))}}
	}
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, &FetchError{URL: shown, Err: fmt.Errorf("reading the response: %w", err), Hint: "the download broke off; it is retried"}
	}
	if n > limit {
		return nil, &FetchError{URL: shown, Err: &TooLargeError{msg: fmt.Sprintf("%s is more than %s, its limit", what, byteSize(limit))}}
	}
	return buf.Bytes(), nil
}

// shownFetchAddress is what an error may show of rawURL, fetched with auth:
// its path without the query on the host the chart's credentials go to
// (the repository's, or an https archive's own), its origin alone on
// another (an archive index.yaml names on a CDN, whose path may hold a
// token too); a document, fetched without credentials, by its path without
// the query. NOTE: a query is where a signed address keeps its token.
func shownFetchAddress(rawURL string, auth httpAuth) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		shown, _, _ := strings.Cut(netguard.Redact(rawURL), "?")
		return shown
	}
	own := u
	if auth.chart && auth.host != "" {
		own = &url.URL{Scheme: u.Scheme, Host: auth.host}
	}
	return netguard.ShownAddress(u, own).String()
}

// answered is the request whose hop gave resp: the last of any redirects
// the client followed.
func answered(resp *http.Response, first *http.Request) *http.Request {
	if resp.Request != nil {
		return resp.Request
	}
	return first
}

// refusedHint says what to do about a 401 or 403 to the request for what
// (a field or document to name in the hint), sent to first and answered by
// hop, the last request of any redirects. It judges the hop that
// answered: whether the credentials went to it (a redirect to another
// origin drops them, see netguard.CheckRedirect), and whether a redirect
// took the request there, where naming credentials cannot help.
func refusedHint(auth httpAuth, first *url.URL, hop *http.Request, what string) string {
	if hop.Header.Get("Authorization") != "" {
		return "the server refused the credentials; check the Secret named in secretRef"
	}
	if !netguard.SameOrigin(first, hop.URL) {
		if auth.chart {
			return redirectedRefusalHint(hop.URL.Host, first.Host, what)
		}
		return redirectedWithoutCredentials(hop.URL.Host) + what + " must be readable without them"
	}
	hint := "the server refuses to serve " + what + " without credentials"
	switch {
	case !auth.chart:
		// A document is always read without any.
		hint += "; it must be readable without them"
	case auth.creds == nil:
		hint += "; name a Secret that holds them in spec.chart.secretRef"
	default:
		hint += "; those of spec.chart.secretRef are sent only to " + auth.host + ", the host that serves the chart's repository"
	}
	return hint
}

// redirectedWithoutCredentials begins the hint for a 401 or 403 from host,
// where a redirect to another origin led a request without credentials.
// host is a host and port, never a path, which may hold a signed
// address's token.
func redirectedWithoutCredentials(host string) string {
	return "the redirect to " + host + " was sent without credentials, which never go past a redirect to another origin: "
}

// redirectedRefusalHint is the hint for a chart (what) refused with 401 or
// 403 by host, where from (the chart's repository or registry) redirected
// it: host must serve it without credentials, for an https chart's archive
// as for an OCI chart's blob.
func redirectedRefusalHint(host, from, what string) string {
	return redirectedWithoutCredentials(host) + host + " must serve " + what + " without them (a signed address may have expired); check what " + from + " redirects to"
}

// unwrapURLError drops net/http's "Get <url>:" prefix, which repeats the URL
// (with credentials, were there any in it).
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// checkDigest compares an archive with a pinned digest.
func checkDigest(source string, data []byte, pinned string, alsoAccepted ...string) (string, error) {
	actual := Digest(data)
	if pinned == "" || pinned == actual {
		return actual, nil
	}
	for _, a := range alsoAccepted {
		if a != "" && a == pinned {
			return actual, nil
		}
	}
	return "", &DigestMismatchError{Source: source, Expected: pinned, Actual: actual}
}

// Redirects says whether Document follows a redirect.
type Redirects bool

const (
	// NoRedirect stops at a redirect: a 3xx answer is a FetchError of that
	// status, which names where it pointed, so the document comes from the
	// address named and the request goes nowhere else. For an address
	// whose server someone other than the one who named it may run.
	NoRedirect Redirects = false
	// FollowRedirects follows redirects as a chart download does, each hop
	// checked by the fetch guard. For an address that whoever named it
	// answers for.
	FollowRedirects Redirects = true
)

// Document reads a small document, such as an add-on's manifest, through
// the fetch guard, without credentials, refusing more than limit bytes and
// following redirects or not as redirects says. what names the document
// in errors, as their subject and to say what to check.
func (f *Fetcher) Document(ctx context.Context, rawURL string, redirects Redirects, limit int64, what string) ([]byte, error) {
	client := f.docClient
	if redirects == FollowRedirects {
		client = f.client
	}
	return f.getWith(ctx, client, rawURL, httpAuth{}, limit, what)
}

// maxLocationShown is how much of a redirect's Location an error shows.
const maxLocationShown = 256

// redirectedTo is " to LOCATION" for a redirect that names where it
// points, without user information, in printable ASCII and at most
// maxLocationShown bytes, or "".
func redirectedTo(resp *http.Response) string {
	loc, err := resp.Location()
	if err != nil {
		return ""
	}
	shown := printableURL(netguard.Redact(loc.String()))
	if len(shown) > maxLocationShown {
		cut := maxLocationShown
		// Not within a %XX escape.
		if i := strings.LastIndexByte(shown[cut-2:cut], '%'); i >= 0 {
			cut -= 2 - i
		}
		shown = shown[:cut] + "…"
	}
	return " to " + shown
}

// printableURL is u with every byte that is not printable ASCII
// percent-encoded. NOTE: url.URL.String leaves the query as it came, so a
// Location, which the server (maybe a tenant's pod) chooses, could carry a
// bidi override or other invisible character into a condition that an
// admin reads; escaped, it shows as what it is.
func printableURL(u string) string {
	var b strings.Builder
	for i := 0; i < len(u); i++ {
		if c := u[i]; c <= ' ' || c >= 0x7f {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// TooLargeError is a download refused for its size: the same address
// serves the same too large file until someone changes it. It is a
// document's own limit (Document's limit); a body over the fetch guard's
// cap is a *netguard.TooLargeError instead, which callers that classify
// size refusals check as well.
type TooLargeError struct{ msg string }

func (e *TooLargeError) Error() string { return e.msg }
