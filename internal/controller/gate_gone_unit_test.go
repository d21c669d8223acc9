package controller

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/plan"
)

// TestMassPruneSharesOfWhatStillRuns: objects the preview found gone are
// no delete, and no part of the inventory a prune's share is taken of
// either. Of ten, six deleted by hand and a render that lost all ten, the
// four still running are everything left: the mass-prune gate holds it.
func TestMassPruneSharesOfWhatStillRuns(t *testing.T) {
	var prune []capstanv1.ObjectRef
	uids := map[string]types.UID{}
	for i := range 10 {
		ref := capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: fmt.Sprintf("cm%d", i)}
		prune = append(prune, ref)
		if i < 4 {
			uids[ref.Key()] = types.UID(fmt.Sprintf("uid-%d", i))
		}
	}
	a := &capstanv1.Addon{}
	a.Name, a.Namespace = "web", "apps"
	a.Status.Inventory = capstanv1.IDsOf(prune)
	s := &scope{addon: a, prune: prune, pruneUIDs: uids}
	p := plan.Build(plan.Input{Prune: prune, PruneUIDs: uids})
	r := &AddonReconciler{}
	r.Config.PruneApprovalThreshold = 0.5
	st := r.gateState(s, p, nil)
	if st.Inventory != 4 || p.Summary.Delete != 4 {
		t.Fatalf("inventory %d, deletes %d; want 4 of 4 still running", st.Inventory, p.Summary.Delete)
	}
	if v, held := plan.MassPrune(st); !held || v.Reason != plan.ReasonPruneApproval {
		t.Errorf("a plan deleting all 4 objects still running: held %v %+v; want the mass-prune gate to hold it", held, v)
	}
}
