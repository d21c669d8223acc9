package apply

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestHandedOver takes from former deployers only the fields Capstan owns
// too, drops an entry left with none, and leaves every other manager and
// every subresource's entry as it is.
func TestHandedOver(t *testing.T) {
	fields := func(s string) *metav1.FieldsV1 { return metav1.NewFieldsV1(s) }
	owned, err := fieldSet(fields(`{"f:data":{"f:a":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	entries := []metav1.ManagedFieldsEntry{
		{Manager: "helm", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: fields(`{"f:data":{".":{},"f:a":{},"f:b":{}}}`)},
		{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: fields(`{"f:data":{"f:a":{}}}`)},
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: fields(`{"f:data":{"f:a":{}}}`)},
		{Manager: "helm", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsV1: fields(`{"f:data":{"f:a":{}}}`)},
		{Manager: "helmsman", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: fields(`{"f:data":{"f:a":{}}}`)},
		{Manager: capstanv1.FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: fields(`{"f:data":{"f:a":{}}}`)},
	}
	out, changed, err := handedOver(entries, owned, false, "v1")
	if err != nil || !changed {
		t.Fatalf("handedOver = changed %v, %v; want a change", changed, err)
	}
	var got []string
	for _, e := range out {
		got = append(got, e.Manager+"/"+e.Subresource+" "+e.FieldsV1.GetRawString())
	}
	want := []string{
		`helm/ {"f:data":{".":{},"f:b":{}}}`,
		`kube-controller-manager/ {"f:data":{"f:a":{}}}`,
		`helm/status {"f:data":{"f:a":{}}}`,
		`helmsman/ {"f:data":{"f:a":{}}}`,
		`capstan/ {"f:data":{"f:a":{}}}`,
	}
	if len(got) != len(want) {
		t.Fatalf("entries = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %s, want %s", i, got[i], want[i])
		}
	}
	// Nothing shared: nothing to write.
	if _, changed, err := handedOver(out, owned, false, "v1"); err != nil || changed {
		t.Errorf("a second hand-over = changed %v, %v; want none", changed, err)
	}
	// A claim adds Capstan's applied entry where there is none.
	claimed, changed, err := handedOver(entries[:1], owned, true, "v1")
	if err != nil || !changed || len(claimed) != 2 || claimed[1].Manager != capstanv1.FieldManager ||
		claimed[1].Operation != metav1.ManagedFieldsOperationApply || claimed[1].FieldsV1.GetRawString() != `{"f:data":{"f:a":{}}}` {
		t.Errorf("a claim = %+v, changed %v, %v", claimed, changed, err)
	}
}

// TestAdoptedOnly tells an object adopted without a change, whose fields
// the adoption claimed, from one Capstan applied since, or whose labels
// someone removed.
func TestAdoptedOnly(t *testing.T) {
	owner := metav1.ManagedFieldsEntry{Manager: capstanv1.OwnerLabelsManager, Operation: metav1.ManagedFieldsOperationApply,
		FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{"f:capstan.dev/addon":{},"f:capstan.dev/addon-namespace":{}}}}`)}
	claimed := metav1.ManagedFieldsEntry{Manager: capstanv1.FieldManager, Operation: metav1.ManagedFieldsOperationApply,
		FieldsV1: metav1.NewFieldsV1(`{"f:data":{"f:a":{}}}`)}
	applied := metav1.ManagedFieldsEntry{Manager: capstanv1.FieldManager, Operation: metav1.ManagedFieldsOperationApply,
		FieldsV1: metav1.NewFieldsV1(`{"f:data":{"f:a":{}},"f:metadata":{"f:labels":{"f:capstan.dev/addon":{}}}}`)}
	for _, tc := range []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    bool
	}{
		{"adopted, fields claimed", []metav1.ManagedFieldsEntry{owner, claimed}, true},
		{"adopted, nothing claimed", []metav1.ManagedFieldsEntry{owner}, true},
		{"adopted, applied since", []metav1.ManagedFieldsEntry{owner, applied}, false},
		{"applied, labels removed", []metav1.ManagedFieldsEntry{claimed}, false},
		{"adopted, labels removed", []metav1.ManagedFieldsEntry{{Manager: capstanv1.OwnerLabelsManager, Operation: metav1.ManagedFieldsOperationApply}, claimed}, false},
	} {
		obj := &unstructured.Unstructured{Object: map[string]any{}}
		obj.SetManagedFields(tc.entries)
		if got := AdoptedOnly(obj); got != tc.want {
			t.Errorf("%s: AdoptedOnly = %v, want %v", tc.name, got, tc.want)
		}
	}
}
