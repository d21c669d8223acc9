package apply

import (
	"fmt"
	"slices"
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// chartInventory is what a chart with eight CRDs in crds/, eight
// Deployments and a Namespace applied.
func chartInventory() (crds, deployments []capstanv1.ObjectRef, namespace capstanv1.ObjectRef) {
	for i := range 8 {
		crds = append(crds, capstanv1.ObjectRef{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition", Name: fmt.Sprintf("widget%d.example.com", i)})
		deployments = append(deployments, capstanv1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "apps", Name: fmt.Sprintf("worker-%d", i)})
	}
	return crds, deployments, capstanv1.ObjectRef{APIVersion: "v1", Kind: "Namespace", Name: "apps"}
}

// TestPruneSetOfARenderWithNothingDeletable prunes nothing when the render
// keeps only kinds Capstan never deletes: a chart's crds/ render whatever
// its values say, so templates emptied by a values mistake leave exactly
// that, and it is no more a wish to delete everything than an empty
// render is.
func TestPruneSetOfARenderWithNothingDeletable(t *testing.T) {
	crds, deployments, namespace := chartInventory()
	inventory := slices.Concat(crds, deployments, []capstanv1.ObjectRef{namespace})
	for _, tc := range []struct {
		name     string
		rendered []capstanv1.ObjectRef
		want     int
	}{
		{name: "nothing rendered", rendered: nil, want: 0},
		{name: "only the CRDs rendered", rendered: crds, want: 0},
		{name: "only the CRDs and the Namespace rendered", rendered: slices.Concat(crds, []capstanv1.ObjectRef{namespace}), want: 0},
		{name: "the CRDs and two Deployments rendered", rendered: slices.Concat(crds, deployments[:2]), want: 6},
		{name: "two Deployments rendered", rendered: deployments[:2], want: 6},
	} {
		got := PruneSet(inventory, tc.rendered)
		if len(got) != tc.want {
			t.Errorf("%s: the prune deletes %v, want %d objects", tc.name, got, tc.want)
		}
		for _, r := range got {
			if !Deletable(r) {
				t.Errorf("%s: the prune deletes %s, of a kind never deleted", tc.name, r.Describe())
			}
		}
	}
}

// TestReleasedOfARenderWithNothingDeletable: what of a kind never deleted
// the render no longer has leaves the inventory, but a render with
// nothing of a kind Capstan deletes releases nothing, as it prunes
// nothing.
func TestReleasedOfARenderWithNothingDeletable(t *testing.T) {
	crds, deployments, namespace := chartInventory()
	inventory := slices.Concat(crds, deployments, []capstanv1.ObjectRef{namespace})
	for _, tc := range []struct {
		name     string
		rendered []capstanv1.ObjectRef
		want     int
	}{
		{name: "nothing rendered", rendered: nil, want: 0},
		{name: "only the Namespace rendered", rendered: []capstanv1.ObjectRef{namespace}, want: 0},
		{name: "everything rendered", rendered: inventory, want: 0},
		{name: "the Deployments and the Namespace rendered", rendered: slices.Concat(deployments, []capstanv1.ObjectRef{namespace}), want: len(crds)},
		{name: "one Deployment rendered", rendered: deployments[:1], want: len(crds) + 1},
	} {
		got := Released(inventory, tc.rendered)
		if len(got) != tc.want {
			t.Errorf("%s: released %v, want %d objects", tc.name, got, tc.want)
		}
		for _, r := range got {
			if Deletable(r) {
				t.Errorf("%s: released %s, of a kind a prune deletes", tc.name, r.Describe())
			}
		}
	}
}

// TestReleasedOfAnAddonOfOnlyNeverDeleteKinds: an add-on that never
// rendered a kind Capstan deletes (a folder of CRDs) lets go of the ones
// it stops rendering, so that another add-on can take them; an empty
// render still releases nothing.
func TestReleasedOfAnAddonOfOnlyNeverDeleteKinds(t *testing.T) {
	crds, _, namespace := chartInventory()
	if len(crds) < 3 {
		t.Fatalf("chartInventory has %d CRDs; the test needs 3", len(crds))
	}
	inventory := crds[:3]
	for _, tc := range []struct {
		name                string
		inventory, rendered []capstanv1.ObjectRef
		want                int
	}{
		{name: "2 of 3 CRDs rendered", inventory: inventory, rendered: crds[:2], want: 1},
		{name: "all 3 CRDs rendered", inventory: inventory, rendered: inventory, want: 0},
		{name: "nothing rendered", inventory: inventory, rendered: nil, want: 0},
		{name: "a Namespace instead", inventory: []capstanv1.ObjectRef{namespace}, rendered: crds[:1], want: 1},
	} {
		got := Released(tc.inventory, tc.rendered)
		if len(got) != tc.want {
			t.Errorf("%s: released %v, want %d objects", tc.name, got, tc.want)
		}
		for _, r := range got {
			if Deletable(r) {
				t.Errorf("%s: released %s, of a kind a prune deletes", tc.name, r.Describe())
			}
		}
	}
}
