package controller

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CleanShadowsAt deletes the shadow CRDs that owner's check, or the sweep
// when owner is empty, would delete at now, for the integration tests.
func CleanShadowsAt(ctx context.Context, c client.Client, owner string, now time.Time) {
	cleanShadows(ctx, c, owner, "", now)
}

// TestLeftBehind decides which labelled CRDs a check or the sweep deletes:
// a shadow of the add-on's own but the one in use, and anyone's once old,
// but never a CRD that only carries the label, however old or whoever it
// names.
func TestLeftBehind(t *testing.T) {
	const owner, other = "0123456789abcdef", "fedcba9876543210"
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	young, old := now.Add(-time.Minute), now.Add(-time.Hour)
	shadow := func(owner string, made time.Time) *apiextensionsv1.CustomResourceDefinition {
		sh, err := newShadow(crdOf(crdVersion{name: "v1", served: true, storage: true, size: "integer"}), owner)
		if err != nil {
			t.Fatal(err)
		}
		sh.CreationTimestamp = metav1.NewTime(made)
		return sh
	}
	labelled := func(group, owner string, made time.Time) *apiextensionsv1.CustomResourceDefinition {
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "certificates." + group,
			Labels: map[string]string{shadowLabel: owner}, CreationTimestamp: metav1.NewTime(made)},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: group,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "certificates", Kind: "Certificate"}}}
		return crd
	}
	deleting := shadow(other, old)
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	misnamed := shadow(other, old)
	misnamed.Name = "gadgets.example.com"
	for _, tc := range []struct {
		name       string
		crd        *apiextensionsv1.CustomResourceDefinition
		owner      string
		leftBehind bool
	}{
		{"an old shadow, by the sweep", shadow(other, old), "", true},
		{"an old shadow of another add-on", shadow(other, old), owner, true},
		{"a young shadow, by the sweep", shadow(other, young), "", false},
		{"a young shadow of another add-on", shadow(other, young), owner, false},
		{"a young shadow of the add-on's own", shadow(owner, young), owner, true},
		{"a shadow being deleted", deleting, "", false},
		{"a shadow not named for its group", misnamed, "", false},
		{"an old labelled CRD, by the sweep", labelled("cert-manager.io", other, old), "", false},
		{"a labelled CRD naming the add-on", labelled("cert-manager.io", owner, young), owner, false},
		{"a labelled CRD under the shadows' suffix, not their form", labelled("certs.crdcheck.capstan.dev", other, old), "", false},
		{"a labelled CRD ending like a shadow's group", labelled("c0123456789ab.crdcheck.capstan.dev.example.com", other, old), "", false},
		{"a shadow's group but an owner not of the form", labelled("c0123456789ab.crdcheck.capstan.dev", "me", old), "", false},
	} {
		if got := leftBehind(tc.crd, tc.owner, "", now); got != tc.leftBehind {
			t.Errorf("%s (%s, labelled %v): left behind %v; want %v", tc.name, tc.crd.Name, tc.crd.Labels, got, tc.leftBehind)
		}
	}
	keep := shadow(owner, young)
	if leftBehind(keep, owner, keep.Name, now) {
		t.Errorf("the shadow in use, %s, would be deleted", keep.Name)
	}
}
