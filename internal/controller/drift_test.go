package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

func TestDriftChanged(t *testing.T) {
	obj := func(rv string, gen int64, labels map[string]string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv, Generation: gen, Labels: labels}}
	}
	ours := map[string]string{capstanv1.AddonLabel: "web"}
	for _, tc := range []struct {
		name     string
		old, new *metav1.PartialObjectMetadata
		want     bool
	}{
		{"a resync of the informer", obj("5", 0, ours), obj("5", 0, ours), false},
		{"a ConfigMap edit", obj("5", 0, ours), obj("6", 0, ours), true},
		{"a Deployment's status update", obj("5", 2, ours), obj("6", 2, ours), false},
		{"a Deployment's spec edit", obj("5", 2, ours), obj("6", 3, ours), true},
		{"Capstan's label removed", obj("5", 2, ours), obj("6", 2, nil), true},
	} {
		if got := changed(tc.old, tc.new); got != tc.want {
			t.Errorf("%s: changed = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestDriftWanted(t *testing.T) {
	now := metav1.Now()
	stalled := []metav1.Condition{{Type: capstanv1.ConditionStalled, Status: metav1.ConditionTrue}}
	for _, tc := range []struct {
		name  string
		addon capstanv1.Addon
		want  bool
	}{
		{"synced", capstanv1.Addon{}, true},
		{"paused", capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{capstanv1.PausedAnnotation: "true"}}}, false},
		{"being deleted", capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}, false},
		{"a failed post hook waits", capstanv1.Addon{Status: capstanv1.AddonStatus{PendingHook: &capstanv1.PendingHook{Event: "post-install"}}}, false},
		{"stalled", capstanv1.Addon{Status: capstanv1.AddonStatus{Conditions: stalled}}, false},
	} {
		if got := driftWanted(&tc.addon); got != tc.want {
			t.Errorf("%s: driftWanted = %v, want %v", tc.name, got, tc.want)
		}
	}
}
