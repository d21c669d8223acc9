package cli

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
		{"a tag in the reference, a version", &capstanv1.ChartSource{OCI: "oci://r:5000/blog:1.2.0", Version: "1.2.0"}, "1.3.0", "",
			&capstanv1.ChartSource{OCI: "oci://r:5000/blog", Version: "1.3.0"}, ""},
		{"a tag alone in the reference, a version", &capstanv1.ChartSource{OCI: "oci://r:5000/charts/blog:1.2.0"}, "1.3.0", "",
			&capstanv1.ChartSource{OCI: "oci://r:5000/charts/blog", Version: "1.3.0"}, ""},
		{"a tag and a manifest in the reference, a version and its digest", &capstanv1.ChartSource{OCI: "oci://r:5000/blog:1.2.0@" + old, Version: "1.2.0"}, "1.3.0", next,
			&capstanv1.ChartSource{OCI: "oci://r:5000/blog", Version: "1.3.0", Digest: next}, ""},
		{"a tag in the reference, a digest alone", &capstanv1.ChartSource{OCI: "oci://r:5000/blog:1.2.0", Version: "1.2.0"}, "", next,
			&capstanv1.ChartSource{OCI: "oci://r:5000/blog:1.2.0", Version: "1.2.0", Digest: next}, ""},
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

// TestAddonEditRefusesValuesForAGitFolder: values on an Addon of a git
// folder would Block it (git-source), so edit refuses -f, --set and
// --secret-input there before anything is written: no spec.values, and
// no values Secret.
func TestAddonEditRefusesValuesForAGitFolder(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	before := newAddon(t, c, ns, "web", func(a *capstanv1.Addon) {
		a.Spec.Chart = nil
		a.Spec.Git = &capstanv1.GitSource{URL: "https://git.invalid/ops.git", Path: "web"}
	})
	dir := t.TempDir()
	values, secret := filepath.Join(dir, "values.yaml"), filepath.Join(dir, "pw")
	for file, data := range map[string]string{values: "replicas: 3\n", secret: "hunter2\n"} {
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"--set", "a=b"}, {"--set-string", "a=b"}, {"-f", values}, {"--secret-input", "auth.password=@" + secret}} {
		out, err := capstan(t, cluster, append([]string{"addon", "edit", "web", "-n", ns}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "a folder of git has no values") {
			t.Errorf("edit %v of a git folder: %v; want it refused\n%s", args, err, out)
		}
		if strings.Contains(out, "hunter2") || (err != nil && strings.Contains(err.Error(), "hunter2")) {
			t.Errorf("edit %v printed the secret input", args)
		}
	}
	if a := getAddon(t, c, ns, "web"); a.Generation != before.Generation || a.Spec.Values != nil || len(a.Spec.ValuesFrom) > 0 {
		t.Errorf("a refused edit changed the Addon: generation %d (was %d), values %v, valuesFrom %v", a.Generation, before.Generation, a.Spec.Values, a.Spec.ValuesFrom)
	}
	secrets := &corev1.SecretList{}
	if err := c.List(t.Context(), secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) > 0 {
		t.Errorf("a refused edit left %d Secrets, the first %s", len(secrets.Items), secrets.Items[0].Name)
	}
}
