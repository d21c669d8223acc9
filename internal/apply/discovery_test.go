package apply

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// countingDiscovery counts the questions that reach discovery; block,
// when set, holds each until it is closed.
type countingDiscovery struct {
	fakeDiscovery
	asked atomic.Int32
	block chan struct{}
}

func (d *countingDiscovery) GroupsAndMaybeResourcesWithContext(ctx context.Context) (*metav1.APIGroupList, map[schema.GroupVersion]*metav1.APIResourceList, map[schema.GroupVersion]error, error) {
	d.asked.Add(1)
	if d.block != nil {
		select {
		case <-d.block:
		case <-ctx.Done():
			return nil, nil, nil, ctx.Err()
		}
	}
	return d.fakeDiscovery.GroupsAndMaybeResourcesWithContext(ctx)
}

// TestDiscoveryIsAskedOncePerMemo: an uninstall of 300 entries whose kind
// the client maps to no version asks discovery once, not 300 times; a
// second later it asks again, so a group listed Stale is not kept failed.
func TestDiscoveryIsAskedOncePerMemo(t *testing.T) {
	gv := schema.GroupVersion{Group: "metrics.example.com", Version: "v1"}
	stale := &countingDiscovery{fakeDiscovery: fakeDiscovery{
		groups:    &metav1.APIGroupList{Groups: []metav1.APIGroup{{Name: gv.Group}}},
		resources: map[schema.GroupVersion]*metav1.APIResourceList{},
		failed:    map[schema.GroupVersion]error{gv: discovery.StaleGroupVersionError{}},
	}}
	now := time.Unix(1000, 0)
	recent := Recent(stale).(*recentDiscovery)
	recent.now = func() time.Time { return now }
	a := &Applier{Client: &unmappedClient{}, Discovery: recent}
	var refs []capstanv1.ObjectRef
	for i := range 300 {
		refs = append(refs, capstanv1.ObjectRef{APIVersion: gv.String(), Kind: "Gauge", Namespace: "apps", Name: "g" + string(rune('a'+i%26)) + string(rune('a'+i/26))})
	}
	for _, r := range refs {
		if _, err := a.ReadMetadata(context.Background(), r); err == nil {
			t.Fatalf("ReadMetadata of %s in a Stale group: no error", r.Name)
		}
	}
	if n := stale.asked.Load(); n != 1 {
		t.Fatalf("discovery asked %d times for 300 entries within a second, want 1", n)
	}

	// The APIService is back, with the kind gone: a second later the
	// answer is read again, and the objects are gone.
	stale.failed = map[schema.GroupVersion]error{}
	now = now.Add(DiscoveryMemo)
	stale.groups = &metav1.APIGroupList{}
	deleted, err := a.DeleteAll(context.Background(), refs, Deleting{})
	if err != nil || len(deleted.Done) != len(refs) {
		t.Fatalf("DeleteAll after the memo: %d done, %v; want all %d", len(deleted.Done), err, len(refs))
	}
	if n := stale.asked.Load(); n != 2 {
		t.Fatalf("discovery asked %d times, want 2", n)
	}
}

// TestDiscoveryQuestionsAreShared: callers asking while a question is on
// its way wait for its answer; one whose own context ends stops waiting,
// and an asker cancelled mid-question leaves no answer behind for others.
func TestDiscoveryQuestionsAreShared(t *testing.T) {
	d := &countingDiscovery{fakeDiscovery: fakeDiscovery{groups: &metav1.APIGroupList{}}, block: make(chan struct{})}
	r := Recent(d)

	// The first asker is cancelled while its question is on its way; a
	// second, waiting for it, asks again rather than take its error.
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, _, _, err := r.GroupsAndMaybeResourcesWithContext(ctx)
		first <- err
	}()
	waitFor(t, func() bool { return d.asked.Load() == 1 })
	second := make(chan error, 1)
	go func() {
		_, _, _, err := r.GroupsAndMaybeResourcesWithContext(context.Background())
		second <- err
	}()
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled asker got %v", err)
	}
	waitFor(t, func() bool { return d.asked.Load() == 2 })

	// More callers while the second question is on its way share it.
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			groups, _, _, err := r.GroupsAndMaybeResourcesWithContext(context.Background())
			if err == nil && groups == nil {
				err = errors.New("no groups")
			}
			errs <- err
		}()
	}
	close(d.block)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := <-second; err != nil {
		t.Fatalf("the second asker: %v", err)
	}
	if n := d.asked.Load(); n != 2 {
		t.Fatalf("discovery asked %d times, want 2 (the cancelled question and the one shared)", n)
	}
}

// waitFor polls cond for up to five seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not met within 5 s")
}

// panickyDiscovery panics on its first question.
type panickyDiscovery struct {
	fakeDiscovery
	asked atomic.Int32
}

func (d *panickyDiscovery) GroupsAndMaybeResourcesWithContext(ctx context.Context) (*metav1.APIGroupList, map[schema.GroupVersion]*metav1.APIResourceList, map[schema.GroupVersion]error, error) {
	if d.asked.Add(1) == 1 {
		panic("discovery broke")
	}
	return d.fakeDiscovery.GroupsAndMaybeResourcesWithContext(ctx)
}

// TestADiscoveryPanicLeavesNoQuestionOpen: a question that panicked (the
// controller recovers a reconcile's panic) is not left on its way for
// ever: the next asker asks again.
func TestADiscoveryPanicLeavesNoQuestionOpen(t *testing.T) {
	d := &panickyDiscovery{fakeDiscovery: fakeDiscovery{groups: &metav1.APIGroupList{}}}
	r := Recent(d)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not reach the asker")
			}
		}()
		_, _, _, _ = r.GroupsAndMaybeResourcesWithContext(context.Background())
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if groups, _, _, err := r.GroupsAndMaybeResourcesWithContext(ctx); err != nil || groups == nil {
		t.Fatalf("the question after a panic: %v, %v; want an answer", groups, err)
	}
}
