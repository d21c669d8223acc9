package apply

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestNotOurs takes an object for an add-on's own only when its owner
// labels name the add-on, or when, with no other add-on's labels, Capstan's
// field manager applied fields of it: never for being in the inventory.
func TestNotOurs(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ops"}}
	applied := metav1.ManagedFieldsEntry{Manager: capstanv1.FieldManager, Operation: metav1.ManagedFieldsOperationApply}
	labelsOnly := metav1.ManagedFieldsEntry{Manager: capstanv1.OwnerLabelsManager, Operation: metav1.ManagedFieldsOperationApply}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		fields []metav1.ManagedFieldsEntry
		want   string // a part of the reason; "" for the add-on's own
	}{
		{name: "labelled for it", labels: addon.AppliedLabels(), fields: []metav1.ManagedFieldsEntry{applied}},
		{name: "adopted: its owner labels alone", labels: addon.OwnerLabels(), fields: []metav1.ManagedFieldsEntry{labelsOnly}},
		{name: "applied, labels removed since", fields: []metav1.ManagedFieldsEntry{{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate}, applied}},
		{name: "someone else's, no labels", fields: []metav1.ManagedFieldsEntry{{Manager: "kubectl-create", Operation: metav1.ManagedFieldsOperationUpdate}}, want: "did not create it"},
		{name: "Capstan's plain write, not its apply", fields: []metav1.ManagedFieldsEntry{{Manager: capstanv1.FieldManager, Operation: metav1.ManagedFieldsOperationUpdate}}, want: "did not create it"},
		{name: "another add-on's", labels: map[string]string{capstanv1.AddonLabel: "b", capstanv1.AddonNamespaceLabel: "ops"}, fields: []metav1.ManagedFieldsEntry{applied}, want: "name another Addon"},
		{name: "same name, another namespace", labels: map[string]string{capstanv1.AddonLabel: "a", capstanv1.AddonNamespaceLabel: "tenant"}, fields: []metav1.ManagedFieldsEntry{applied}, want: "name another Addon"},
		{name: "half the labels", labels: map[string]string{capstanv1.AddonLabel: "a"}, fields: []metav1.ManagedFieldsEntry{applied}, want: "name another Addon"},
		{name: "managed-by alone", labels: map[string]string{capstanv1.ManagedByLabel: "capstan"}, want: "did not create it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &metav1.ObjectMeta{Name: "x", Namespace: "apps", Labels: tc.labels, ManagedFields: tc.fields}
			got := NotOurs(addon, obj)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("NotOurs = %q, want %q", got, tc.want)
			}
		})
	}
}
