package controller

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/plan"
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
// a quiet spell starts again; that drift of an object not fought is undone
// at once, with the fought one; and that only an undo that was applied
// counts.
func TestDriftPacer(t *testing.T) {
	addon := types.NamespacedName{Namespace: "apps", Name: "web"}
	p := &driftPacer{Delay: 5 * time.Second, MaxDelay: time.Minute}
	cm := capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: "web-config"}
	svc := capstanv1.ObjectRef{APIVersion: "v1", Kind: "Service", Namespace: "apps", Name: "web"}
	now := time.Unix(1_000_000, 0)
	// The rival re-drifts 1 s after each undo; the reconcile comes back
	// when it is told to wait.
	var undos []time.Time
	var counts []int
	for len(undos) < 6 {
		if wait, which := p.wait(addon, []capstanv1.ObjectRef{cm}, now); wait > 0 {
			if which != cm {
				t.Fatalf("waits for %v", which)
			}
			now = now.Add(wait)
			continue
		}
		times, which := p.record(addon, []capstanv1.ObjectRef{cm}, now)
		if which != cm {
			t.Fatalf("recorded %v", which)
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
	// A waiting (not applied) check counts nothing.
	wait, _ := p.wait(addon, []capstanv1.ObjectRef{cm}, now)
	again, _ := p.wait(addon, []capstanv1.ObjectRef{cm}, now)
	if wait == 0 || again != wait {
		t.Errorf("checking twice: %s then %s, want the same wait", wait, again)
	}
	if wait, _ := p.wait(addon, []capstanv1.ObjectRef{svc}, now); wait != 0 {
		t.Errorf("another object waits %s: only the fought one slows down", wait)
	}
	if wait, _ := p.wait(addon, []capstanv1.ObjectRef{cm, svc}, now); wait != 0 {
		t.Errorf("fresh drift of another object waits %s behind the fought one", wait)
	}
	if wait, _ := p.wait(addon, []capstanv1.ObjectRef{cm}, now.Add(3*time.Minute)); wait != 0 {
		t.Errorf("after a quiet spell the fought object waits %s", wait)
	}
	if times, _ := p.record(addon, []capstanv1.ObjectRef{cm}, now.Add(3*time.Minute)); times != 1 {
		t.Errorf("after a quiet spell the undo is number %d, want 1", times)
	}
	p.forget(addon)
	if len(p.history) != 0 {
		t.Errorf("forget left %v", p.history)
	}
}

// TestDriftWaitsForTheRunningReconcile checks that a check that comes due
// while its add-on is being reconciled waits, and is then decided once, on
// the latest change of each object gathered.
func TestDriftWaitsForTheRunningReconcile(t *testing.T) {
	addon := types.NamespacedName{Namespace: "apps", Name: "web"}
	var busy atomic.Bool
	busy.Store(true)
	decided := make(chan int, 10)
	d := &driftWatch{
		Delay: 20 * time.Millisecond,
		Busy:  func(types.NamespacedName) bool { return busy.Load() },
		IsDrift: func(_ types.NamespacedName, changes []change) (bool, []change) {
			decided <- len(changes)
			return false, nil
		},
	}
	_ = d.start(context.Background(), workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()))
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	for _, o := range []struct{ name, rv string }{{"a", "1"}, {"a", "2"}, {"b", "3"}} {
		d.seen(addon, gvk, nil, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: o.name, ResourceVersion: o.rv}}, false)
	}
	select {
	case <-decided:
		t.Fatal("decided while the add-on was being reconciled")
	case <-time.After(200 * time.Millisecond):
	}
	busy.Store(false)
	select {
	case n := <-decided:
		if n != 2 {
			t.Errorf("decided on %d changes, want the latest of each of 2 objects", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("never decided")
	}
	select {
	case <-decided:
		t.Error("decided twice: the changes of one add-on are one check")
	case <-time.After(200 * time.Millisecond):
	}
}

// TestObjectDriftedSkipsTheControllersOwnOlderUpdate: an update older than
// the resourceVersion the controller remembers is its own (the apply
// before its hand-over of fields), not drift; a newer one is.
func TestObjectDriftedSkipsTheControllersOwnOlderUpdate(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "web", UID: "uid-web"}}
	r := &AddonReconciler{}
	c := change{gvk: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, namespace: "apps", name: "web"}
	r.verified.target(addon, &capstanv1.InventoryCluster{}, nil, nil)
	r.verified.store(addon, map[string]plan.Verified{c.ref().Key(): {ResourceVersion: "20"}})
	key := types.NamespacedName{Namespace: "ops", Name: "web"}
	for rv, want := range map[string]bool{"19": false, "20": false, "21": true, "not-a-number": true} {
		c.resourceVersion = rv
		if got := r.objectDrifted(context.Background(), key, c); got != want {
			t.Errorf("an update at %s with 20 remembered: drifted %v, want %v", rv, got, want)
		}
	}
}
