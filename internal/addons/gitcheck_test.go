package addons

import (
	"context"
	"errors"
	"strings"
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/source"
)

// TestGitValuesCheckOfAPrivateChart: a commit's check has no credentials
// to fetch a chart that names spec.chart.secretRef, so it does not try and
// the commit goes on with a warning; a public chart that cannot be fetched
// still refuses the commit, since git would keep an unchecked secret input
// for good.
func TestGitValuesCheckOfAPrivateChart(t *testing.T) {
	fetched := 0
	fetch := func(context.Context, capstanv1.AddonSpec) (*source.Artifact, error) {
		fetched++
		return nil, errors.New("401 Unauthorized")
	}
	var warned []string
	check := GitValuesCheck(fetch, func(s string) { warned = append(warned, s) })
	def := func(secretRef *gitops.SecretRef) *gitops.Definition {
		return &gitops.Definition{Name: "web", Namespace: "apps",
			Helm:   &gitops.HelmSource{Repo: "https://charts.example/", Chart: "web", Version: "1.0.0", SecretRef: secretRef},
			Values: map[string]any{"greeting": "hi"}}
	}

	if err := check(context.Background(), def(&gitops.SecretRef{Name: "registry"}), nil); err != nil {
		t.Fatalf("a values change of a private chart: %v; want the commit to go on", err)
	}
	if fetched != 0 {
		t.Errorf("the private chart was fetched %d times without its credentials; want none", fetched)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "spec.chart.secretRef") {
		t.Errorf("warnings %q; want one saying the values were not checked for want of the chart's credentials", warned)
	}

	err := check(context.Background(), def(nil), nil)
	var unchecked *UncheckedValuesError
	if !errors.As(err, &unchecked) || fetched != 1 {
		t.Errorf("a public chart that cannot be fetched: %v after %d fetches; want an UncheckedValuesError after one", err, fetched)
	}
}
