package server

import "sync"

// turns bounds how much of one kind of work (the pages' chart fetches,
// the plans on demand) the server does at once: at most total, and at
// most perUser of them for any one user.
//
// NOTE: without a share per user, one signed-in tenant who keeps slow
// fetches running would take every turn, and every other person's forms
// and plans would be refused until they let go.
type turns struct {
	mu      sync.Mutex
	total   int
	perUser int
	held    int
	byUser  map[string]int
}

// newTurns makes total turns, half of them (at least one) for one user.
func newTurns(total int) *turns {
	return &turns{total: total, perUser: max(1, total/2), byUser: map[string]int{}}
}

// take takes a turn for user. When none is free it answers ok false, and
// mine true when it is the user's own share that is taken.
func (t *turns) take(user string) (release func(), ok, mine bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.byUser[user] >= t.perUser:
		return nil, false, true
	case t.held >= t.total:
		return nil, false, false
	}
	t.held++
	t.byUser[user]++
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.held--
			if t.byUser[user]--; t.byUser[user] <= 0 {
				delete(t.byUser, user)
			}
		})
	}, true, false
}
