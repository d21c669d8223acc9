package cli

import (
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestMoveChart decides how edit moves a chart's version and digest pin.
func TestMoveChart(t *testing.T) {
	key := client.ObjectKey{Namespace: "tenant", Name: "blog"}
	old, next := "sha256:"+strings.Repeat("a", 64), "sha256:"+strings.Repeat("b", 64)
	for _, tc := range []struct {
		name            string
		chart           *capstanv1.ChartSource
		version, digest string
		want            *capstanv1.ChartSource
		err             string
	}{
		{"unpinned, a version", &capstanv1.ChartSource{OCI: "oci://r/blog", Version: "1.2.0"}, "1.3.0", "",
			&capstanv1.ChartSource{OCI: "oci://r/blog", Version: "1.3.0"}, ""},
		{"spec.chart.digest, a version alone", &capstanv1.ChartSource{Repo: "https://c/", Name: "blog", Version: "1.2.0", Digest: old}, "1.3.0", "",
			nil, "pins its chart by digest (" + old + "), which names one version: give the digest of version 1.3.0 with --digest"},
		{"spec.chart.digest, a version and its digest", &capstanv1.ChartSource{Repo: "https://c/", Name: "blog", Version: "1.2.0", Digest: old}, "1.3.0", next,
			&capstanv1.ChartSource{Repo: "https://c/", Name: "blog", Version: "1.3.0", Digest: next}, ""},
		{"a manifest in the reference, a version alone", &capstanv1.ChartSource{OCI: "oci://r/blog@" + old, Version: "1.2.0"}, "1.3.0", "",
			nil, "pins its chart by digest (" + old + ")"},
		{"a manifest in the reference, a version and its digest", &capstanv1.ChartSource{OCI: "oci://r/blog@" + old, Version: "1.2.0"}, "1.3.0", next,
			&capstanv1.ChartSource{OCI: "oci://r/blog", Version: "1.3.0", Digest: next}, ""},
		{"a digest alone", &capstanv1.ChartSource{OCI: "oci://r/blog@" + old}, "", next,
			&capstanv1.ChartSource{OCI: "oci://r/blog", Digest: next}, ""},
		{"a git folder", nil, "1.3.0", "", nil, "renders a folder of git"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := moveChart(key, tc.chart, tc.version, tc.digest)
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("got %v, want an error with %q", err, tc.err)
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err == "" && !reflect.DeepEqual(tc.chart, tc.want):
				t.Fatalf("the chart is %+v; want %+v", tc.chart, tc.want)
			}
		})
	}
}

// TestAddonEditMovesAPinnedChart: `edit --version` of an add-on pinned by
// a manifest digest is refused before anything is written, since the pin
// would render the old chart again; with --digest the pin moves with it.
func TestAddonEditMovesAPinnedChart(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	old, next := "sha256:"+strings.Repeat("1", 64), "sha256:"+strings.Repeat("2", 64)
	before := newAddon(t, c, ns, "blog", func(a *capstanv1.Addon) {
		a.Spec.Chart = &capstanv1.ChartSource{OCI: "oci://registry.invalid/charts/blog@" + old, Version: "1.2.0"}
	})
	out, err := capstan(t, cluster, "addon", "edit", "blog", "-n", ns, "--version", "1.3.0")
	if err == nil || !strings.Contains(err.Error(), "--digest") {
		t.Fatalf("edit --version of a pinned chart: %v; want it refused, asking for --digest\n%s", err, out)
	}
	if a := getAddon(t, c, ns, "blog"); a.Generation != before.Generation {
		t.Errorf("the refused edit changed the Addon: %+v", a.Spec.Chart)
	}
	if out, err := capstan(t, cluster, "addon", "edit", "blog", "-n", ns, "--version", "1.3.0", "--digest", next); err != nil {
		t.Fatalf("edit --version --digest: %v\n%s", err, out)
	}
	want := capstanv1.ChartSource{OCI: "oci://registry.invalid/charts/blog", Version: "1.3.0", Digest: next}
	if got := getAddon(t, c, ns, "blog").Spec.Chart; !reflect.DeepEqual(*got, want) {
		t.Errorf("the chart is %+v; want %+v", *got, want)
	}
}
