package apply

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// DiscoveryMemo is how long Recent keeps discovery's answer.
const DiscoveryMemo = time.Second

// Recent returns d with each answer kept for DiscoveryMemo. A prune, an
// uninstall, a preview and the wait for deletes each ask discovery once
// per inventory entry whose kind the client maps to no version: a CRD
// deleted under 300 entries asked the whole of discovery 300 times per
// look, and again on every poll of the wait. Within a second the answer is
// the same for all of them. An answer is kept only that long, failures
// too, so that a group listed Stale is asked again on the next try and not
// kept failed, as client-go's memory cache keeps it until invalidated.
// Callers asking while a question is on its way wait for its answer
// (or their context) instead of asking again.
func Recent(d Discovery) Discovery {
	if d == nil {
		return nil
	}
	return &recentDiscovery{d: d, now: time.Now, answers: map[string]*discoveryAnswer{}}
}

type recentDiscovery struct {
	d   Discovery
	now func() time.Time

	mu      sync.Mutex
	answers map[string]*discoveryAnswer
}

// discoveryAnswer is one question's answer; done is closed once it came.
type discoveryAnswer struct {
	done chan struct{}
	at   time.Time

	groups    *metav1.APIGroupList
	resources map[schema.GroupVersion]*metav1.APIResourceList
	failed    map[schema.GroupVersion]error
	list      *metav1.APIResourceList
	err       error
	// abandoned is set when the asker's context ended the question, or
	// it panicked.
	abandoned bool
}

// groupsKey names the question of all groups; a group version's question
// is named by the group version, which never is empty.
const groupsKey = ""

func (r *recentDiscovery) GroupsAndMaybeResourcesWithContext(ctx context.Context) (*metav1.APIGroupList, map[schema.GroupVersion]*metav1.APIResourceList, map[schema.GroupVersion]error, error) {
	a, err := r.ask(ctx, groupsKey, func(ctx context.Context, a *discoveryAnswer) {
		a.groups, a.resources, a.failed, a.err = r.d.GroupsAndMaybeResourcesWithContext(ctx)
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return a.groups, a.resources, a.failed, a.err
}

func (r *recentDiscovery) ServerResourcesForGroupVersionWithContext(ctx context.Context, groupVersion string) (*metav1.APIResourceList, error) {
	a, err := r.ask(ctx, groupVersion, func(ctx context.Context, a *discoveryAnswer) {
		a.list, a.err = r.d.ServerResourcesForGroupVersionWithContext(ctx, groupVersion)
	})
	if err != nil {
		return nil, err
	}
	return a.list, a.err
}

// ask returns the answer to the question key, asked by fetch unless an
// answer younger than DiscoveryMemo, or one on its way, is there. The
// answers are shared: callers only read them. An answer cut short by its
// asker's context is kept for no one: those waiting for it ask again.
func (r *recentDiscovery) ask(ctx context.Context, key string, fetch func(context.Context, *discoveryAnswer)) (*discoveryAnswer, error) {
	for {
		r.mu.Lock()
		a, ok := r.answers[key]
		if ok {
			select {
			case <-a.done:
				ok = r.now().Sub(a.at) < DiscoveryMemo
			default: // on its way
			}
		}
		if !ok {
			a = &discoveryAnswer{done: make(chan struct{})}
			r.answers[key] = a
			r.mu.Unlock()
			r.fetch(ctx, key, a, fetch)
			return a, nil
		}
		r.mu.Unlock()
		select {
		case <-a.done:
			if !a.abandoned {
				return a, nil
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// fetch asks the question key for a, and ends it: kept, or abandoned when
// the asker's context ended it or the question panicked (which goes on up
// to the asker), so that those waiting for it never wait for ever.
func (r *recentDiscovery) fetch(ctx context.Context, key string, a *discoveryAnswer, fetch func(context.Context, *discoveryAnswer)) {
	done := false
	defer func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		a.at = r.now()
		if !done || ctx.Err() != nil {
			a.abandoned = true
			if r.answers[key] == a {
				delete(r.answers, key)
			}
		}
		close(a.done)
	}()
	fetch(ctx, a)
	done = true
}
