package source

import (
	"context"
	"fmt"
	"strings"
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestArchiveAddressFromTheIndexIsShownWithoutItsQuery: index.yaml, read
// with the repository's credentials, may name a signed archive address
// (?X-Amz-Signature=…, ?token=…). Neither the fetched chart's URL, which
// becomes status.plan.source.url, nor an error about the archive shows
// that query; an archive on another host is shown by its origin alone, as
// its path may hold a token too.
func TestArchiveAddressFromTheIndexIsShownWithoutItsQuery(t *testing.T) {
	const query = "?X-Amz-Signature=TOPSECRETSIG&token=TOPSECRETTOKEN"
	r := newChartRepo(t)
	cdn := newChartRepo(t)
	good := chartArchive(t, "demo", "1.0.0")
	other := chartArchive(t, "other", "1.0.0")
	for _, repo := range []*chartRepo{r, cdn} {
		repo.put("/demo-1.0.0.tgz", good)
		repo.put("/t/PATHTOKEN/demo-1.0.0.tgz", good)
		repo.put("/other.tgz", other)
		repo.put("/bad.tgz", []byte("not a gzip at all"))
	}
	digest := func(data []byte) string { return strings.TrimPrefix(Digest(data), "sha256:") }
	for _, tc := range []struct {
		name, entry, digest string
		wantShown           string // the chart's URL, or "" for an error
		wantErr             string
	}{
		{"fetched", r.URL + "/demo-1.0.0.tgz" + query, digest(good), r.URL + "/demo-1.0.0.tgz", ""},
		{"fetched from another host", cdn.URL + "/t/PATHTOKEN/demo-1.0.0.tgz" + query, digest(good), cdn.URL, ""},
		{"relative", "demo-1.0.0.tgz" + query, digest(good), r.URL + "/demo-1.0.0.tgz", ""},
		{"digest mismatch", r.URL + "/demo-1.0.0.tgz" + query, strings.Repeat("ab", 32), "", "the archive at " + r.URL + "/demo-1.0.0.tgz has digest"},
		{"other chart", r.URL + "/other.tgz" + query, digest(other), "", "the archive at " + r.URL + "/other.tgz holds chart other"},
		{"bad archive", r.URL + "/bad.tgz" + query, strings.Repeat("ab", 32), "", r.URL + "/bad.tgz: "},
		{"missing", r.URL + "/missing.tgz" + query, strings.Repeat("ab", 32), "", "cannot fetch " + r.URL + "/missing.tgz: HTTP 404"},
		{"missing on another host", cdn.URL + "/t/PATHTOKEN/missing.tgz" + query, strings.Repeat("ab", 32), "", "cannot fetch " + cdn.URL + ": HTTP 404"},
		{"not https", "http://127.0.0.1:1/t/PATHTOKEN/demo.tgz" + query, strings.Repeat("ab", 32), "", "the archive URL in index.yaml http://127.0.0.1:1 must be an https URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.put("/index.yaml", indexWithDigest("demo", "1.0.0", fmt.Sprintf("%q", tc.entry), tc.digest))
			f := newTestFetcher(t, Options{}, r.Server, cdn.Server)
			ch, err := f.Chart(context.Background(), capstanv1.ChartSource{Repo: r.URL, Name: "demo"}, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Chart = %v, want an error with %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "TOPSECRET") || strings.Contains(err.Error(), "PATHTOKEN") {
					t.Errorf("Chart = %v, shows the archive's token", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ch.URL != tc.wantShown {
				t.Errorf("Chart.URL = %q, want %q", ch.URL, tc.wantShown)
			}
			if got := ChartArtifact(&capstanv1.ChartSource{Repo: r.URL, Name: "demo"}, ch).PlanSource().URL; got != tc.wantShown {
				t.Errorf("PlanSource().URL = %q, want %q", got, tc.wantShown)
			}
			// NOTE: the provenance file signs the archive by its file name,
			// which the URL shown no longer holds for another host.
			if got := ch.FileName(); got != "demo-1.0.0.tgz" {
				t.Errorf("FileName() = %q, want demo-1.0.0.tgz, the name the provenance file signs", got)
			}
		})
	}
}

// TestRepositoryAndArchiveQueryNotShown: spec.chart.repo's and
// spec.chart.url's own addresses are shown by their path without the
// query, also where Helm copies the repository's query onto a relative
// archive address from index.yaml.
func TestRepositoryAndArchiveQueryNotShown(t *testing.T) {
	r := newChartRepo(t)
	f := newTestFetcher(t, Options{}, r.Server)
	repo := r.URL + "/charts?sig=REPOSECRETSIG"
	_, err := f.Chart(context.Background(), capstanv1.ChartSource{Repo: repo, Name: "demo"}, nil)
	if err == nil || !strings.Contains(err.Error(), "cannot fetch "+r.URL+"/charts/index.yaml: HTTP 404") || strings.Contains(err.Error(), "REPOSECRETSIG") {
		t.Errorf("Chart = %v, want the index's 404 without the query", err)
	}
	r.put("/charts/index.yaml", indexWithDigest("demo", "1.0.0", "demo-1.0.0.tgz", strings.Repeat("ab", 32)))
	_, err = f.Chart(context.Background(), capstanv1.ChartSource{Repo: repo, Name: "demo"}, nil)
	if err == nil || !strings.Contains(err.Error(), "cannot fetch "+r.URL+"/charts/demo-1.0.0.tgz: HTTP 404") || strings.Contains(err.Error(), "REPOSECRETSIG") {
		t.Errorf("Chart = %v, want the archive's 404 without the query", err)
	}
	data := chartArchive(t, "demo", "1.0.0")
	r.put("/demo-1.0.0.tgz", data)
	ch, err := f.Chart(context.Background(), capstanv1.ChartSource{URL: r.URL + "/demo-1.0.0.tgz?token=ARCHIVESECRET"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ch.URL != r.URL+"/demo-1.0.0.tgz" {
		t.Errorf("Chart.URL = %q, want the archive's address without its query", ch.URL)
	}
	_, err = f.Chart(context.Background(), capstanv1.ChartSource{URL: r.URL + "/missing.tgz?token=ARCHIVESECRET"}, nil)
	if err == nil || strings.Contains(err.Error(), "ARCHIVESECRET") {
		t.Errorf("Chart = %v, want the 404 without the query", err)
	}
}
