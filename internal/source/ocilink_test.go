package source

import (
	"strings"
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestOCILink reads oci:// links as `helm install` takes them into the
// chart source an Addon's spec validates: the tag in spec.chart.version,
// a manifest digest in spec.chart.digest, the repository alone in
// spec.chart.oci; a link that names no version says how to name one.
func TestOCILink(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, tc := range []struct {
		link string
		want capstanv1.ChartSource
		says string
	}{
		{link: "oci://ghcr.io/org/blog:1.2.0", want: capstanv1.ChartSource{OCI: "oci://ghcr.io/org/blog", Version: "1.2.0"}},
		{link: "oci://127.0.0.1:5000/charts/demo:1.0.0_build.7", want: capstanv1.ChartSource{OCI: "oci://127.0.0.1:5000/charts/demo", Version: "1.0.0+build.7"}},
		{link: "oci://ghcr.io/org/blog@" + digest, want: capstanv1.ChartSource{OCI: "oci://ghcr.io/org/blog", Digest: digest}},
		{link: "oci://ghcr.io/org/blog:1.2.0@" + digest, want: capstanv1.ChartSource{OCI: "oci://ghcr.io/org/blog", Digest: digest}},
		{link: "oci://ghcr.io/org/blog", says: "add it as a tag, such as oci://ghcr.io/org/blog:1.2.3"},
		{link: "oci://ghcr.io/org/blog@sha512:" + strings.Repeat("ab", 64), says: "other than sha256"},
		{link: "oci://ghcr.io", says: "not an OCI reference"},
		{link: "https://ghcr.io/org/blog:1.2.0", says: "not an oci:// link"},
	} {
		got, err := OCILink(tc.link)
		switch {
		case tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)):
			t.Errorf("%s: %+v, %v; want an error saying %q", tc.link, got, err, tc.says)
		case tc.says == "" && (err != nil || got != tc.want):
			t.Errorf("%s: %+v, %v; want %+v", tc.link, got, err, tc.want)
		}
	}
}
