package controller_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestAPIServerRefusesBadAddons checks the CRD's validation on the real API
// server: each bad Addon is refused with a message that names the field.
func TestAPIServerRefusesBadAddons(t *testing.T) {
	chart := &capstanv1.ChartSource{URL: "https://charts.example/web-1.0.0.tgz"}
	git := &capstanv1.GitSource{URL: "https://git.example/repo.git", Path: "web"}
	for _, tc := range []struct {
		name string
		spec capstanv1.AddonSpec
		want string
	}{
		{"two-sources", capstanv1.AddonSpec{Chart: chart, Git: git}, "exactly one source"},
		{"no-source", capstanv1.AddonSpec{}, "exactly one source"},
		{"bad-digest", capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: chart.URL, Digest: "sha256:abc"}}, "spec.chart.digest"},
		{"two-chart-kinds", capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: chart.URL, OCI: "oci://r.example/c", Version: "1"}}, "spec.chart"},
		{"escaping-path", capstanv1.AddonSpec{Git: &capstanv1.GitSource{URL: git.URL, Path: "../etc"}}, "spec.git.path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "bad-" + tc.name}, Spec: tc.spec}
			err := admin.Create(context.Background(), a)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an Invalid error naming %q", err, tc.want)
			}
		})
	}
}
