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
