package controller

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
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

// TestMaskCacheBuildsAMaskOncePerValues: a reconcile of the same values
// (in any order) takes the mask the last one built; another add-on, or
// other values, get their own; the cache keeps no more than its bound.
func TestMaskCacheBuildsAMaskOncePerValues(t *testing.T) {
	var c maskCache
	a := c.masker("uid-a", []string{"hunter2-long", "s3cret-token"})
	if a == nil || !a.Holds("x hunter2-long") {
		t.Fatal("the cache's masker should hide the values")
	}
	if c.masker("uid-a", []string{"s3cret-token", "hunter2-long", "hunter2-long"}) != a {
		t.Error("the same values again should take the mask already built, not build another")
	}
	if c.masker("uid-b", []string{"hunter2-long", "s3cret-token"}) == a {
		t.Error("another add-on should have its own mask")
	}
	if b := c.masker("uid-a", []string{"hunter2-long", "an0ther-token"}); b == a || b.Holds("s3cret-token") {
		t.Error("other values should get a mask of their own")
	}
	var nilCache *maskCache
	if m := nilCache.masker("uid-a", []string{"hunter2-long"}); !m.Holds("hunter2-long") {
		t.Error("a nil cache should still build the mask")
	}

	// Masks of some 500 KiB each: the cache keeps at most maskCacheBytes
	// of them, the most recently used.
	big := func(n int) []string { return []string{fmt.Sprintf("%04d", n) + strings.Repeat("x", 8<<10)} }
	first := c.masker("uid-big", big(0))
	for n := 1; n < 250; n++ {
		c.masker("uid-big", big(n))
	}
	if c.size > maskCacheBytes {
		t.Errorf("the cache holds %d bytes, more than its %d", c.size, maskCacheBytes)
	}
	if c.masker("uid-big", big(0)) == first {
		t.Error("the least recently used mask should have gone to make room")
	}
	if c.masker("uid-big", big(249)) == nil || c.lru.Len() != len(c.byKey) {
		t.Error("the cache's list and map should agree")
	}
}
