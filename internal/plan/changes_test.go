package plan

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestChangesWithinTheApprovedPlan: the retry of an approved sync that
// stopped half-way goes on only while it changes nothing its approver did
// not see. What ran shows as unchanged; a manifest that differs, an
// object new to the render (a CRD appeared that the chart's
// .Capabilities check reads), a drifted object the approved plan left
// alone, an object someone else made since, to adopt, or a delete of
// another object is a new plan. A delete of an object found gone changes
// nothing (a prune that ran before the sync stopped).
func TestChangesWithinTheApprovedPlan(t *testing.T) {
	cm := func(name string) capstanv1.ObjectRef {
		return capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: name}
	}
	obj := func(name, digest string, a capstanv1.Action) ObjectResult {
		return ObjectResult{Ref: cm(name), Comparison: Comparison{Action: a, Digest: digest}}
	}
	hook := HookResult{PlannedHook: capstanv1.PlannedHook{ObjectRef: capstanv1.ObjectRef{APIVersion: "batch/v1", Kind: "Job", Namespace: "apps", Name: "migrate"},
		Events: []string{"post-upgrade"}}, Digest: "h1"}
	uids := map[string]types.UID{cm("old").Key(): "uid-old", cm("other").Key(): "uid-other"}
	approved := Changes(Input{
		Objects: []ObjectResult{
			obj("a", "d-a", capstanv1.ActionCreate), obj("b", "d-b", capstanv1.ActionUpdate), obj("c", "d-c", capstanv1.ActionUnchanged),
		},
		Prune: []capstanv1.ObjectRef{cm("old")}, PruneUIDs: uids, Hooks: []HookResult{hook},
	})
	if len(approved) != 4 {
		t.Fatalf("approved changes %v; want 4: a, b, the prune and the hook", approved)
	}
	for _, tc := range []struct {
		name   string
		in     Input
		within bool
	}{
		{"nothing applied yet", Input{Objects: []ObjectResult{obj("a", "d-a", capstanv1.ActionCreate), obj("b", "d-b", capstanv1.ActionUpdate), obj("c", "d-c", capstanv1.ActionUnchanged)},
			Prune: []capstanv1.ObjectRef{cm("old")}, PruneUIDs: uids, Hooks: []HookResult{hook}}, true},
		{"what ran is unchanged, the prune and hook are left", Input{Objects: []ObjectResult{obj("a", "d-a", capstanv1.ActionUnchanged), obj("b", "d-b", capstanv1.ActionUnchanged), obj("c", "d-c", capstanv1.ActionUnchanged)},
			Prune: []capstanv1.ObjectRef{cm("old")}, PruneUIDs: uids, Hooks: []HookResult{hook}}, true},
		{"an approved create someone else made since, to adopt", Input{Objects: []ObjectResult{{Ref: cm("a"), Comparison: Comparison{Action: capstanv1.ActionUpdate, Digest: "change-a"}, Adopted: true}}}, false},
		{"a prune that ran, found gone", Input{Prune: []capstanv1.ObjectRef{cm("old")}}, true},
		{"a confirmed prune that ran, found gone", Input{Confirm: []capstanv1.ObjectRef{cm("old")}, Prune: []capstanv1.ObjectRef{cm("old")}}, true},
		{"a delete of another object found gone", Input{Prune: []capstanv1.ObjectRef{cm("other")}}, true},
		{"everything ran", Input{Objects: []ObjectResult{obj("a", "d-a", capstanv1.ActionUnchanged)}}, true},
		{"a manifest that differs", Input{Objects: []ObjectResult{obj("a", "d-a", capstanv1.ActionUnchanged), obj("b", "d-b2", capstanv1.ActionUpdate)}}, false},
		{"an object new to the render", Input{Objects: []ObjectResult{obj("a", "d-a", capstanv1.ActionUnchanged), obj("cr", "d-cr", capstanv1.ActionCreate)}}, false},
		{"an object left alone that drifted", Input{Objects: []ObjectResult{obj("a", "d-a", capstanv1.ActionUnchanged), obj("c", "d-c", capstanv1.ActionUpdate)}}, false},
		{"an object to adopt", Input{Objects: []ObjectResult{{Ref: cm("c"), Comparison: Comparison{Action: capstanv1.ActionUnchanged, Digest: "d-c"}, Adopted: true}}}, false},
		{"a delete of another object", Input{Prune: []capstanv1.ObjectRef{cm("other")}, PruneUIDs: uids}, false},
		{"a delete of another object under the approved name", Input{Prune: []capstanv1.ObjectRef{cm("old")}, PruneUIDs: map[string]types.UID{cm("old").Key(): "uid-new"}}, false},
		{"another hook", Input{Hooks: []HookResult{{PlannedHook: hook.PlannedHook, Digest: "h2"}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Within(Changes(tc.in), approved); got != tc.within {
				t.Errorf("Within = %v; want %v", got, tc.within)
			}
		})
	}
	if Within(Changes(Input{Objects: []ObjectResult{obj("a", "d-a", capstanv1.ActionCreate)}}), nil) {
		t.Error("a change is within a record that holds none (one written before changes were recorded)")
	}
}

// TestChangesOfARecreateStoppedHalfWay: a recreate approved is deleted,
// then created; a sync stopped between the two plans a Create on its
// retry, which is the change approved, while another manifest's Create,
// or a recreate of another object under the name, is not.
func TestChangesOfARecreateStoppedHalfWay(t *testing.T) {
	job := capstanv1.ObjectRef{APIVersion: "batch/v1", Kind: "Job", Namespace: "apps", Name: "migrate"}
	create := func(digest string) ObjectResult {
		return ObjectResult{Ref: job, Comparison: Comparison{Action: capstanv1.ActionCreate, Digest: digest}}
	}
	recreate := ObjectResult{Ref: job, Comparison: Comparison{Action: capstanv1.ActionUpdate, Digest: "m-job"}, Recreate: true, RecreateUID: "uid-1"}
	after := create("c-job")
	recreate.AfterDelete = &after
	approved := Changes(Input{Objects: []ObjectResult{recreate}})
	for _, tc := range []struct {
		name   string
		in     Input
		within bool
	}{
		{"nothing ran yet", Input{Objects: []ObjectResult{recreate}}, true},
		{"the delete ran, the create did not", Input{Objects: []ObjectResult{create("c-job")}}, true},
		{"another manifest's create", Input{Objects: []ObjectResult{create("c-other")}}, false},
		{"a recreate of another object under the name", Input{Objects: []ObjectResult{{Ref: job, Comparison: recreate.Comparison, Recreate: true, RecreateUID: "uid-2", AfterDelete: &after}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Within(Changes(tc.in), approved); got != tc.within {
				t.Errorf("Within = %v; want %v", got, tc.within)
			}
		})
	}
}
