package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestANudgedAddonGoesAheadOfTheQueuedSyncs: an add-on waiting for its
// objects, whose Deployment's status just changed, is looked at before the
// add-ons queued earlier for a sync; one that does not wait is not queued.
func TestANudgedAddonGoesAheadOfTheQueuedSyncs(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("nudge-test")
	defer q.ShutDown()
	request := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "capstan-system", Name: name}}
	}
	for _, name := range []string{"new-1", "new-2", "new-3"} {
		q.Add(request(name))
	}
	d := &driftWatch{Awaiting: func(a types.NamespacedName) bool { return a.Name == "waiting" }}
	if err := d.start(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	deployment := func(owner, rv string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: owner, ResourceVersion: rv,
			Labels: map[string]string{capstanv1.AddonLabel: owner, capstanv1.AddonNamespaceLabel: "capstan-system"}}}
	}
	d.nudge(deployment("waiting", "1"), deployment("waiting", "2"))
	d.nudge(deployment("synced", "1"), deployment("synced", "2"))

	// The nudge is due after nudgeDelay.
	for i := 0; q.Len() < 4; i++ {
		if i == 100 {
			t.Fatalf("after 5 s, %d requests are ready; want the 3 queued and the nudged one", q.Len())
		}
		time.Sleep(50 * time.Millisecond)
	}
	var order []string
	for q.Len() > 0 {
		req, _, _ := q.GetWithPriority()
		order = append(order, req.Name)
		q.Done(req)
	}
	if want := []string{"waiting", "new-1", "new-2", "new-3"}; !slices.Equal(order, want) {
		t.Errorf("the queue gave %v; want %v", order, want)
	}
}

// TestASettledAddonIsLookedAtInItsTurn: a status change of an object of a
// settled add-on (Synced, or held by a gate) queues it after
// healthLookDelay, behind the queued syncs; an add-on neither waiting nor
// settled is not queued, and a burst of changes queues one look.
func TestASettledAddonIsLookedAtInItsTurn(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("settled-test")
	defer q.ShutDown()
	q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "capstan-system", Name: "new-1"}})
	d := &driftWatch{
		Awaiting: func(types.NamespacedName) bool { return false },
		Settled:  func(a types.NamespacedName) bool { return a.Name == "settled" },
	}
	if err := d.start(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	object := func(owner, rv string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: owner, ResourceVersion: rv,
			Labels: map[string]string{capstanv1.AddonLabel: owner, capstanv1.AddonNamespaceLabel: "capstan-system"}}}
	}
	began := time.Now()
	for rv := 1; rv < 5; rv++ {
		d.nudge(object("settled", "1"), object("settled", string(rune('1'+rv))))
	}
	d.nudge(object("other", "1"), object("other", "2"))
	for i := 0; q.Len() < 2; i++ {
		if i == 200 {
			t.Fatalf("after 10 s, %d requests are ready; want the queued one and the settled add-on", q.Len())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if waited := time.Since(began); waited < healthLookDelay {
		t.Errorf("the settled add-on was queued after %s; want at least %s", waited, healthLookDelay)
	}
	time.Sleep(100 * time.Millisecond)
	var order []string
	for q.Len() > 0 {
		req, _, _ := q.GetWithPriority()
		order = append(order, req.Name)
		q.Done(req)
	}
	if want := []string{"new-1", "settled"}; !slices.Equal(order, want) {
		t.Errorf("the queue gave %v; want %v", order, want)
	}
}

// TestSettledLooksAreBounded: a burst of status changes gives one look, and
// an object whose status keeps changing looks at its add-on at most every
// settledLookEvery.
func TestSettledLooksAreBounded(t *testing.T) {
	d := &driftWatch{}
	addon := types.NamespacedName{Namespace: "capstan-system", Name: "web"}
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	if after, ok := d.lookSettled(addon, now); !ok || after != healthLookDelay {
		t.Fatalf("the first change: look after %s, %v; want %s", after, ok, healthLookDelay)
	}
	if _, ok := d.lookSettled(addon, now.Add(time.Second)); ok {
		t.Fatal("a change while a look is queued queued another")
	}
	// Just after the look: the next waits for settledLookEvery.
	at := now.Add(healthLookDelay + time.Millisecond)
	after, ok := d.lookSettled(addon, at)
	if want := now.Add(healthLookDelay + settledLookEvery).Sub(at); !ok || after != want {
		t.Fatalf("a change right after a look: after %s, %v; want %s", after, ok, want)
	}
	// Long after: the delay alone.
	if after, ok := d.lookSettled(addon, now.Add(time.Hour)); !ok || after != healthLookDelay {
		t.Fatalf("a change long after: after %s, %v; want %s", after, ok, healthLookDelay)
	}
	other := types.NamespacedName{Namespace: "capstan-system", Name: "db"}
	if after, ok := d.lookSettled(other, now.Add(time.Hour)); !ok || after != healthLookDelay {
		t.Fatalf("another add-on: after %s, %v", after, ok)
	}
	d.forget(addon)
	if _, ok := d.looks[addon]; ok || len(d.looks) != 1 {
		t.Fatalf("forget left %v", d.looks)
	}
}
