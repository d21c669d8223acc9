package controller

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestMaskerHidesInErrorsAndPlans: the controller's masker over
// internal/mask hides values in errors, still wrapping them, and in the
// free text of a plan; a nil one hides nothing.
func TestMaskerHidesInErrorsAndPlans(t *testing.T) {
	m := newMasker([]string{"hunter2-long", "hunter2"})
	if newMasker([]string{"1", "true", "no"}) != nil {
		t.Error("a masker of only short values and booleans should be nil, hiding nothing")
	}
	var none *masker
	if none.String("hunter2") != "hunter2" || none.Holds("hunter2") || none.holder() != nil || none.Error(fs.ErrNotExist) != fs.ErrNotExist {
		t.Error("a nil masker should hide nothing")
	}

	err := m.Error(fmt.Errorf("refused hunter2-long: %w", fs.ErrPermission))
	if err.Error() != "refused (hidden): permission denied" || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("Error = %q (Is ErrPermission: %v); want the message hidden and the error still wrapped", err, errors.Is(err, fs.ErrPermission))
	}

	st := &capstanv1.AddonStatus{
		Conditions: []metav1.Condition{{Type: "Ready", Message: "refused hunter2"}},
		Plan: &capstanv1.Plan{
			Objects:      []capstanv1.PlannedObject{{ObjectRef: capstanv1.ObjectRef{Kind: "ConfigMap", Name: "hunter2"}, Diff: "+ x: hunter2", Error: "bad hunter2"}},
			Violations:   []capstanv1.Violation{{Message: "hunter2 breaks"}},
			ValuesErrors: []capstanv1.ValuesError{{Message: "hunter2 too short"}},
			Notices:      []capstanv1.Notice{{Message: "saw hunter2"}},
		},
	}
	st.Conditions[0].Message = m.String(st.Conditions[0].Message)
	m.Plan(st.Plan)
	p := st.Plan
	for _, got := range []string{st.Conditions[0].Message, p.Objects[0].Diff, p.Objects[0].Error, p.Violations[0].Message, p.ValuesErrors[0].Message, p.Notices[0].Message} {
		if m.Holds(got) {
			t.Errorf("%q still holds a value", got)
		}
	}
	if p.Objects[0].Name != "hunter2" {
		t.Errorf("the object's name became %q; names stay, the controller finds objects by them", p.Objects[0].Name)
	}
}
