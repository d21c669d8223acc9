package controller

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

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

func TestDriftOwners(t *testing.T) {
	obj := func(ns, name string) *metav1.PartialObjectMetadata {
		l := map[string]string{}
		if name != "" {
			l[capstanv1.AddonLabel], l[capstanv1.AddonNamespaceLabel] = name, ns
		}
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Labels: l}}
	}
	web := types.NamespacedName{Namespace: "apps", Name: "web"}
	db := types.NamespacedName{Namespace: "apps", Name: "db"}
	for _, tc := range []struct {
		name string
		objs []any
		want []types.NamespacedName
	}{
		{"one owner", []any{obj("apps", "web"), obj("apps", "web")}, []types.NamespacedName{web}},
		{"relabelled: both hear of it", []any{obj("apps", "web"), obj("apps", "db")}, []types.NamespacedName{web, db}},
		{"labels removed: the old owner", []any{obj("apps", "web"), obj("", "")}, []types.NamespacedName{web}},
		{"never Capstan's", []any{obj("", "")}, nil},
	} {
		if got := owners(tc.objs...); !slices.Equal(got, tc.want) {
			t.Errorf("%s: owners = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestDriftPacer checks that an object whose drift keeps coming back is
// undone ever more slowly, up to MaxDelay, counting the undos in a row; that
// a quiet spell starts again; and that other objects are not slowed down.
func TestDriftPacer(t *testing.T) {
	addon := types.NamespacedName{Namespace: "apps", Name: "web"}
	p := &driftPacer{Delay: 5 * time.Second, MaxDelay: time.Minute}
	cm := []string{"/ConfigMap/apps/web-config"}
	now := time.Unix(1_000_000, 0)
	// The rival re-drifts 1 s after each undo; the reconcile comes back
	// when it is told to wait.
	var undos []time.Time
	var counts []int
	for len(undos) < 6 {
		wait, times := p.undo(addon, cm, now)
		if wait > 0 {
			now = now.Add(wait)
			continue
		}
		undos = append(undos, now)
		counts = append(counts, times)
		now = now.Add(time.Second)
	}
	var gaps []time.Duration
	for i := 1; i < len(undos); i++ {
		gaps = append(gaps, undos[i].Sub(undos[i-1]))
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute}
	if !slices.Equal(gaps, want) {
		t.Errorf("gaps between undos %v, want %v", gaps, want)
	}
	if !slices.Equal(counts, []int{1, 2, 3, 4, 5, 6}) {
		t.Errorf("undos in a row %v", counts)
	}
	if wait, _ := p.undo(addon, []string{"/Service/apps/web"}, now); wait != 0 {
		t.Errorf("another object waits %s: only the fought one slows down", wait)
	}
	if wait, times := p.undo(addon, cm, now.Add(3*time.Minute)); wait != 0 || times != 1 {
		t.Errorf("after a quiet spell: wait %s, times %d; want 0 and 1", wait, times)
	}
	p.forget(addon)
	if len(p.history) != 0 {
		t.Errorf("forget left %v", p.history)
	}
}

// TestDriftWaitsForTheRunningReconcile checks that a check that comes due
// while its add-on is being reconciled waits, and is then decided once for
// every change gathered.
func TestDriftWaitsForTheRunningReconcile(t *testing.T) {
	addon := types.NamespacedName{Namespace: "apps", Name: "web"}
	var busy atomic.Bool
	busy.Store(true)
	decided := make(chan int, 10)
	d := &driftWatch{
		Delay: 20 * time.Millisecond,
		Busy:  func(types.NamespacedName) bool { return busy.Load() },
		IsDrift: func(_ types.NamespacedName, c change) bool {
			decided <- len(c.name)
			return false
		},
	}
	cm := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "1"}}
	d.seen(addon, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, cm, false)
	d.seen(addon, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, cm, false)
	select {
	case <-decided:
		t.Fatal("decided while the add-on was being reconciled")
	case <-time.After(200 * time.Millisecond):
	}
	busy.Store(false)
	n := 0
	deadline := time.After(5 * time.Second)
	for n < 2 {
		select {
		case <-decided:
			n++
		case <-deadline:
			t.Fatalf("decided %d of 2 changes", n)
		}
	}
}
