package source

import (
	"context"
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
