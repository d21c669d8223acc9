package source

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v4/pkg/registry"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/netguard"
)

// ociRegistry is go-containerregistry's registry behind TLS on loopback,
// counting requests and optionally requiring basic credentials.
type ociRegistry struct {
	*httptest.Server
	requests atomic.Int64
	host     string
}

func newOCIRegistry(t *testing.T, user, pass string) *ociRegistry {
	t.Helper()
	r := &ociRegistry{}
	h := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	r.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		if user != "" {
			u, p, ok := req.BasicAuth()
			if !ok || u != user || p != pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Close)
	r.host = strings.TrimPrefix(r.URL, "https://")
	return r
}

// push pushes a chart archive with Helm's own registry client.
func (r *ociRegistry) push(t *testing.T, data []byte, ref string, user, pass string) *registry.PushResult {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(r.Certificate())
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	opts := []registry.ClientOption{registry.ClientOptHTTPClient(hc), registry.ClientOptCredentialsFile(t.TempDir() + "/config.json")}
	if user != "" {
		opts = append(opts, registry.ClientOptBasicAuth(user, pass))
	}
	c, err := registry.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Push(data, r.host+"/"+ref)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestOCIChart(t *testing.T) {
	r := newOCIRegistry(t, "", "")
	v1 := chartArchive(t, "demo", "1.0.0")
	v11 := chartArchive(t, "demo", "1.1.0+build.7")
	r.push(t, v1, "charts/demo:1.0.0", "", "")
	pushed := r.push(t, v11, "charts/demo:1.1.0+build.7", "", "")
	f := newTestFetcher(t, Options{}, r.Server)
	ctx := context.Background()
	oci := "oci://" + r.host + "/charts/demo"

	tests := []struct {
		name        string
		spec        capstanv1.ChartSource
		wantVersion string
		wantDigest  string
	}{
		{"by tag", capstanv1.ChartSource{OCI: oci, Version: "1.0.0"}, "1.0.0", Digest(v1)},
		{"by tag in the reference", capstanv1.ChartSource{OCI: oci + ":1.0.0"}, "1.0.0", Digest(v1)},
		{"by range", capstanv1.ChartSource{OCI: oci, Version: "^1.0.0"}, "1.1.0+build.7", Digest(v11)},
		{"by tag with + and archive digest pin", capstanv1.ChartSource{OCI: oci, Version: "1.1.0+build.7", Digest: Digest(v11)}, "1.1.0+build.7", Digest(v11)},
		{"by manifest digest", capstanv1.ChartSource{OCI: oci, Digest: pushed.Manifest.Digest}, "1.1.0+build.7", Digest(v11)},
		{"by manifest digest in the reference", capstanv1.ChartSource{OCI: oci + "@" + pushed.Manifest.Digest}, "1.1.0+build.7", Digest(v11)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := f.Chart(ctx, tt.spec, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.Version != tt.wantVersion || c.Digest != tt.wantDigest || c.Name != "demo" {
				t.Fatalf("got %s %s %s", c.Name, c.Version, c.Digest)
			}
			if !strings.HasPrefix(c.URL, "oci://"+r.host+"/charts/demo") {
				t.Fatalf("URL %s", c.URL)
			}
			// Fetched once: a second call makes no request for the chart.
			before := r.requests.Load()
			if _, err := f.Chart(ctx, tt.spec, nil); err != nil {
				t.Fatal(err)
			}
			after := r.requests.Load()
			if tt.spec.Version == "^1.0.0" {
				// A range lists the tags again; the chart is not pulled again.
				if after-before > 2 {
					t.Fatalf("a cached range fetch made %d requests", after-before)
				}
			} else if after != before {
				t.Fatalf("a cached chart made %d requests", after-before)
			}
		})
	}
}

func TestOCIErrors(t *testing.T) {
	r := newOCIRegistry(t, "", "")
	data := chartArchive(t, "demo", "1.0.0")
	r.push(t, data, "charts/demo:1.0.0", "", "")
	f := newTestFetcher(t, Options{}, r.Server)
	oci := "oci://" + r.host + "/charts/demo"
	tests := []struct {
		name string
		spec capstanv1.ChartSource
		want []string
	}{
		{"wrong digest", capstanv1.ChartSource{OCI: oci, Version: "1.0.0", Digest: "sha256:" + strings.Repeat("1", 64)}, []string{"has digest " + Digest(data), "pins sha256:1111"}},
		{"unknown tag", capstanv1.ChartSource{OCI: oci, Version: "9.9.9"}, []string{"pulling the chart", "no such chart, tag or digest"}},
		{"no tag in range", capstanv1.ChartSource{OCI: oci, Version: "^2"}, []string{"no tag matching ^2", "newest tags: 1.0.0"}},
		{"unknown repository", capstanv1.ChartSource{OCI: "oci://" + r.host + "/charts/nope", Version: "1.0.0"}, []string{"cannot fetch oci://"}},
		{"tag conflict", capstanv1.ChartSource{OCI: oci + ":1.0.0", Version: "2.0.0"}, []string{"set the version in one place"}},
		{"no version", capstanv1.ChartSource{OCI: oci}, []string{"needs a version"}},
		{"not a reference", capstanv1.ChartSource{OCI: "oci://"}, []string{"not an OCI reference"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.Chart(context.Background(), tt.spec, nil)
			if err == nil {
				t.Fatal("want an error")
			}
			t.Log(err)
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\n does not say %q", err, w)
				}
			}
			if n, _ := f.charts.stats(); n != 0 {
				t.Fatal("something was cached")
			}
		})
	}
}

func TestOCICredentials(t *testing.T) {
	r := newOCIRegistry(t, "robot", "s3cret")
	data := chartArchive(t, "demo", "1.0.0")
	r.push(t, data, "charts/demo:1.0.0", "robot", "s3cret")
	f := newTestFetcher(t, Options{}, r.Server)
	spec := capstanv1.ChartSource{OCI: "oci://" + r.host + "/charts/demo", Version: "1.0.0"}
	_, err := f.Chart(context.Background(), spec, nil)
	var fe *FetchError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "refused the credentials") {
		t.Fatalf("want a credentials error, got %v", err)
	}
	c, err := f.Chart(context.Background(), spec, &Credentials{Username: "robot", Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Digest != Digest(data) {
		t.Fatal("wrong chart")
	}
	if strings.Contains(err2s(err), "s3cret") {
		t.Fatal("an error shows the password")
	}
}

func err2s(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestOCIGuard(t *testing.T) {
	r := newOCIRegistry(t, "", "")
	r.push(t, chartArchive(t, "demo", "1.0.0"), "charts/demo:1.0.0", "", "")
	port := r.host[strings.LastIndex(r.host, ":")+1:]
	f := newTestFetcher(t, Options{Guard: netguard.Config{Allow: []string{}}}, r.Server)
	before := r.requests.Load()
	_, err := f.Chart(context.Background(), capstanv1.ChartSource{OCI: "oci://localhost:" + port + "/charts/demo", Version: "1.0.0"}, nil)
	if err == nil || !strings.Contains(err.Error(), "fetch guard refused") {
		t.Fatalf("want a refusal, got %v", err)
	}
	if r.requests.Load() != before {
		t.Fatal("the registry was reached")
	}
}

func TestOCIErrorHints(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{`127.0.0.1:40165/charts/demo:9.9.9: not found`, "no such chart"},
		{`127.0.0.1:40365/charts/demo: not found`, "no such chart"},
		{`GET https://registry.example/v2/: 401 Unauthorized`, "refused the credentials"},
		{`unexpected status code 403: forbidden`, "refused the credentials"},
		{`response status code 404: name unknown`, "no such chart"},
		{`dial tcp 10.0.0.1:4011: connection refused`, "registry is up"},
	} {
		err := ociError("oci://x", "pulling the chart", errors.New(tc.msg))
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want a hint that says %q", tc.msg, err, tc.want)
		}
	}
}
