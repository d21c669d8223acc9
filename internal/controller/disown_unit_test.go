package controller

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
)

// TestDisownWithholdsASecretsRefusal takes an Orphan deletion's owner
// reference off a Secret whose patch an admission policy refuses, quoting
// its data: the error says which Secret and why in the refusal's reason
// alone, as every other write of a Secret does.
func TestDisownWithholdsASecretsRefusal(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "wiki", UID: "wiki-uid"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "db",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: capstanv1.GroupVersion.String(), Kind: "Addon", Name: "wiki", UID: "wiki-uid"}}}}
	c := fake.NewClientBuilder().WithScheme(hookTestScheme(t)).WithObjects(secret).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			return apierrors.NewForbidden(corev1.Resource("secrets"), "db", errors.New(`denied: data.password is "hunter2"`))
		},
	}).Build()
	live := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: secret.ObjectMeta}
	s := &scope{addon: addon, applier: &apply.Applier{Client: c}}
	err := (&AddonReconciler{}).disownObject(context.Background(), s, s.applier, live)
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "Secret team-a/db") || !apierrors.IsForbidden(err) {
		t.Errorf("disowning a Secret whose patch is refused: %v; want the Secret named, the refusal's reason alone, and the API status kept", err)
	}
}
