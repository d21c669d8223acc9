package server

import (
	"context"
	"sync"
	"time"
)

// turns bounds how much of one kind of work (the lists of Addons, the
// reads of one Addon, the pages' chart fetches, the plans on demand) the
// server does at once: at most total, and at most perShare of them for any
// one share (see shareOf). take takes a turn or says which bound is met;
// wait waits a while for one to be given back.
//
// NOTE: without a share per user, one signed-in tenant who keeps slow
// fetches running would take every turn, and every other person's forms
// and plans would be refused until they let go. A tenant who may make
// ServiceAccounts and their tokens could make a user of each, so the
// ServiceAccounts of one namespace share one share, whatever namespace
// they work in. The share is not the namespace worked in: a cluster that
// keeps all its Addons in one namespace would then serve one person at a
// time, and anyone could take a namespace's share before being told they
// may not work in it.
type turns struct {
	mu       sync.Mutex
	total    int
	perShare int
	held     int
	byShare  map[share]int
	// freed is closed, and made anew, whenever a turn is given back, for
	// those who wait for one.
	freed chan struct{}
}

// share is whom a turn counts against: the ServiceAccounts of namespace
// name together when serviceAccounts, else the user name.
type share struct {
	serviceAccounts bool
	name            string
}

// shareOf is user's share: a ServiceAccount's
// (system:serviceaccount:NAMESPACE:NAME) is its namespace's, any other
// user's its own.
func shareOf(user string) share {
	if ns, ok := serviceAccountNamespace(user); ok {
		return share{serviceAccounts: true, name: ns}
	}
	return share{name: user}
}

// String names the share in a refusal.
func (s share) String() string {
	if s.serviceAccounts {
		return "the ServiceAccounts of namespace " + s.name
	}
	return s.name
}

// full names the bound a refused turn met.
type full int

const (
	fullTotal full = iota // every turn is taken
	fullShare             // the user's share is taken
)

// newTurns makes total turns, half of them (at least one) for one share.
func newTurns(total int) *turns {
	return newSharedTurns(total, max(1, total/2))
}

// newSharedTurns makes total turns, perShare of them for one share.
func newSharedTurns(total, perShare int) *turns {
	return &turns{total: total, perShare: perShare, byShare: map[share]int{}, freed: make(chan struct{})}
}

// newUnsharedTurns makes total turns that one share may take all of, for
// work that is not shared out by user (the lists of Addons): take them
// with any one user name, such as "".
func newUnsharedTurns(total int) *turns {
	return newSharedTurns(total, total)
}

// take takes a turn for user. When none is free it answers ok false, and
// which bound is met.
func (t *turns) take(user string) (release func(), ok bool, met full) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.takeLocked(shareOf(user))
}

// wait takes a turn for user as take does, but waits at most d, or until
// ctx is done, for one to be given back.
func (t *turns) wait(ctx context.Context, user string, d time.Duration) (release func(), ok bool, met full) {
	sh := shareOf(user)
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		t.mu.Lock()
		release, ok, met = t.takeLocked(sh)
		freed := t.freed
		t.mu.Unlock()
		if ok {
			return release, ok, met
		}
		select {
		case <-freed:
		case <-timer.C:
			return nil, false, met
		case <-ctx.Done():
			return nil, false, met
		}
	}
}

// takeLocked is take, with t.mu held.
func (t *turns) takeLocked(sh share) (release func(), ok bool, met full) {
	switch {
	case t.byShare[sh] >= t.perShare:
		return nil, false, fullShare
	case t.held >= t.total:
		return nil, false, fullTotal
	}
	t.held++
	t.byShare[sh]++
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.held--
			if t.byShare[sh]--; t.byShare[sh] <= 0 {
				delete(t.byShare, sh)
			}
			close(t.freed)
			t.freed = make(chan struct{})
		})
	}, true, fullTotal
}
