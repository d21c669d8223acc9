package source

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// entry is one tar entry of a test archive.
type entry struct {
	name     string
	body     string
	typeflag byte
	link     string
}

func file(name, body string) entry { return entry{name: name, body: body, typeflag: tar.TypeReg} }

// tgz writes a gzip-compressed tar of entries, in order.
func tgz(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		hd := &tar.Header{Name: e.name, Typeflag: e.typeflag, Mode: 0o644, Size: int64(len(e.body)), Linkname: e.link, ModTime: time.Unix(1700000000, 0)}
		if e.typeflag != tar.TypeReg {
			hd.Size = 0
		}
		if e.typeflag == tar.TypeXGlobalHeader {
			hd = &tar.Header{Name: e.name, Typeflag: e.typeflag, PAXRecords: map[string]string{"comment": e.body}}
		}
		if err := tw.WriteHeader(hd); err != nil {
			t.Fatal(err)
		}
		if hd.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// chartEntries are the files of a small valid chart.
func chartEntries(name, version string) []entry {
	return []entry{
		file(name+"/Chart.yaml", fmt.Sprintf("apiVersion: v2\nname: %s\nversion: %s\ndescription: a test chart\n", name, version)),
		file(name+"/values.yaml", "replicas: 1\n"),
		file(name+"/templates/configmap.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  replicas: {{ .Values.replicas | quote }}\n"),
	}
}

func chartArchive(t testing.TB, name, version string) []byte {
	return tgz(t, chartEntries(name, version)...)
}

// chartRepo is an https chart repository on loopback that counts requests.
type chartRepo struct {
	*httptest.Server
	mu       sync.Mutex
	files    map[string][]byte
	requests map[string]int
	status   map[string]int // a status to answer a path with instead
	auth     [2]string      // required basic credentials, if set
	authSeen atomic.Int64
}

func newChartRepo(t *testing.T) *chartRepo {
	t.Helper()
	r := &chartRepo{files: map[string][]byte{}, requests: map[string]int{}, status: map[string]int{}}
	r.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests[req.URL.Path]++
		data, ok := r.files[req.URL.Path]
		status := r.status[req.URL.Path]
		need := r.auth
		r.mu.Unlock()
		if status != 0 {
			w.WriteHeader(status)
			return
		}
		if _, _, has := req.BasicAuth(); has {
			r.authSeen.Add(1)
		}
		if need[0] != "" {
			u, p, has := req.BasicAuth()
			if !has || u != need[0] || p != need[1] {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		}
		if !ok {
			http.NotFound(w, req)
			return
		}
		_, _ = w.Write(data)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *chartRepo) put(path string, data []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.files[path] = data
}

// answer makes the repository answer path with status, or as before
// with 0.
func (r *chartRepo) answer(path string, status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status[path] = status
}

func (r *chartRepo) count(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[path]
}

// index writes index.yaml listing name at the versions, each pointing to url(v).
func (r *chartRepo) index(name string, urls map[string]string) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "apiVersion: v1\nentries:\n  %s:\n", name)
	for v, u := range urls {
		fmt.Fprintf(&b, "  - apiVersion: v2\n    name: %s\n    version: %s\n    urls:\n    - %s\n", name, v, u)
	}
	r.put("/index.yaml", b.Bytes())
}

func caPEM(servers ...*httptest.Server) []byte {
	var out []byte
	for _, s := range servers {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})...)
	}
	return out
}

// newTestFetcher trusts the servers' certificates and allow-lists 127.0.0.1 only.
func newTestFetcher(t testing.TB, opts Options, servers ...*httptest.Server) *Fetcher {
	t.Helper()
	if opts.Guard.Allow == nil {
		opts.Guard.Allow = []string{"127.0.0.1/32"}
	}
	opts.CABundle = caPEM(servers...)
	f, err := NewFetcher(opts)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// closedPort returns a loopback port that nothing listens on.
func closedPort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// countingListener counts accepted connections.
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

func tlsServerOn(t *testing.T, addr string, h http.Handler) (*httptest.Server, *countingListener) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	cl := &countingListener{Listener: ln}
	s := httptest.NewUnstartedServer(h)
	s.Listener = cl
	s.StartTLS()
	t.Cleanup(s.Close)
	return s, cl
}

func writeFile(p string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o644)
}

func symlink(target, p string) error { return os.Symlink(target, p) }
