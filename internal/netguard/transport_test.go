package netguard

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingListener counts the connections a loopback listener accepts, to
// prove a refused address was never connected to.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

func newServer(t *testing.T, addr string, h http.Handler, tls bool) (*httptest.Server, *countingListener) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	cl := &countingListener{Listener: ln}
	s := httptest.NewUnstartedServer(h)
	s.Listener = cl
	if tls {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s, cl
}

func pool(s *httptest.Server) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(s.Certificate())
	return p
}

func TestAllowListedLoopbackWorks(t *testing.T) {
	s, _ := newServer(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}), true)
	g, err := New(Config{Allow: []string{"127.0.0.1/32"}, RootCAs: pool(s)})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := g.Client().Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "ok" {
		t.Fatalf("got %q", b)
	}
}

// TestNameResolvingToLoopbackIsRefusedAtDial uses "localhost": the URL check
// cannot see the address, so the refusal must come from the dial hook, after
// resolution, and the server must see no connection.
func TestNameResolvingToLoopbackIsRefusedAtDial(t *testing.T) {
	s, ln := newServer(t, "127.0.0.1:0", http.NotFoundHandler(), true)
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
	g, err := New(Config{RootCAs: pool(s)})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.CheckURL(&url.URL{Scheme: "https", Host: "localhost:" + port}); err != nil {
		t.Fatalf("the URL check must pass a name (the dial decides): %v", err)
	}
	_, err = g.Client().Get("https://localhost:" + port + "/index.yaml")
	var r *RefusedError
	if !errors.As(err, &r) {
		t.Fatalf("want a refusal, got %v", err)
	}
	if r.Host != "localhost" || r.Reason != ReasonLoopback {
		t.Fatalf("want loopback refusal for localhost, got %+v", r)
	}
	if n := ln.accepted.Load(); n != 0 {
		t.Fatalf("the refused server accepted %d connections", n)
	}
}

func TestNameAllowEntryLetsNameThrough(t *testing.T) {
	s, _ := newServer(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), false)
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
	g, err := New(Config{Allow: []string{"localhost:" + port}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := g.Client().Get("http://localhost:" + port)
	if err != nil {
		// localhost may resolve to ::1 first; the dialer falls back to 127.0.0.1.
		t.Fatal(err)
	}
	resp.Body.Close()
}

// TestRedirectToRefusedAddress redirects from the allow-listed 127.0.0.1 to
// 127.0.0.2, which is not allow-listed: the hop is refused before any
// connection to 127.0.0.2.
func TestRedirectToRefusedAddress(t *testing.T) {
	target, targetLn := newServer(t, "127.0.0.2:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "secret")
	}), true)
	src, _ := newServer(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/index.yaml", http.StatusFound)
	}), true)
	roots := pool(src)
	roots.AddCert(target.Certificate())
	g, err := New(Config{Allow: []string{"127.0.0.1/32"}, RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Client().Get(src.URL)
	if !IsRefused(err) {
		t.Fatalf("want a refusal, got %v", err)
	}
	if !strings.Contains(err.Error(), "redirect to https://127.0.0.2:") {
		t.Fatalf("the error must name the redirect: %v", err)
	}
	if n := targetLn.accepted.Load(); n != 0 {
		t.Fatalf("127.0.0.2 accepted %d connections", n)
	}

	// The transport refuses the hop on its own too, for clients that replace CheckRedirect.
	c := g.Client()
	c.CheckRedirect = nil
	_, err = c.Get(src.URL)
	if !IsRefused(err) {
		t.Fatalf("want a refusal from the transport, got %v", err)
	}
	if n := targetLn.accepted.Load(); n != 0 {
		t.Fatalf("127.0.0.2 accepted %d connections", n)
	}
}

// TestRedirectToAnotherPortDropsCredentials follows a redirect from a
// loopback server to one on another port, which net/http counts as the
// same host: the second server sees none of the credential headers the
// first request carried, and a redirect within the first server keeps them.
func TestRedirectToAnotherPortDropsCredentials(t *testing.T) {
	var seen atomic.Value
	seen.Store("")
	record := func(r *http.Request) string {
		return fmt.Sprintf("auth=%q cookie=%q", r.Header.Get("Authorization"), r.Header.Get("Cookie"))
	}
	other, _ := newServer(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(record(r))
		_, _ = io.WriteString(w, "ok")
	}), true)
	src, _ := newServer(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/x", http.StatusFound)
		case "/here":
			http.Redirect(w, r, "/end", http.StatusFound)
		default:
			seen.Store(record(r))
			_, _ = io.WriteString(w, "ok")
		}
	}), true)
	g, err := New(Config{Allow: []string{"127.0.0.1/32"}, RootCAs: pool(src)})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string, set func(*http.Request)) string {
		t.Helper()
		seen.Store("")
		req, _ := http.NewRequest(http.MethodGet, src.URL+path, nil)
		set(req)
		req.Header.Set("Cookie", "session=s3cret")
		resp, err := g.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return seen.Load().(string)
	}
	basic := func(r *http.Request) { r.SetBasicAuth("alice", "s3cret") }
	bearer := func(r *http.Request) { r.Header.Set("Authorization", "Bearer t0ken") }
	for name, set := range map[string]func(*http.Request){"basic": basic, "bearer": bearer} {
		if got := get("/away", set); got != `auth="" cookie=""` {
			t.Errorf("%s: the server on another port saw %s", name, got)
		}
		if got := get("/here", set); !strings.Contains(got, "s3cret") || strings.Contains(got, `auth=""`) {
			t.Errorf("%s: a redirect within the server lost the credentials: %s", name, got)
		}
	}
}

func TestSameOrigin(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"https://charts.example.com/a", "https://charts.example.com/b", true},
		{"https://charts.example.com/a", "https://charts.example.com:443/b", true},
		{"https://Charts.Example.com./a", "https://charts.example.com/b", true},
		{"http://charts.example.com/a", "http://charts.example.com:80/b", true},
		{"https://charts.example.com/a", "https://charts.example.com:8443/b", false},
		{"https://charts.example.com/a", "https://cdn.charts.example.com/b", false},
		{"https://charts.example.com/a", "https://example.com/b", false},
		{"https://charts.example.com/a", "http://charts.example.com:443/b", false},
		{"https://127.0.0.1:8443/a", "https://127.0.0.1:8444/b", false},
		{"https://[::1]:8443/a", "https://[::1]:8443/b", true},
	} {
		a, _ := url.Parse(tc.a)
		b, _ := url.Parse(tc.b)
		if got := SameOrigin(a, b); got != tc.want {
			t.Errorf("SameOrigin(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestRedirectDowngradeRefused(t *testing.T) {
	plain, plainLn := newServer(t, "127.0.0.1:0", http.NotFoundHandler(), false)
	src, _ := newServer(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL, http.StatusFound)
	}), true)
	g, _ := New(Config{Allow: []string{"127.0.0.1"}, RootCAs: pool(src)})
	_, err := g.Client().Get(src.URL)
	if err == nil || !strings.Contains(err.Error(), "redirect from https to http://127.0.0.1") {
		t.Fatalf("want a downgrade refusal, got %v", err)
	}
	if plainLn.accepted.Load() != 0 {
		t.Fatal("the plain server was connected to")
	}
}

func TestDenyWinsOverAllow(t *testing.T) {
	s, ln := newServer(t, "127.0.0.1:0", http.NotFoundHandler(), true)
	g, _ := New(Config{Allow: []string{"127.0.0.0/8"}, Deny: []string{s.Listener.Addr().String()}, RootCAs: pool(s)})
	_, err := g.Client().Get(s.URL)
	var r *RefusedError
	if !errors.As(err, &r) || r.Reason != ReasonDenied {
		t.Fatalf("want the API server refusal, got %v", err)
	}
	if ln.accepted.Load() != 0 {
		t.Fatal("the denied server was connected to")
	}
}

func TestResponseCap(t *testing.T) {
	body := strings.Repeat("x", 4096)
	s, _ := newServer(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/chunked" {
			w.(http.Flusher).Flush() // no Content-Length
		}
		_, _ = io.WriteString(w, body)
	}), true)
	for _, path := range []string{"/sized", "/chunked"} {
		t.Run(path, func(t *testing.T) {
			g, _ := New(Config{Allow: []string{"127.0.0.1"}, RootCAs: pool(s), MaxResponseBytes: 1000})
			resp, err := g.Client().Get(s.URL + path)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			var tl *TooLargeError
			if !errors.As(err, &tl) {
				t.Fatalf("want TooLargeError, got %v", err)
			}
		})
	}
	g, _ := New(Config{Allow: []string{"127.0.0.1"}, RootCAs: pool(s), MaxResponseBytes: 4096})
	resp, err := g.Client().Get(s.URL + "/chunked")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || len(b) != 4096 {
		t.Fatalf("an exact fit must pass: %d bytes, %v", len(b), err)
	}
}

func TestResponseHeaderTimeout(t *testing.T) {
	release := make(chan struct{})
	s, _ := newServer(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-time.After(5 * time.Second):
		}
	}), true)
	defer close(release)
	g, _ := New(Config{Allow: []string{"127.0.0.1"}, RootCAs: pool(s), ResponseHeaderTimeout: 200 * time.Millisecond})
	start := time.Now()
	_, err := g.Client().Get(s.URL)
	if err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("want a timeout, got %v", err)
	}
	if time.Since(start) > 3*time.Second {
		t.Fatalf("the timeout took %v", time.Since(start))
	}
}

func TestDialRefusesNonTCPAndLiterals(t *testing.T) {
	g, _ := New(Config{})
	if _, err := g.DialContext(context.Background(), "udp", "127.0.0.1:53"); err == nil {
		t.Fatal("udp must be refused")
	}
	// An IP literal is refused before dialling: 169.254.169.254 is never contacted.
	_, err := g.DialContext(context.Background(), "tcp", "[fd00:ec2::254]:80")
	var r *RefusedError
	if !errors.As(err, &r) || r.Reason != ReasonMetadata {
		t.Fatalf("want metadata refusal, got %v", err)
	}
	if err := g.CheckURL(&url.URL{Scheme: "ftp", Host: "example.com"}); err == nil {
		t.Fatal("ftp must be refused")
	}
	err = g.CheckURL(&url.URL{Scheme: "https", Host: "169.254.169.254", User: url.UserPassword("u", "hunter2")})
	if err == nil || strings.Contains(fmt.Sprint(err), "hunter2") {
		t.Fatalf("want a refusal without the password, got %v", err)
	}
}

// TestRedact: a URL's user information goes, in every form people write,
// and from the errors that quote it.
func TestRedact(t *testing.T) {
	for raw, want := range map[string]string{
		"https://user:pa55@git.example.com/org/repo.git": "https://git.example.com/org/repo.git",
		"https://tok3n@github.com/org/repo":              "https://github.com/org/repo",
		"https://someone:pa55%word@host/x":               "https://host/x", // Go cannot parse it
		"oci://user:pa55@registry.example.com/charts/a":  "oci://registry.example.com/charts/a",
		"git@github.com:org/repo.git":                    "git@github.com:org/repo.git", // a user, no password
		"https://charts.example.com/a-1.0.0.tgz":         "https://charts.example.com/a-1.0.0.tgz",
		"https://host/x?next=a@b":                        "https://host/x?next=a@b",
		// No "//": Go reads no authority, and the user information sits
		// in the opaque part, or is the scheme.
		"admin:s3cret@repo.example.com/charts":       "repo.example.com/charts",
		"https:admin:s3cret@repo.example.com/charts": "repo.example.com/charts",
		"https:/admin:s3cret@repo.example.com/x?a=b": "repo.example.com/x?a=b",
		"https:///admin:s3cret@repo.example.com":     "repo.example.com",
		"oci:admin:s3c@ret@registry.example.com/c":   "registry.example.com/c",
		"admin:s3%cret@repo.example.com/charts":      "repo.example.com/charts", // Go cannot parse it
		"localhost:8080/charts":                      "localhost:8080/charts",
		"file:///tmp/chart":                          "file:///tmp/chart",
		"mailbox:charts?to=a@b":                      "mailbox:charts?to=a@b",
	} {
		if got := Redact(raw); got != want {
			t.Errorf("Redact(%q) = %q; want %q", raw, got, want)
		}
	}
	raw := "https://someone:pa55%word@host/x"
	_, parseErr := url.Parse(raw) //nolint:staticcheck // a URL Go cannot parse, on purpose
	for _, err := range []error{
		parseErr,
		fmt.Errorf("cannot list the branches: %w", errors.New(`Get "https://someone:xxxxx@host/x/info/refs": EOF`)),
		errors.New("authentication required for https://someone@host/x"),
	} {
		got := RedactError(err, raw)
		if strings.Contains(got.Error(), "pa55") || strings.Contains(got.Error(), "someone") || !errors.Is(got, err) {
			t.Errorf("RedactError(%q) = %q", err, got)
		}
	}
	for _, raw := range []string{"admin:s3cret@repo.example.com/charts", "https:admin:s3cret@repo.example.com/charts"} {
		err := fmt.Errorf("cannot fetch %s: EOF", raw)
		if got := RedactError(err, raw); strings.Contains(got.Error(), "s3cret") || !errors.Is(got, err) {
			t.Errorf("RedactError(%q) = %q", err, got)
		}
	}
	if err := errors.New("x"); RedactError(err, "https://host/x") != err || RedactError(nil, raw) != nil {
		t.Error("an error with nothing to take out is kept as it is")
	}
}

// TestRefusedRedirectNamesItsOriginOnly judges redirects to refused
// targets whose path and query hold a signed address's token, as a CDN
// hands one out: the refusal names the scheme, host and port only. The
// decision alone is asked, so nothing is dialled.
func TestRefusedRedirectNamesItsOriginOnly(t *testing.T) {
	g, err := New(Config{Allow: []string{"127.0.0.1/32"}, DenyPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	from := &http.Request{URL: &url.URL{Scheme: "https", Host: "127.0.0.1:8443", Path: "/demo-1.0.0.tgz"}}
	for _, tc := range []struct{ target, want string }{
		{"https://10.1.2.3/t/eyJhbGciOiJIUzI1NiJ9.pathtoken/chart.tgz?X-Signature=querytoken", "redirect to https://10.1.2.3: fetch guard refused"},
		{"https://169.254.169.254:8080/pathtoken/latest?querytoken", "redirect to https://169.254.169.254:8080: "},
		{"http://cdn.example/pathtoken/chart.tgz?querytoken", "redirect from https to http://cdn.example"},
		{"file:///pathtoken/chart.tgz", "redirect from https to file:"},
		{"https://user:pathtoken@127.0.0.2/pathtoken", "redirect to https://127.0.0.2: fetch guard refused"},
	} {
		u, err := url.Parse(tc.target)
		if err != nil {
			t.Fatal(err)
		}
		err = g.CheckRedirect(&http.Request{URL: u}, []*http.Request{from})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "pathtoken") || strings.Contains(err.Error(), "querytoken") {
			t.Errorf("a redirect to %s: %v; want %q, and neither its path nor its query", tc.target, err, tc.want)
		}
	}
	for in, want := range map[string]string{
		"https://cdn.example:8443/t/x/chart.tgz?sig=y": "https://cdn.example:8443",
		"https://user:pw@[::1]/x":                      "https://[::1]",
	} {
		u, _ := url.Parse(in)
		if got := Origin(u); got != want {
			t.Errorf("Origin(%s) = %q, want %q", in, got, want)
		}
	}
}

// TestHideAddresses: an error's addresses, in the url.Errors of its chain
// and in plain text (go-git's and oras's messages), are cut to the origin
// for another origin than the source's own, and to the path without the
// query for its own; the result still answers errors.As.
func TestHideAddresses(t *testing.T) {
	own, _ := url.Parse("https://git.example/org/repo.git")
	for _, tc := range []struct {
		in   error
		want string
	}{
		{&url.Error{Op: "Get", URL: "https://cdn.example:8443/t/pathtoken/repo.git/info/refs?sig=querytoken", Err: errors.New("refused")},
			`Get "https://cdn.example:8443": refused`},
		{fmt.Errorf("listing: %w", &url.Error{Op: "Get", URL: "https://git.example/org/repo.git/info/refs?service=git-upload-pack&sig=querytoken", Err: errors.New("EOF")}),
			`listing: Get "https://git.example/org/repo.git/info/refs": EOF`},
		{errors.New(`unexpected client error: unexpected requesting "https://user:pw@cdn.example/t/pathtoken/x?sig=querytoken" status code: 500`),
			"unexpected client error: unexpected status 500 from https://cdn.example"},
		{errors.New(`http redirect: changes scheme from "https" to "http": http://cdn.example/pathtoken?querytoken, then (HTTPS://cdn.example/pathtoken).`),
			`http redirect: changes scheme from "https" to "http": http://cdn.example, then (https://cdn.example).`},
		{errors.New(`GET "https://blob.example/pathtoken?sig=querytoken": mismatch Content-Length`),
			`GET "https://blob.example": mismatch Content-Length`},
		{errors.New(`bad address https://cdn.example:bad%zz/pathtoken?querytoken`), "bad address https://cdn.example:bad%zz"},
	} {
		got := HideAddresses(tc.in, own)
		if got.Error() != tc.want {
			t.Errorf("HideAddresses(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if ue := new(*url.Error); errors.As(tc.in, ue) && !errors.As(got, ue) {
			t.Errorf("HideAddresses(%q) lost the url.Error", tc.in)
		}
	}
	if err := errors.New("nothing to hide"); HideAddresses(err, own) != err {
		t.Error("an error without an address must come back as it is")
	}
	if HideAddresses(nil, own) != nil {
		t.Error("nil must stay nil")
	}
}
