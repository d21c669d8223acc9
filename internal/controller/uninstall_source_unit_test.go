package controller

import (
	"net/http"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/render"
	"capstan.dev/capstan/internal/source"
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

// TestFromAppliedMessage decides whether an uninstall that renders the
// applied version says so: only when its render has a delete hook and the
// spec does not name exactly the applied version, in words that hold for
// a range or no version too.
func TestFromAppliedMessage(t *testing.T) {
	applied := &capstanv1.Revision{Number: 3, Source: "https://charts.example/stable/web", Version: "1.0.0"}
	hook := func(events ...string) render.Hook {
		return render.Hook{Object: &unstructured.Unstructured{}, Events: events}
	}
	deleting := []render.Hook{hook("pre-install"), hook("pre-delete")}
	for _, tc := range []struct {
		name    string
		version string
		hooks   []render.Hook
		want    string // in the message, "" for no message
	}{
		{name: "another version", version: "2.0.0", hooks: deleting, want: "asks for 2.0.0; the delete hooks are those of the applied https://charts.example/stable/web 1.0.0 (revision 3)"},
		{name: "a range", version: ">=1.0.0", hooks: deleting, want: "asks for >=1.0.0; the delete hooks are those of the applied"},
		{name: "no version", hooks: deleting, want: "asks for the newest stable version; the delete hooks are those of the applied"},
		{name: "a post-delete hook only", version: "2.0.0", hooks: []render.Hook{hook("post-delete")}, want: "1.0.0 (revision 3)"},
		{name: "no delete hook", version: "2.0.0", hooks: []render.Hook{hook("pre-install"), hook("post-upgrade")}},
		{name: "no hook at all", version: "2.0.0"},
		{name: "the applied version", version: "1.0.0", hooks: deleting},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fromAppliedMessage(applied, &capstanv1.ChartSource{Repo: "https://charts.example/stable", Name: "web", Version: tc.version}, tc.hooks)
			switch {
			case tc.want == "" && got != "":
				t.Errorf("message %q, want none", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("message %q, want it to say %q", got, tc.want)
			case tc.want != "" && !strings.Contains(got, "current values"):
				t.Errorf("message %q does not say the values are the current ones", got)
			}
		})
	}
}

// TestStageFetchNamesTheFetchStep: the uninstall tells a source it could
// not fetch from a render that failed by the name of the step that
// stopped, so stageFetch must be the fetch step's name.
func TestStageFetchNamesTheFetchStep(t *testing.T) {
	var names []string
	for _, st := range (&AddonReconciler{}).renderSteps() {
		names = append(names, st.name)
	}
	if len(names) < 2 || names[1] != stageFetch {
		t.Errorf("the render steps are %q; want the second named %q, the fetch", names, stageFetch)
	}
}

// TestGoneForGood: only a version gone from its repository for good falls
// back to the hooks of the version the spec names; a refusal of the
// credentials (401, 403) or another client error runs none.
func TestGoneForGood(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"404", &source.FetchError{URL: "http://127.0.0.1/a-1.0.0.tgz", Status: http.StatusNotFound}, true},
		{"410", &source.FetchError{URL: "http://127.0.0.1/a-1.0.0.tgz", Status: http.StatusGone}, true},
		{"a broken archive", &source.ArchiveError{Problem: "not gzip"}, true},
		{"a digest mismatch", &source.DigestMismatchError{Source: "a", Expected: "sha256:1", Actual: "sha256:2"}, true},
		{"401", &source.FetchError{URL: "http://127.0.0.1/a-1.0.0.tgz", Status: http.StatusUnauthorized}, false},
		{"403", &source.FetchError{URL: "http://127.0.0.1/a-1.0.0.tgz", Status: http.StatusForbidden}, false},
		{"400", &source.FetchError{URL: "http://127.0.0.1/a-1.0.0.tgz", Status: http.StatusBadRequest}, false},
		{"a spec error", &source.SpecError{Problem: "the Secret does not fit the URL"}, false},
	} {
		if got := goneForGood(terminal{c.err}); got != c.want {
			t.Errorf("%s: goneForGood = %t, want %t", c.name, got, c.want)
		}
	}
}

// TestWaitsAtTimeBound: an uninstall waits for a delete render stopped at
// the sandbox's time bound only once; a second stop in a row goes on
// without the delete hooks.
func TestWaitsAtTimeBound(t *testing.T) {
	for times, want := range map[int]bool{1: true, 2: false, 3: false} {
		if got := waitsAtTimeBound(&boundStop{LimitError: &render.LimitError{Bound: "time"}, times: times}); got != want {
			t.Errorf("after %d stops: waits = %t, want %t", times, got, want)
		}
	}
}
