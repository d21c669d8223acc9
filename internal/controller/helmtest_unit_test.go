package controller

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/render"
)

// TestFilterTests: spec.test.filters as `helm test --filter` reads them:
// excludes first, then, when any filter includes, only what is included;
// other hooks pass; an included name that no test has is reported.
func TestFilterTests(t *testing.T) {
	hook := func(name string, events ...string) render.Hook {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("batch/v1")
		o.SetKind("Job")
		o.SetNamespace("apps")
		o.SetName(name)
		return render.Hook{Object: o, Events: events}
	}
	hs := []render.Hook{hook("migrate", "pre-install"), hook("check", "test"), hook("smoke", "test"), hook("seed", "pre-install", "test")}
	names := func(hs []render.Hook) []string {
		var out []string
		for _, h := range hs {
			out = append(out, h.Object.GetName())
		}
		return out
	}
	for _, c := range []struct {
		name       string
		filters    []capstanv1.TestFilter
		kept, left []string
		unknown    []string
	}{
		{"none", nil, []string{"migrate", "check", "smoke", "seed"}, nil, nil},
		{"an exclude", []capstanv1.TestFilter{{Name: "smoke", Exclude: true}}, []string{"migrate", "check", "seed"}, []string{"Job apps/smoke"}, nil},
		{"an include", []capstanv1.TestFilter{{Name: "check"}}, []string{"migrate", "check"}, []string{"Job apps/smoke", "Job apps/seed"}, nil},
		{"both on one", []capstanv1.TestFilter{{Name: "check"}, {Name: "check", Exclude: true}}, []string{"migrate"}, []string{"Job apps/check", "Job apps/smoke", "Job apps/seed"}, nil},
		{"a typo", []capstanv1.TestFilter{{Name: "chek"}, {Name: "migrate"}, {Name: "smoke"}}, []string{"migrate", "smoke"}, []string{"Job apps/check", "Job apps/seed"}, []string{"chek", "migrate"}},
		{"an exclude of nothing", []capstanv1.TestFilter{{Name: "gone", Exclude: true}}, []string{"migrate", "check", "smoke", "seed"}, nil, nil},
	} {
		kept, left, unknown := filterTests(hs, c.filters)
		if !slices.Equal(names(kept), c.kept) || !slices.Equal(left, c.left) || !slices.Equal(unknown, c.unknown) {
			t.Errorf("%s: kept %v, left %v, unknown %v; want %v, %v, %v", c.name, names(kept), left, unknown, c.kept, c.left, c.unknown)
		}
	}
	// The filters' key: none for none, the same whatever their order,
	// another for another filter.
	a := []capstanv1.TestFilter{{Name: "check"}, {Name: "smoke", Exclude: true}}
	b := []capstanv1.TestFilter{{Name: "smoke", Exclude: true}, {Name: "check"}}
	if testFiltersKey(nil) != "" || testFiltersKey(a) != testFiltersKey(b) || testFiltersKey(a) == testFiltersKey(a[:1]) ||
		testFiltersKey([]capstanv1.TestFilter{{Name: "smoke"}}) == testFiltersKey([]capstanv1.TestFilter{{Name: "smoke", Exclude: true}}) {
		t.Fatal("the filters' keys")
	}
	// The runner is handed the kept tests only, each deleting its last run.
	run := testHooks(hs, []capstanv1.TestFilter{{Name: "check"}})
	if !slices.Equal(names(run), []string{"migrate", "check"}) || !slices.Contains(run[1].DeletePolicies, "before-hook-creation") {
		t.Fatalf("the test run's hooks: %v, %v", names(run), run[1].DeletePolicies)
	}
}
