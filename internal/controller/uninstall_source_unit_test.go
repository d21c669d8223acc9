package controller

import (
	"strings"
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestAppliedChart decides the chart the uninstall renders its delete
// hooks from: the applied version of the same chart repository or OCI
// chart, when the spec may name another; nothing pinned, with why, when
// the applied version cannot be named.
func TestAppliedChart(t *testing.T) {
	const repo = "https://charts.example/stable"
	applied := capstanv1.Revision{Number: 3, Source: repo + "/web", Version: "1.0.0", AppliedHash: "sha256:a"}
	for _, tc := range []struct {
		name    string
		spec    capstanv1.AddonSpec
		history []capstanv1.Revision
		pinned  string // the pinned version, "" for none
		why     string // in why, "" for no reason given
	}{
		{name: "never applied", spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{Repo: repo, Name: "web", Version: "2.0.0"}}},
		{name: "another version", spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{Repo: repo + "/", Name: "web", Version: "2.0.0"}}, history: []capstanv1.Revision{applied}, pinned: "1.0.0"},
		{name: "a range", spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{Repo: repo, Name: "web", Version: ">=1.0.0"}}, history: []capstanv1.Revision{applied}, pinned: "1.0.0"},
		{name: "the newest", spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{Repo: repo, Name: "web"}}, history: []capstanv1.Revision{applied}, pinned: "1.0.0"},
		{name: "the applied version", spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{Repo: repo, Name: "web", Version: "1.0.0"}}, history: []capstanv1.Revision{applied}},
		{name: "an OCI chart", spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{OCI: "oci://registry.example/web", Version: "2.0.0"}},
			history: []capstanv1.Revision{{Source: "oci://registry.example/web", Version: "1.0.0"}}, pinned: "1.0.0"},
		{name: "another chart", spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{Repo: repo, Name: "api", Version: "1.0.0"}}, history: []capstanv1.Revision{applied}, why: "source changed"},
		{name: "a digest pin", spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{Repo: repo, Name: "web", Version: "2.0.0", Digest: "sha256:" + strings.Repeat("a", 64)}}, history: []capstanv1.Revision{applied}, why: "digest"},
		{name: "an archive", spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: "https://charts.example/web-2.0.0.tgz"}}, history: []capstanv1.Revision{applied}, why: "spec.chart.url"},
		{name: "a git folder", spec: capstanv1.AddonSpec{Git: &capstanv1.GitSource{URL: "https://git.example/infra", Path: "web"}},
			history: []capstanv1.Revision{{Source: "https://git.example/infra//web", Version: "0123456789ab"}}, why: "full commit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &capstanv1.Addon{Spec: tc.spec}
			a.Status.History = tc.history
			before := a.Spec.DeepCopy()
			rev, pin, why := appliedChart(a)
			if (rev == nil) != (len(tc.history) == 0) {
				t.Fatalf("revision %v with history %v", rev, tc.history)
			}
			got := ""
			if pin != nil {
				got = pin.Version
				if pin.Repo != tc.spec.Chart.Repo || pin.Name != tc.spec.Chart.Name || pin.OCI != tc.spec.Chart.OCI {
					t.Errorf("pinned another source: %+v", pin)
				}
			}
			if got != tc.pinned {
				t.Errorf("pinned version %q, want %q", got, tc.pinned)
			}
			if tc.why == "" && why != "" || !strings.Contains(why, tc.why) {
				t.Errorf("why %q, want it to say %q", why, tc.why)
			}
			if a.Spec.Chart != nil && *a.Spec.Chart != *before.Chart {
				t.Errorf("the Addon's spec changed: %+v", a.Spec.Chart)
			}
		})
	}
}
