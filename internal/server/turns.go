package server

import "sync"

// turns bounds how much of one kind of work (the pages' chart fetches,
// the plans on demand) the server does at once: at most total, at most
// perShare of them for any one user, and at most perShare of them for any
// one namespace.
//
// NOTE: without a share per user, one signed-in tenant who keeps slow
// fetches running would take every turn, and every other person's forms
// and plans would be refused until they let go. The share per namespace
// is for the tenant who may make ServiceAccounts and their tokens: each is
// a user of its own, with a share of its own, but they all ask for the
// tenant's namespace. (A tenant who holds several namespaces still gets a
// share in each.)
type turns struct {
	mu          sync.Mutex
	total       int
	perShare    int
	held        int
	byUser      map[string]int
	byNamespace map[string]int
}

// full names the bound a refused turn met.
type full int

const (
	fullTotal     full = iota // every turn is taken
	fullUser                  // the user's share is taken
	fullNamespace             // the namespace's share is taken
)

// newTurns makes total turns, half of them (at least one) for one user,
// and as many for one namespace.
func newTurns(total int) *turns {
	return &turns{total: total, perShare: max(1, total/2), byUser: map[string]int{}, byNamespace: map[string]int{}}
}

// take takes a turn for user, for work in namespace. When none is free it
// answers ok false, and which bound is met.
func (t *turns) take(user, namespace string) (release func(), ok bool, met full) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.byUser[user] >= t.perShare:
		return nil, false, fullUser
	case t.byNamespace[namespace] >= t.perShare:
		return nil, false, fullNamespace
	case t.held >= t.total:
		return nil, false, fullTotal
	}
	t.held++
	t.byUser[user]++
	t.byNamespace[namespace]++
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.held--
			if t.byUser[user]--; t.byUser[user] <= 0 {
				delete(t.byUser, user)
			}
			if t.byNamespace[namespace]--; t.byNamespace[namespace] <= 0 {
				delete(t.byNamespace, namespace)
			}
		})
	}, true, fullTotal
}
