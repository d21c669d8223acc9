package source

import (
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"helm.sh/helm/v4/pkg/registry"
	"oras.land/oras-go/v2/registry/remote/errcode"

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
func (r *ociRegistry) push(t *testing.T, data []byte, ref string, user, pass string, opts ...registry.PushOption) *registry.PushResult {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(r.Certificate())
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	clientOpts := []registry.ClientOption{registry.ClientOptHTTPClient(hc), registry.ClientOptCredentialsFile(t.TempDir() + "/config.json")}
	if user != "" {
		clientOpts = append(clientOpts, registry.ClientOptBasicAuth(user, pass))
	}
	c, err := registry.NewClient(clientOpts...)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Push(data, r.host+"/"+ref, opts...)
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

// TestOCIVersionPrefix: a version that is not a whole semver version but
// reads as a range (1.2, 1, v1.2.3) pulls the tag when the registry has
// it, and otherwise the newest version in that range, as a chart
// repository's version resolves.
func TestOCIVersionPrefix(t *testing.T) {
	r := newOCIRegistry(t, "", "")
	for _, v := range []string{"1.2.3", "1.2.5", "1.3", "1.3.9", "2.0.0"} {
		r.push(t, chartArchive(t, "demo", v), "charts/demo:"+v, "", "")
	}
	f := newTestFetcher(t, Options{}, r.Server)
	oci := "oci://" + r.host + "/charts/demo"
	tests := []struct {
		name    string
		spec    capstanv1.ChartSource
		version string // the chart's version; empty: an error
		err     string // the error's words
	}{
		{"major.minor, no such tag", capstanv1.ChartSource{OCI: oci, Version: "1.2"}, "1.2.5", ""},
		{"major, no such tag", capstanv1.ChartSource{OCI: oci, Version: "1"}, "1.3.9", ""},
		{"v prefix, no such tag", capstanv1.ChartSource{OCI: oci, Version: "v1.2.3"}, "1.2.3", ""},
		{"in the reference, no such tag", capstanv1.ChartSource{OCI: oci + ":1.2"}, "1.2.5", ""},
		{"the tag, when there is one", capstanv1.ChartSource{OCI: oci, Version: "1.3"}, "1.3", ""},
		{"no tag and none in range", capstanv1.ChartSource{OCI: oci, Version: "1.4"}, "", "no tag matching 1.4"},
		{"a whole version stays a tag", capstanv1.ChartSource{OCI: oci, Version: "1.2.4"}, "", "no such chart, tag or digest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := f.Chart(context.Background(), tt.spec, nil)
			switch {
			case tt.version != "" && err != nil:
				t.Fatalf("got %v, want chart %s", err, tt.version)
			case tt.version != "" && c.Version != tt.version:
				t.Fatalf("got chart %s, want %s", c.Version, tt.version)
			case tt.version == "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("got %v, want an error that says %q", err, tt.err)
			}
		})
	}
}

// TestOCINonVersionTag pulls a chart by a tag that is no version (latest,
// next), set as spec.chart.version or in the reference: the chart inside
// may have any version. A tag that is a version, or reads as a range, must
// still hold a chart of that version.
func TestOCINonVersionTag(t *testing.T) {
	r := newOCIRegistry(t, "", "")
	data := chartArchive(t, "demo", "1.0.0")
	for _, tag := range []string{"latest", "next", "v1.0.0", "1.0", "2.0.0"} {
		r.push(t, data, "charts/demo:"+tag, "", "", registry.PushOptStrictMode(false))
	}
	// A whole version tag that holds the same version with other build
	// metadata is another chart: a semver range would take it.
	for tag, version := range map[string]string{"1.0.0": "1.0.0+other", "1.0.0_b": "1.0.0+c", "1.0.0-rc.1": "1.0.0-rc.1+x"} {
		r.push(t, chartArchive(t, "demo", version), "charts/demo:"+tag, "", "", registry.PushOptStrictMode(false))
	}
	// A repository with no v-prefixed tag: v1.0.0 is the version 1.0.0
	// there, never 1.0.0 with build metadata.
	r.push(t, data, "charts/plain:1.0.0", "", "", registry.PushOptStrictMode(false))
	r.push(t, chartArchive(t, "demo", "1.0.0+other"), "charts/other:1.0.0_other", "", "", registry.PushOptStrictMode(false))
	f := newTestFetcher(t, Options{}, r.Server)
	oci := "oci://" + r.host + "/charts/demo"
	tests := []struct {
		name string
		spec capstanv1.ChartSource
		err  string // the error's words; empty: chart 1.0.0
	}{
		{"latest as the version", capstanv1.ChartSource{OCI: oci, Version: "latest"}, ""},
		{"latest in the reference", capstanv1.ChartSource{OCI: oci + ":latest"}, ""},
		{"next as the version", capstanv1.ChartSource{OCI: oci, Version: "next"}, ""},
		{"next in the reference", capstanv1.ChartSource{OCI: oci + ":next"}, ""},
		{"a v-prefixed tag of the chart's version", capstanv1.ChartSource{OCI: oci, Version: "v1.0.0"}, ""},
		{"a tag that reads as a range the chart is in", capstanv1.ChartSource{OCI: oci, Version: "1.0"}, ""},
		{"a version tag that holds another version", capstanv1.ChartSource{OCI: oci, Version: "2.0.0"}, "holds chart version 1.0.0"},
		{"a version tag that holds its version with build metadata", capstanv1.ChartSource{OCI: oci, Version: "1.0.0"}, "holds chart version 1.0.0+other"},
		{"a version tag with build metadata that holds other metadata", capstanv1.ChartSource{OCI: oci, Version: "1.0.0_b"}, "holds chart version 1.0.0+c"},
		{"a pre-release tag that holds it with build metadata", capstanv1.ChartSource{OCI: oci + ":1.0.0-rc.1"}, "holds chart version 1.0.0-rc.1+x"},
		{"a v-prefixed version whose tag has no v", capstanv1.ChartSource{OCI: "oci://" + r.host + "/charts/plain", Version: "v1.0.0"}, ""},
		{"a v-prefixed version that only other build metadata has", capstanv1.ChartSource{OCI: "oci://" + r.host + "/charts/other", Version: "v1.0.0"}, "no such chart"},
		{"a missing tag that is no version", capstanv1.ChartSource{OCI: oci + ":experimental"}, "no such chart, tag or digest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := f.Chart(context.Background(), tt.spec, nil)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("got %v, want chart 1.0.0", err)
			case tt.err == "" && c.Version != "1.0.0":
				t.Fatalf("got chart %s, want 1.0.0", c.Version)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("got %v, want an error that says %q", err, tt.err)
			}
		})
	}
}

// TestIsOCITag decides which OCI versions are pulled as tags and which are
// semver ranges resolved over the registry's tags.
func TestIsOCITag(t *testing.T) {
	for _, tc := range []struct {
		version string
		tag     bool
	}{
		{"latest", true},
		{"stable", true},
		{"next", true},
		{"experimental", true},
		{"linux-x64", true},
		{"1.2.3", true},
		{"v1.2.3", true},
		{"1.2.3_build.7", true},
		{"1.2", true},
		{"1.x", false},
		{"1.2.X", false},
		{"x", false},
		{"^1.2", false},
		{"~1.2", false},
		{">=1 <2", false},
		{"1.2.3 || 2.x", false},
		{"*", false},
	} {
		if got := IsOCITag(tc.version); got != tc.tag {
			t.Errorf("IsOCITag(%q) = %v; want %v", tc.version, got, tc.tag)
		}
	}
}

// TestOCIManifestPinChecksTheVersion pulls a chart pinned by the manifest
// digest in spec.chart.oci with a spec.chart.version: a version the chart
// does not hold is an error that names both, never the pinned chart
// rendered again as if it were the version asked for.
func TestOCIManifestPinChecksTheVersion(t *testing.T) {
	r := newOCIRegistry(t, "", "")
	old := r.push(t, chartArchive(t, "blog", "1.2.0"), "charts/blog:1.2.0", "", "")
	r.push(t, chartArchive(t, "blog", "1.3.0"), "charts/blog:1.3.0", "", "")
	f := newTestFetcher(t, Options{}, r.Server)
	pinned := "oci://" + r.host + "/charts/blog@" + old.Manifest.Digest
	for _, tc := range []struct {
		version string
		err     string
	}{
		{"", ""},
		{"1.2.0", ""},
		{"^1.0.0", ""},
		{"1.3.0", "holds chart version 1.2.0, but spec.chart.version is 1.3.0"},
		{">=1.3.0", "holds chart version 1.2.0, but spec.chart.version is >=1.3.0"},
	} {
		t.Run(tc.version, func(t *testing.T) {
			c, err := f.Chart(context.Background(), capstanv1.ChartSource{OCI: pinned, Version: tc.version}, nil)
			switch {
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err == "" && c.Version != "1.2.0":
				t.Fatalf("got chart %s", c.Version)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), old.Manifest.Digest)):
				t.Fatalf("got %v, want an error that names the manifest and says %q", err, tc.err)
			}
		})
	}
}

// TestChartHasVersion decides whether a pinned chart is the version asked for.
func TestChartHasVersion(t *testing.T) {
	for _, tc := range []struct {
		chart, want string
		ok          bool
	}{
		{"1.2.0", "1.2.0", true},
		{"1.1.0+build.7", "1.1.0_build.7", true},
		{"1.2.0", "v1.2.0", true},
		{"1.2.5", "1.2", true},
		{"1.2.0", "1.3.0", false},
		{"1.2.0", "latest", true}, // a tag that is no version: the digest decides
		{"1.3.0-rc.1", "1.3.0-rc.1", true},
		{"1.3.0-rc.1", "1.3.0", false},
		{"1.2.3+evil", "1.2.3", false}, // a range would ignore build metadata
		{"1.2.3+c", "1.2.3_b", false},
		{"1.3.0-rc.1+x", "1.3.0-rc.1", false},
		{"1.2.3+b", "v1.2.3_b", true},
		{"1.2.5+b", "1.2", true},
	} {
		if got := chartHasVersion(tc.chart, tc.want); got != tc.ok {
			t.Errorf("chartHasVersion(%q, %q) = %v; want %v", tc.chart, tc.want, got, tc.ok)
		}
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
		{"neither a tag nor a range", capstanv1.ChartSource{OCI: oci, Version: ">>1"}, []string{`spec.chart.version ">>1" is neither a tag, a version nor a semver range`}},
	}
	// Only a change to the spec fixes these: the controller stalls on a
	// SpecError rather than read the registry again and again.
	spec := map[string]bool{"tag conflict": true, "no version": true, "not a reference": true, "neither a tag nor a range": true}
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
			var se *SpecError
			if got := errors.As(err, &se); got != spec[tt.name] {
				t.Fatalf("a SpecError: %v, want %v", got, spec[tt.name])
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
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "without credentials: if it needs them, name a Secret that holds them in spec.chart.secretRef") || strings.Contains(err.Error(), "refused the credentials") {
		t.Fatalf("a pull without spec.chart.secretRef: %v; want it to say the registry wants credentials, naming spec.chart.secretRef, not that they were refused", err)
	}
	// A public chart's name mistyped is answered as a private one is: the
	// error says both.
	_, err = f.Chart(context.Background(), capstanv1.ChartSource{OCI: "oci://" + r.host + "/charts/demoo", Version: "1.0.0"}, nil)
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "name a Secret") || !strings.Contains(err.Error(), "check spec.chart.oci, since registries answer so for a repository that does not exist too") {
		t.Fatalf("a pull of a repository that does not exist, refused without credentials: %v; want it to name both spec.chart.secretRef and spec.chart.oci", err)
	}
	_, err = f.Chart(context.Background(), spec, &Credentials{Username: "robot", Password: "wrong"})
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "refused the credentials") {
		t.Fatalf("a pull with credentials the registry refuses: %v; want it to say so", err)
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

// TestRegistryAuthDockerHub: oras sends the requests for docker.io to
// registry-1.docker.io and asks for that host's credentials, which are the
// ones of oci://docker.io/...; no other host gets them.
func TestRegistryAuthDockerHub(t *testing.T) {
	f := newTestFetcher(t, Options{})
	creds := &Credentials{Username: "robot", Password: "s3cret"}
	ctx := context.Background()
	for _, tt := range []struct {
		registry, host string
		want           bool
	}{
		{"docker.io", "registry-1.docker.io", true},
		{"docker.io", "docker.io", false},
		{"docker.io", "ghcr.io", false},
		{"ghcr.io", "ghcr.io", true},
		{"ghcr.io", "GHCR.io", true},
		{"ghcr.io", "registry-1.docker.io", false},
		{"127.0.0.1:5000", "127.0.0.1:5000", true},
	} {
		got, err := f.registryAuth(tt.registry, creds).Credential(ctx, tt.host)
		if err != nil {
			t.Fatal(err)
		}
		if sent := got.Username == "robot" && got.Password == "s3cret"; sent != tt.want {
			t.Errorf("credentials for %s asked by %s: %v, want sent %v", tt.registry, tt.host, got.Username != "", tt.want)
		}
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
	u := func(s string) *url.URL {
		v, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cdn403 := &errcode.ErrorResponse{Method: "GET", URL: u("https://cdn.example/blobs/sha256:ab?X-Signature=topsecret"), StatusCode: http.StatusForbidden}
	for _, tc := range []struct {
		msg       string
		err       error
		withCreds bool
		want      string
		not       string
	}{
		{msg: `127.0.0.1:40165/charts/demo:9.9.9: not found`, withCreds: true, want: "no such chart"},
		{msg: `127.0.0.1:40365/charts/demo: not found`, want: "no such chart"},
		{msg: `GET https://registry.example/v2/: 401 Unauthorized`, withCreds: true, want: "refused the credentials"},
		{msg: `unexpected status code 403: forbidden`, withCreds: true, want: "refused the credentials"},
		{msg: `GET https://registry.example/v2/: 401 Unauthorized`, want: "name a Secret that holds them in spec.chart.secretRef"},
		// A public chart's name mistyped: registries answer a
		// repository that does not exist as one that is private.
		{msg: `unexpected status code 403: forbidden`, want: "if the chart is public, check spec.chart.oci"},
		{msg: `response status code 404: name unknown`, withCreds: true, want: "no such chart"},
		{msg: `dial tcp 10.0.0.1:4011: connection refused`, withCreds: true, want: "registry is up"},
		// A registry's own refusal, on its host (and default port).
		{err: &errcode.ErrorResponse{Method: "GET", URL: u("https://registry.example/v2/charts/demo/manifests/1.0.0"), StatusCode: http.StatusUnauthorized}, withCreds: true, want: "refused the credentials"},
		{err: &errcode.ErrorResponse{Method: "GET", URL: u("https://registry.example:443/v2/charts/demo/manifests/1.0.0"), StatusCode: http.StatusForbidden}, want: "name a Secret", not: "redirect"},
		// A blob redirected to another origin, which never gets the
		// credentials: it must serve the blob without them.
		{err: cdn403, withCreds: true, want: "the redirect to cdn.example was sent without credentials", not: "refused the credentials"},
		{err: cdn403, want: "cdn.example must serve the chart without them", not: "secretRef"},
		{err: &errcode.ErrorResponse{Method: "GET", URL: u("https://registry.example:5000/v2/x"), StatusCode: http.StatusForbidden}, withCreds: true, want: "redirect to registry.example:5000"},
		// A signed address that answers other than 401 or 403 keeps its
		// signature out of the message too.
		{err: &errcode.ErrorResponse{Method: "GET", URL: u("https://cdn.example/blobs/sha256:ab?X-Signature=topsecret"), StatusCode: http.StatusNotFound}, withCreds: true, want: "no such chart"},
		// A signed address with a token in its path, refused or not
		// found: named by its origin alone.
		{err: &errcode.ErrorResponse{Method: "GET", URL: u("https://cdn.example/t/topsecret/blobs/sha256:ab"), StatusCode: http.StatusForbidden}, want: "GET \"https://cdn.example\": response status code 403"},
		{err: &errcode.ErrorResponse{Method: "GET", URL: u("https://cdn.example/t/topsecret/blobs/sha256:ab"), StatusCode: http.StatusNotFound}, want: "GET \"https://cdn.example\": response status code 404"},
		// The registry's own address keeps its path.
		{err: &errcode.ErrorResponse{Method: "GET", URL: u("https://registry.example/v2/charts/demo/manifests/1.0.0?topsecret"), StatusCode: http.StatusNotFound}, want: "https://registry.example/v2/charts/demo/manifests/1.0.0\""},
		// A redirect the guard refused, as net/http reports it.
		{err: &url.Error{Op: "Get", URL: "https://10.1.2.3/t/topsecret/blobs/sha256:ab?X-Signature=topsecret", Err: errors.New("redirect to https://10.1.2.3: fetch guard refused")}, want: `Get "https://10.1.2.3": redirect to https://10.1.2.3`},
		// oras's own texts that quote a blob's last hop, a signed address
		// on a CDN that answered with a wrong length or digest: named by
		// its origin alone; the registry's own address keeps its path.
		{err: fmt.Errorf("%s %q: mismatch Content-Length", "GET", "https://cdn.example/t/topsecret/blobs/sha256:ab?X-Signature=topsecret"), withCreds: true, want: `GET "https://cdn.example": mismatch Content-Length`},
		{err: fmt.Errorf("%s %q: invalid response; digest mismatch in Docker-Content-Digest: received %q when expecting %q", "GET", "https://cdn.example:8443/topsecret/blob?sig=topsecret", "sha256:cd", "sha256:ab"), want: `GET "https://cdn.example:8443": invalid response`},
		{err: fmt.Errorf("%s %q: mismatch Content-Length", "GET", "https://registry.example/v2/charts/demo/blobs/sha256:ab?topsecret"), want: `GET "https://registry.example/v2/charts/demo/blobs/sha256:ab": mismatch`},
		// A token server got the credentials, as the registry does.
		{err: fmt.Errorf("%s %q: %w", "GET", "https://registry.example/v2/charts/demo/manifests/1.0.0", &errcode.ErrorResponse{Method: "GET", URL: u("https://auth.example/token?scope=x"), StatusCode: http.StatusUnauthorized}), withCreds: true, want: "refused the credentials", not: "redirect"},
	} {
		err := tc.err
		if err == nil {
			err = errors.New(tc.msg)
		}
		got := ociError("registry.example", "oci://registry.example/charts/demo", "pulling the chart", tc.withCreds, err).Error()
		if !strings.Contains(got, tc.want) || tc.not != "" && strings.Contains(got, tc.not) || strings.Contains(got, "topsecret") {
			t.Errorf("%v (credentials sent: %v): %s; want a hint that says %q, not %q, and no signature", err, tc.withCreds, got, tc.want, tc.not)
		}
	}
}

// redirectBlobs makes r answer every GET of a blob with a redirect to
// to, with a signature in the query as a signed address has.
func (r *ociRegistry) redirectBlobs(to string) {
	registryHandler := r.Config.Handler
	r.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/") {
			r.requests.Add(1)
			http.Redirect(w, req, to+req.URL.Path+"?X-Signature=topsecret", http.StatusTemporaryRedirect)
			return
		}
		registryHandler.ServeHTTP(w, req)
	})
}

// TestOCIRefusalAfterARedirectJudgesTheHopThatAnswered: a registry that
// redirects its blobs to a server of another origin (object storage, a
// CDN), which answers 403, is judged at that server, as an https chart's
// redirect is. Pulled with credentials, the error does not say they were
// refused, since they never went past the redirect; pulled without, it
// does not send the user to name a secretRef, which would not go there
// either. The signed address's query is not shown.
func TestOCIRefusalAfterARedirectJudgesTheHopThatAnswered(t *testing.T) {
	cdn := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "Request has expired", http.StatusForbidden)
	}))
	t.Cleanup(cdn.Close)
	cdnHost := strings.TrimPrefix(cdn.URL, "https://")
	private := newOCIRegistry(t, "robot", "s3cret")
	private.push(t, chartArchive(t, "demo", "1.0.0"), "charts/demo:1.0.0", "robot", "s3cret")
	private.redirectBlobs(cdn.URL)
	public := newOCIRegistry(t, "", "")
	public.push(t, chartArchive(t, "demo", "1.0.0"), "charts/demo:1.0.0", "", "")
	public.redirectBlobs(cdn.URL)
	f := newTestFetcher(t, Options{}, private.Server, public.Server, cdn)

	_, err := f.Chart(context.Background(), capstanv1.ChartSource{OCI: "oci://" + private.host + "/charts/demo", Version: "1.0.0"}, &Credentials{Username: "robot", Password: "s3cret"})
	if err == nil || strings.Contains(err.Error(), "refused the credentials") || !strings.Contains(err.Error(), "redirect to "+cdnHost) || strings.Contains(err.Error(), "topsecret") {
		t.Errorf("a chart whose blob is redirected and refused, pulled with credentials: %v; want it to name %s, which was sent none, not credentials refused, and no signature", err, cdnHost)
	}
	_, err = f.Chart(context.Background(), capstanv1.ChartSource{OCI: "oci://" + public.host + "/charts/demo", Version: "1.0.0"}, nil)
	if err == nil || strings.Contains(err.Error(), "secretRef") || !strings.Contains(err.Error(), "redirect to "+cdnHost) || strings.Contains(err.Error(), "topsecret") {
		t.Errorf("a chart whose blob is redirected and refused, pulled without credentials: %v; want it to name %s, not a secretRef to add, and no signature", err, cdnHost)
	}
	t.Log(err)
}

// handRegistry serves hand-made manifests and blobs on loopback, for what a
// real registry would not hold: manifests with many layers, layers larger
// than they claim, endless tag lists.
type handRegistry struct {
	*httptest.Server
	host         string
	mu           sync.Mutex
	manifests    map[string][]byte // by tag and by digest
	blobs        map[string][]byte
	blobRequests atomic.Int64
	// gzip encodes blobs when the client accepts it.
	gzip bool
	// tags answers /tags/list; nil is a 404.
	tags http.HandlerFunc
}

func newHandRegistry(t *testing.T) *handRegistry {
	t.Helper()
	r := &handRegistry{manifests: map[string][]byte{}, blobs: map[string][]byte{}}
	r.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		p := req.URL.Path
		switch {
		case p == "/v2/" || p == "/v2":
			w.WriteHeader(http.StatusOK)
		case strings.HasSuffix(p, "/tags/list") && r.tags != nil:
			r.tags(w, req)
		case strings.Contains(p, "/manifests/"):
			r.mu.Lock()
			data, ok := r.manifests[p[strings.LastIndex(p, "/")+1:]]
			r.mu.Unlock()
			if !ok {
				http.NotFound(w, req)
				return
			}
			var m struct {
				MediaType string `json:"mediaType"`
			}
			_ = json.Unmarshal(data, &m)
			w.Header().Set("Content-Type", m.MediaType)
			w.Header().Set("Docker-Content-Digest", Digest(data))
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			if req.Method != http.MethodHead {
				_, _ = w.Write(data)
			}
		case strings.Contains(p, "/blobs/"):
			r.blobRequests.Add(1)
			r.mu.Lock()
			data, ok := r.blobs[p[strings.LastIndex(p, "/")+1:]]
			r.mu.Unlock()
			if !ok {
				http.NotFound(w, req)
				return
			}
			if r.gzip && strings.Contains(req.Header.Get("Accept-Encoding"), "gzip") {
				w.Header().Set("Content-Encoding", "gzip")
				zw := gzip.NewWriter(w)
				_, _ = zw.Write(data)
				_ = zw.Close()
				return
			}
			_, _ = w.Write(data)
		default:
			http.NotFound(w, req)
		}
	}))
	t.Cleanup(r.Close)
	r.host = strings.TrimPrefix(r.URL, "https://")
	return r
}

// blob stores data and returns its descriptor, with the size it claims.
func (r *handRegistry) blob(mediaType string, data []byte, claimed int64) ocispec.Descriptor {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := Digest(data)
	r.blobs[d] = data
	return ocispec.Descriptor{MediaType: mediaType, Digest: digest.Digest(d), Size: claimed}
}

// manifest stores a manifest under tag and returns its digest.
func (r *handRegistry) manifest(tag string, m any) string {
	data, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.manifests[tag] = data
	r.manifests[Digest(data)] = data
	return Digest(data)
}

// chartManifest is a Helm chart's manifest with the given layers.
func (r *handRegistry) chartManifest(layers ...ocispec.Descriptor) ocispec.Manifest {
	cfg := []byte(`{"name":"demo","version":"1.0.0"}`)
	return ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    r.blob(registry.ConfigMediaType, cfg, int64(len(cfg))),
		Layers:    layers,
	}
}

func TestOCIPullReadsOneChartLayer(t *testing.T) {
	limits := Limits{MaxArchiveBytes: 256 << 10}
	chart := chartArchive(t, "demo", "1.0.0")
	noise := make([]byte, 300<<10)
	_, _ = rand.NewChaCha8([32]byte{}).Read(noise)
	big := tgz(t, append(chartEntries("demo", "1.0.0"), file("demo/files/big", string(noise)))...)
	oci := func(r *handRegistry) capstanv1.ChartSource {
		return capstanv1.ChartSource{OCI: "oci://" + r.host + "/charts/demo", Version: "1.0.0"}
	}
	tests := []struct {
		name  string
		setup func(r *handRegistry)
		want  string // an error that says this; empty for a chart
		blobs int64  // blob requests
	}{
		{"a chart and its provenance", func(r *handRegistry) {
			r.manifest("1.0.0", r.chartManifest(
				r.blob(registry.ChartLayerMediaType, chart, int64(len(chart))),
				r.blob(registry.ProvLayerMediaType, []byte("signed"), 6)))
		}, "", 1},
		{"a legacy chart layer", func(r *handRegistry) {
			r.manifest("1.0.0", r.chartManifest(r.blob(registry.LegacyChartLayerMediaType, chart, int64(len(chart)))))
		}, "", 1},
		{"forty chart layers", func(r *handRegistry) {
			var layers []ocispec.Descriptor
			for i := range 40 {
				data := tgz(t, append(chartEntries("demo", "1.0.0"), file("demo/n", strconv.Itoa(i)))...)
				layers = append(layers, r.blob(registry.ChartLayerMediaType, data, int64(len(data))))
			}
			r.manifest("1.0.0", r.chartManifest(layers...))
		}, "has 40 chart layers", 0},
		{"no chart layer", func(r *handRegistry) {
			r.manifest("1.0.0", r.chartManifest())
		}, "has 0 chart layers", 0},
		{"two provenance layers", func(r *handRegistry) {
			r.manifest("1.0.0", r.chartManifest(
				r.blob(registry.ChartLayerMediaType, chart, int64(len(chart))),
				r.blob(registry.ProvLayerMediaType, []byte("a"), 1),
				r.blob(registry.ProvLayerMediaType, []byte("b"), 1)))
		}, "2 provenance layers", 0},
		{"another layer", func(r *handRegistry) {
			r.manifest("1.0.0", r.chartManifest(
				r.blob(registry.ChartLayerMediaType, chart, int64(len(chart))),
				r.blob("application/octet-stream", []byte("x"), 1)))
		}, `a layer of type "application/octet-stream"`, 0},
		{"an image index", func(r *handRegistry) {
			m := r.manifest("amd64", r.chartManifest(r.blob(registry.ChartLayerMediaType, chart, int64(len(chart)))))
			r.manifest("1.0.0", ocispec.Index{
				Versioned: specs.Versioned{SchemaVersion: 2},
				MediaType: ocispec.MediaTypeImageIndex,
				Manifests: []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.Digest(m), Size: 1}},
			})
		}, "is an image index", 0},
		{"a container image", func(r *handRegistry) {
			m := r.chartManifest(r.blob(registry.ChartLayerMediaType, chart, int64(len(chart))))
			m.Config = r.blob(ocispec.MediaTypeImageConfig, []byte("{}"), 2)
			r.manifest("1.0.0", m)
		}, "it is not a Helm chart", 0},
		{"a chart layer over the limit", func(r *handRegistry) {
			r.manifest("1.0.0", r.chartManifest(r.blob(registry.ChartLayerMediaType, big, int64(len(big)))))
		}, "over the limit", 0},
		{"a chart layer larger than it claims, gzip-encoded", func(r *handRegistry) {
			r.gzip = true
			r.manifest("1.0.0", r.chartManifest(r.blob(registry.ChartLayerMediaType, big, int64(len(chart)))))
		}, "reading the chart's layer", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newHandRegistry(t)
			tt.setup(r)
			f := newTestFetcher(t, Options{Limits: limits}, r.Server)
			c, err := f.Chart(context.Background(), oci(r), nil)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.Digest != Digest(chart) {
					t.Fatalf("got chart %s", c.Digest)
				}
			} else {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("got %v, want an error that says %q", err, tt.want)
				}
				t.Log(err)
				if n, _ := f.charts.stats(); n != 0 {
					t.Fatal("something was cached")
				}
			}
			if got := r.blobRequests.Load(); got != tt.blobs {
				t.Fatalf("%d blob requests, want %d", got, tt.blobs)
			}
		})
	}
}

func TestOCITagListIsBounded(t *testing.T) {
	tests := []struct {
		name     string
		page     func(n int64) []string
		next     bool
		want     string
		maxPages int64
	}{
		{"a next page forever", func(n int64) []string { return []string{fmt.Sprintf("0.0.%d", n)} }, true, "past 100 pages", 100},
		{"empty pages forever", func(int64) []string { return nil }, true, "past 100 pages", 100},
		{"too many tags", func(int64) []string {
			tags := make([]string, 10001)
			for i := range tags {
				tags[i] = fmt.Sprintf("1.0.%d", i)
			}
			return tags
		}, false, "more than 10000 tags", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newHandRegistry(t)
			var pages atomic.Int64
			r.tags = func(w http.ResponseWriter, req *http.Request) {
				n := pages.Add(1)
				if tt.next {
					w.Header().Set("Link", fmt.Sprintf(`</v2/charts/demo/tags/list?last=%d>; rel="next"`, n))
				}
				_ = json.NewEncoder(w).Encode(map[string]any{"name": "charts/demo", "tags": tt.page(n)})
			}
			f := newTestFetcher(t, Options{}, r.Server)
			_, err := f.Chart(context.Background(), capstanv1.ChartSource{OCI: "oci://" + r.host + "/charts/demo", Version: "^1"}, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "set spec.chart.version to one version") {
				t.Fatalf("got %v, want an error that says %q", err, tt.want)
			}
			if got := pages.Load(); got > tt.maxPages {
				t.Fatalf("read %d pages, want at most %d", got, tt.maxPages)
			}
		})
	}
}

func TestOCIFetchEndsWithItsContext(t *testing.T) {
	t.Run("cancelled by the caller", func(t *testing.T) {
		r := newHandRegistry(t)
		ended := make(chan struct{})
		r.tags = func(w http.ResponseWriter, req *http.Request) {
			<-req.Context().Done()
			close(ended)
		}
		f := newTestFetcher(t, Options{}, r.Server)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := f.Chart(ctx, capstanv1.ChartSource{OCI: "oci://" + r.host + "/charts/demo", Version: "^1"}, nil)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want the context's error", err)
		}
		// The request itself ends, not only the wait for it.
		select {
		case <-ended:
		case <-time.After(5 * time.Second):
			t.Fatal("the registry's request is still running after the caller gave up")
		}
	})
	t.Run("the guard's timeout bounds the whole pull", func(t *testing.T) {
		r := newHandRegistry(t)
		var pages atomic.Int64
		r.tags = func(w http.ResponseWriter, req *http.Request) {
			n := pages.Add(1)
			time.Sleep(50 * time.Millisecond)
			w.Header().Set("Link", fmt.Sprintf(`</v2/charts/demo/tags/list?last=%d>; rel="next"`, n))
			_ = json.NewEncoder(w).Encode(map[string]any{"tags": []string{}})
		}
		f := newTestFetcher(t, Options{Guard: netguard.Config{Allow: []string{"127.0.0.1/32"}, Timeout: 500 * time.Millisecond}}, r.Server)
		start := time.Now()
		_, err := f.Chart(context.Background(), capstanv1.ChartSource{OCI: "oci://" + r.host + "/charts/demo", Version: "^1"}, nil)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want the deadline's error", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("the pull took %s with a 500ms --fetch-timeout", d)
		}
	})
}
