package source

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestProvenanceCredentialsStayOnRepoHost fetches the provenance file of a
// chart whose index.yaml lists its archive on another host (127.0.0.1 on
// another port): the file is fetched from beside the archive, and the
// repository's credentials go to the repository's host only, as for the
// archive itself. A chart beside its index gets its file with them.
func TestProvenanceCredentialsStayOnRepoHost(t *testing.T) {
	ctx := context.Background()
	creds := &Credentials{Username: "alice", Password: "s3cret"}
	r := newChartRepo(t)
	r.auth = [2]string{"alice", "s3cret"}
	other := newChartRepo(t)
	other.put("/elsewhere/demo-1.0.0.tgz", chartArchive(t, "demo", "1.0.0"))
	other.put("/elsewhere/demo-1.0.0.tgz.prov", []byte("signed"))
	r.put("/local-1.0.0.tgz", chartArchive(t, "local", "1.0.0"))
	r.put("/local-1.0.0.tgz.prov", []byte("signed too"))
	r.put("/index.yaml", []byte("apiVersion: v1\nentries:\n"+
		"  demo:\n  - apiVersion: v2\n    name: demo\n    version: 1.0.0\n    urls:\n    - "+other.URL+"/elsewhere/demo-1.0.0.tgz\n"+
		"  local:\n  - apiVersion: v2\n    name: local\n    version: 1.0.0\n    urls:\n    - local-1.0.0.tgz\n"))
	f := newTestFetcher(t, Options{}, r.Server, other.Server)

	c, err := f.Chart(ctx, capstanv1.ChartSource{Repo: r.URL, Name: "demo"}, creds)
	if err != nil {
		t.Fatal(err)
	}
	prov, err := f.Provenance(ctx, c, creds)
	if err != nil || string(prov) != "signed" {
		t.Fatalf("got %q, %v", prov, err)
	}
	if other.count("/elsewhere/demo-1.0.0.tgz.prov") != 1 {
		t.Fatal("the provenance file was not fetched from beside the archive")
	}
	if n := other.authSeen.Load(); n != 0 {
		t.Fatalf("the repository's credentials were sent %d times to the archive's host", n)
	}

	c, err = f.Chart(ctx, capstanv1.ChartSource{Repo: r.URL, Name: "local"}, creds)
	if err != nil {
		t.Fatal(err)
	}
	if prov, err = f.Provenance(ctx, c, creds); err != nil || string(prov) != "signed too" {
		t.Fatalf("the provenance file beside the index: got %q, %v", prov, err)
	}
}

// TestProvenanceOfAnArchiveURLUsesItsCredentials fetches the provenance
// file of a spec.chart.url archive with the credentials the archive was
// fetched with.
func TestProvenanceOfAnArchiveURLUsesItsCredentials(t *testing.T) {
	ctx := context.Background()
	creds := &Credentials{Username: "alice", Password: "s3cret"}
	r := newChartRepo(t)
	r.auth = [2]string{"alice", "s3cret"}
	r.put("/demo-1.0.0.tgz", chartArchive(t, "demo", "1.0.0"))
	r.put("/demo-1.0.0.tgz.prov", []byte("signed"))
	f := newTestFetcher(t, Options{}, r.Server)
	c, err := f.Chart(ctx, capstanv1.ChartSource{URL: r.URL + "/demo-1.0.0.tgz"}, creds)
	if err != nil {
		t.Fatal(err)
	}
	if prov, err := f.Provenance(ctx, c, creds); err != nil || string(prov) != "signed" {
		t.Fatalf("got %q, %v", prov, err)
	}
	if _, err := f.Provenance(ctx, c, nil); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("without credentials: want HTTP 401, got %v", err)
	}
}

// TestProvenanceStatuses: a provenance file answered 404 or 410 is missing,
// and the chart is not signed; one answered 401 or 403 stays a fetch error,
// retried, since the credentials may be at fault, with a hint that names the
// provenance file, which a bucket that may not be listed answers 403 for
// when it does not hold it.
func TestProvenanceStatuses(t *testing.T) {
	archive := chartArchive(t, "demo", "1.0.0")
	for _, status := range []int{http.StatusNotFound, http.StatusGone, http.StatusUnauthorized, http.StatusForbidden} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, ".prov") {
					w.WriteHeader(status)
					return
				}
				_, _ = w.Write(archive)
			}))
			defer srv.Close()
			ctx := context.Background()
			f := newTestFetcher(t, Options{}, srv)
			c, err := f.Chart(ctx, capstanv1.ChartSource{URL: srv.URL + "/demo-1.0.0.tgz"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.Provenance(ctx, c, nil)
			t.Log(err)
			var sig *SignatureError
			missing := errors.As(err, &sig) && sig.Missing
			if want := status == http.StatusNotFound || status == http.StatusGone; missing != want {
				t.Fatalf("missing %v, want %v: %v", missing, want, err)
			}
			var fe *FetchError
			if !missing && (!errors.As(err, &fe) || !strings.Contains(fe.Hint, "demo-1.0.0.tgz.prov")) {
				t.Fatalf("want a fetch error whose hint names the provenance file, got %v", err)
			}
		})
	}
}
