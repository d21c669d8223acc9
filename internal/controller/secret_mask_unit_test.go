package controller

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/mask"
	"capstan.dev/capstan/internal/values"
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
			Workloads:    []capstanv1.Workload{{Kind: "Deployment", Name: "app", Images: []string{"nginx:1.27", "registry.example.com/hunter2-long/app:1.0"}}},
			Source:       capstanv1.PlanSource{URL: "https://charts.example.com/hunter2/app-1.0.0.tgz"},
		},
	}
	st.Conditions[0].Message = m.String(st.Conditions[0].Message)
	m.Plan(st.Plan)
	p := st.Plan
	for _, got := range []string{st.Conditions[0].Message, p.Objects[0].Diff, p.Objects[0].Error, p.Violations[0].Message, p.ValuesErrors[0].Message, p.Notices[0].Message,
		p.Workloads[0].Images[1], p.Source.URL} {
		if m.Holds(got) {
			t.Errorf("%q still holds a value", got)
		}
	}
	if got := p.Workloads[0].Images[1]; got != "registry.example.com/(hidden)/app:1.0" {
		t.Errorf("the workload's image is %q; want the value hidden in it, as the Deployment's diff hides it", got)
	}
	if p.Workloads[0].Images[0] != "nginx:1.27" {
		t.Errorf("an image without a value became %q", p.Workloads[0].Images[0])
	}
	if p.Objects[0].Name != "hunter2" {
		t.Errorf("the object's name became %q; names stay, the controller finds objects by them", p.Objects[0].Name)
	}
}

// TestMaskCacheBuildsAMaskOncePerValues: a reconcile of the same values
// (in any order) takes the mask the last one built; another add-on, or
// other values, get their own, which takes the place of the add-on's
// former one; forget drops an add-on's mask; the cache keeps no more than
// its bound, and no mask larger than its share.
func TestMaskCacheBuildsAMaskOncePerValues(t *testing.T) {
	var c maskCache
	addonA, addonB := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	a := c.masker(addonA, "uid-a", []string{"hunter2-long", "s3cret-token"})
	if a == nil || !a.Holds("x hunter2-long") {
		t.Fatal("the cache's masker should hide the values")
	}
	if c.masker(addonA, "uid-a", []string{"s3cret-token", "hunter2-long", "hunter2-long"}) != a {
		t.Error("the same values again should take the mask already built, not build another")
	}
	if c.masker(addonB, "uid-b", []string{"hunter2-long", "s3cret-token"}) == a {
		t.Error("another add-on should have its own mask")
	}
	if b := c.masker(addonA, "uid-a", []string{"hunter2-long", "an0ther-token"}); b == a || b.Holds("s3cret-token") {
		t.Error("other values should get a mask of their own")
	}
	if c.lru.Len() != 2 || c.masker(addonA, "uid-a", []string{"hunter2-long", "s3cret-token"}) == a {
		t.Errorf("the cache keeps %d masks of 2 add-ons; want one an add-on, the last built", c.lru.Len())
	}
	if c.masker(addonA, "uid-a2", []string{"hunter2-long", "s3cret-token"}) == c.masker(addonA, "uid-a", []string{"hunter2-long", "s3cret-token"}) {
		t.Error("an Addon made again under the same name should not take the mask of the former one")
	}
	c.forget(addonA)
	c.forget(addonB)
	if c.lru.Len() != 0 || len(c.byAddon) != 0 || c.size != 0 {
		t.Errorf("after forget the cache keeps %d masks (%d bytes); want none", c.lru.Len(), c.size)
	}
	var nilCache *maskCache
	if m := nilCache.masker(addonA, "uid-a", []string{"hunter2-long"}); !m.Holds("hunter2-long") {
		t.Error("a nil cache should still build the mask")
	}
	nilCache.forget(addonA)

	// Masks of some 500 KiB each: the cache keeps at most maskCacheBytes
	// of them, the most recently used.
	big := func(n int) []string { return []string{fmt.Sprintf("%04d", n) + strings.Repeat("x", 8<<10)} }
	addon := func(n int) types.NamespacedName {
		return types.NamespacedName{Namespace: "ns", Name: fmt.Sprint("big-", n)}
	}
	first := c.masker(addon(0), "uid-big", big(0))
	for n := 1; n < 250; n++ {
		c.masker(addon(n), "uid-big", big(n))
	}
	if c.size > maskCacheBytes {
		t.Errorf("the cache holds %d bytes, more than its %d", c.size, maskCacheBytes)
	}
	if c.masker(addon(0), "uid-big", big(0)) == first {
		t.Error("the least recently used mask should have gone to make room")
	}
	if c.masker(addon(249), "uid-big", big(249)) == nil || c.lru.Len() != len(c.byAddon) {
		t.Error("the cache's list and map should agree")
	}
}

// TestMaskCacheDropsTheOldMaskWhenTheNewIsNotKept: an Addon whose secret
// values change to none worth hiding, or to a set whose mask is too large
// to keep, no longer has the mask of its old values kept.
func TestMaskCacheDropsTheOldMaskWhenTheNewIsNotKept(t *testing.T) {
	var huge []string
	for n := range values.MaxSecretValues {
		huge = append(huge, fmt.Sprintf("%04x", n)+strings.Repeat("\x01\x02\x7f", 20))
	}
	for name, rotated := range map[string][]string{"no mask": {"1", "true"}, "too large": huge} {
		var c maskCache
		addon := types.NamespacedName{Namespace: "ns", Name: "wiki"}
		c.masker(addon, "uid", []string{"hunter2-long"})
		if c.lru.Len() != 1 {
			t.Fatalf("%s: the cache keeps %d masks; want the first", name, c.lru.Len())
		}
		c.masker(addon, "uid", rotated)
		if c.lru.Len() != 0 || c.size != 0 || len(c.byAddon) != 0 {
			t.Errorf("%s: after the values rotated, the cache keeps %d masks (%d bytes); want the old one dropped", name, c.lru.Len(), c.size)
		}
	}
}

// TestMaskCacheKeepsNoMaskLargerThanItsShare: a mask larger than a third
// of the cache, of one add-on at the bound with values whose forms are
// long, is built but not kept, so it does not push the other add-ons'
// masks out on every reconcile.
func TestMaskCacheKeepsNoMaskLargerThanItsShare(t *testing.T) {
	var c maskCache
	small := types.NamespacedName{Namespace: "ns", Name: "small"}
	kept := c.masker(small, "uid-small", []string{"hunter2-long"})
	// NOTE: control characters: each is 4 bytes quoted, 6 in JSON.
	var huge []string
	for n := range values.MaxSecretValues {
		huge = append(huge, fmt.Sprintf("%04x", n)+strings.Repeat("\x01\x02\x7f", 20))
	}
	m := c.masker(types.NamespacedName{Namespace: "ns", Name: "huge"}, "uid-huge", huge)
	if size := (*mask.Mask)(m).Size(); size <= maskCacheBytes/3 || size >= maskCacheBytes {
		t.Fatalf("the test's mask takes %d bytes; want more than a third of the cache's %d and less than all", size, maskCacheBytes)
	}
	if !m.Holds(huge[7]) {
		t.Error("the mask should still be built and hide the values")
	}
	if c.lru.Len() != 1 || c.masker(small, "uid-small", []string{"hunter2-long"}) != kept {
		t.Errorf("the cache keeps %d masks; want only the small add-on's, as it was", c.lru.Len())
	}
}
