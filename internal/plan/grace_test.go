package plan

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestDryRunGraceLastsForLooksAndTime: a dry run the API server could
// not take counts as refused only once it failed on GraceTries looks in a
// row and for GraceFor; an answer, an add-on created anew, or the add-on
// forgotten start afresh.
func TestDryRunGraceLastsForLooksAndTime(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "web", UID: "u1"}}
	other := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "db", UID: "u2"}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const key = "v1/ConfigMap/apps/settings"
	var g DryRunGrace

	// Fast backoff: many looks within a second are not enough.
	for i := range 10 {
		if g.Lasted(addon, key, t0.Add(time.Duration(i)*50*time.Millisecond)) {
			t.Fatalf("look %d, within a second, counted as refused", i+1)
		}
	}
	if !g.Lasted(addon, key, t0.Add(GraceFor)) {
		t.Fatal("failing for GraceFor on many looks did not count as refused")
	}
	if first, tries := g.Since(addon, key); !first.Equal(t0) || tries != 11 {
		t.Errorf("Since = %v, %d; want %v, 11", first, tries, t0)
	}
	// Another add-on's object of the same key has its own count.
	if g.Lasted(other, key, t0.Add(GraceFor)) {
		t.Error("another add-on's first failure counted as refused")
	}

	// Two looks over a long time are not enough either.
	g.Passed(addon, key)
	g.Lasted(addon, key, t0)
	if g.Lasted(addon, key, t0.Add(10*time.Minute)) {
		t.Error("two looks counted as refused")
	}
	if !g.Lasted(addon, key, t0.Add(11*time.Minute)) {
		t.Error("a third look after GraceFor did not count as refused")
	}

	// The same name with a new UID is another add-on.
	renewed := addon.DeepCopy()
	renewed.UID = "u3"
	if g.Lasted(renewed, key, t0.Add(12*time.Minute)) {
		t.Error("an add-on created anew inherited the count of the one before")
	}

	g.Forget(types.NamespacedName{Namespace: "capstan-system", Name: "web"})
	if _, tries := g.Since(renewed, key); tries != 0 {
		t.Errorf("tries after Forget = %d; want 0", tries)
	}
	if _, tries := g.Since(other, key); tries != 1 {
		t.Errorf("Forget of one add-on dropped another's count: %d", tries)
	}

	var none *DryRunGrace
	if none.Lasted(addon, key, t0.Add(time.Hour)) {
		t.Error("a nil grace counted a dry run as refused")
	}
}

// TestDryRunGraceIsBounded: past graceMax objects, a new failure has no
// grace, and the memory does not grow.
func TestDryRunGraceIsBounded(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "web", UID: "u1"}}
	var g DryRunGrace
	now := time.Now()
	for i := range graceMax {
		if g.Lasted(addon, "v1/ConfigMap/apps/c"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+time.Duration(i).String(), now) {
			t.Fatalf("failure %d counted as refused before the memory was full", i)
		}
	}
	if !g.Lasted(addon, "v1/ConfigMap/apps/one-more", now) {
		t.Error("a failure past the bound was given a grace")
	}
	if len(g.failed) > graceMax {
		t.Errorf("memory holds %d objects; want at most %d", len(g.failed), graceMax)
	}
}

// TestPreviewRecordsADryRunThatGoesOnFailing: a server-side apply the API
// server refuses with a bare 500 (two list entries of one key) is retried
// while the grace lasts, then recorded as the object's refusal, which
// stalls the add-on; an answer in between starts the count afresh.
func TestPreviewRecordsADryRunThatGoesOnFailing(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "web", UID: "u1"}}
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("v1")
	obj.SetKind("ConfigMap")
	obj.SetNamespace("apps")
	obj.SetName("settings")
	key := capstanv1.RefOf(obj).Key()
	dup := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonUnknown,
		Message: `failed to create typed patch object (apps/settings; /v1, Kind=ConfigMap): .spec.ports: duplicate entries for key [name="http"]`}}
	c := &countingCluster{live: map[string]*unstructured.Unstructured{}, dryRunErr: map[string]error{key: dup}}
	var g DryRunGrace
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	look := func(at time.Duration) (*Preview, error) {
		return PreviewObjects(context.Background(), c, PreviewInput{Addon: addon, Objects: []*unstructured.Unstructured{obj}, Now: t0.Add(at), Grace: &g})
	}
	for _, at := range []time.Duration{0, time.Second, time.Minute} {
		var dre *DryRunError
		if _, err := look(at); !errors.As(err, &dre) {
			t.Fatalf("look at %v: %v; want a DryRunError to retry", at, err)
		}
	}
	// An answer ends the streak.
	delete(c.dryRunErr, key)
	if _, err := look(90 * time.Second); err != nil {
		t.Fatalf("look with an answer: %v", err)
	}
	c.dryRunErr[key] = dup
	for _, at := range []time.Duration{2 * time.Minute, 2*time.Minute + 10*time.Second, 2*time.Minute + 20*time.Second} {
		var dre *DryRunError
		if _, err := look(at); !errors.As(err, &dre) {
			t.Fatalf("look at %v, after an answer: %v; want a DryRunError to retry", at, err)
		}
	}
	p, err := look(2*time.Minute + GraceFor)
	if err != nil {
		t.Fatalf("PreviewObjects after the grace: %v; want the refusal in the plan", err)
	}
	if len(p.Objects) != 1 || !strings.Contains(p.Objects[0].Error, "duplicate entries") || !strings.Contains(p.Objects[0].Error, "4 looks in a row") {
		t.Fatalf("objects %+v; want the refusal recorded, saying how long it lasted", p.Objects)
	}
}
