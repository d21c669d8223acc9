package apply

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestPruneDeletesOnlyThePlannedUID prunes three ConfigMaps the plan read:
// "legacy" with the UID it has now, "renewed" with another (deleted and
// created anew under its name since), and "returned", which the plan found
// gone. Only legacy is deleted; the other two were never shown as a delete,
// and are held, running and in the inventory, for the next plan to show.
func TestPruneDeletesOnlyThePlannedUID(t *testing.T) {
	cm := func(name string) capstanv1.ObjectRef {
		return capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: name}
	}
	rec := &deleteRecorder{annotations: map[string]map[string]string{"legacy": nil, "renewed": nil, "returned": nil}}
	planned := map[string]types.UID{cm("legacy").Key(): "uid-legacy", cm("renewed").Key(): "uid-seen-by-the-plan"}
	out, err := (&Applier{Client: rec}).DeleteAll(context.Background(), []capstanv1.ObjectRef{cm("legacy"), cm("renewed"), cm("returned")},
		Deleting{Keep: Pruning, Confirming: true, Planned: planned})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rec.log, []string{"delete legacy"}) {
		t.Errorf("deletes: %v; want only legacy's, the UID the plan read", rec.log)
	}
	if !slices.Equal(out.Done, []capstanv1.ObjectRef{cm("legacy")}) || !slices.Equal(out.Held, []capstanv1.ObjectRef{cm("renewed"), cm("returned")}) || out.Requests != 1 {
		t.Errorf("done %v, held %v, requests %d; want legacy done, renewed and returned held, 1 request", out.Done, out.Held, out.Requests)
	}
}
