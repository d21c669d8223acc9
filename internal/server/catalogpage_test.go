package server_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestCatalogTargetsTheEntrysNamespace adds Longhorn from the catalog,
// with no gitops repository, in a trusted namespace and in a restricted
// one. In the trusted one its objects go to the entry's namespace,
// created when missing, as a committed definition's do, not next to
// whatever else the Addon's namespace holds; in the restricted one they
// stay in the Addon's namespace, the only one its profile allows.
func TestCatalogTargetsTheEntrysNamespace(t *testing.T) {
	ctx := context.Background()
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trustedNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ns, user, target string
		create           bool
	}{
		{ns: trustedNamespace, user: "catalog-cluster", target: "longhorn-system", create: true},
		{ns: namespace(t), user: "catalog-restricted"},
	} {
		token := user(t, tc.ns, tc.user, addonRule("get", "list", "create", "update", "patch"))
		name := tc.user + "-longhorn"
		t.Cleanup(func() {
			_ = admin.Delete(ctx, &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: name}})
		})
		resp := signInAt(t, api.URL, token).do(t, http.MethodPost, "/catalog/longhorn", url.Values{"namespace": {tc.ns}, "name": {name}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("adding Longhorn in %s: %d", tc.ns, resp.StatusCode)
		}
		a := &capstanv1.Addon{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: tc.ns, Name: name}, a); err != nil {
			t.Fatalf("the catalog form did not create the Addon in %s: %v", tc.ns, err)
		}
		if a.Spec.TargetNamespace != tc.target || a.Spec.CreateNamespace != tc.create {
			t.Errorf("Longhorn added in %s sends its objects to %q (createNamespace %v); want %q (%v)",
				tc.ns, a.Spec.TargetNamespace, a.Spec.CreateNamespace, tc.target, tc.create)
		}
	}
}
