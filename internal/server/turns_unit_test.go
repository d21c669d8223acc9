package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestTurnsAreSharedOutByUser: of two turns, one user gets one, and the
// ServiceAccounts of one namespace get one together, wherever they work;
// people who work in the same namespace get one each, and a turn given
// back is free again.
func TestTurnsAreSharedOutByUser(t *testing.T) {
	tt := newTurns(2)
	first, ok, _ := tt.take("system:serviceaccount:a:one")
	if !ok {
		t.Fatal("the first turn was refused")
	}
	if _, ok, met := tt.take("system:serviceaccount:a:one"); ok || met != fullShare {
		t.Errorf("the user's second turn: ok %v, bound %v; want the user's share met", ok, met)
	}
	if _, ok, met := tt.take("system:serviceaccount:a:two"); ok || met != fullShare {
		t.Errorf("another ServiceAccount of the namespace: ok %v, bound %v; want the namespace's ServiceAccounts' share met", ok, met)
	}
	second, ok, _ := tt.take("alice")
	if !ok {
		t.Fatal("a person's turn, beside a ServiceAccount's, was refused")
	}
	if _, ok, met := tt.take("bob"); ok || met != fullTotal {
		t.Errorf("a third turn: ok %v, bound %v; want every turn taken", ok, met)
	}
	first()
	first()
	if again, ok, _ := tt.take("system:serviceaccount:a:two"); !ok {
		t.Error("a turn given back is not free again")
	} else {
		again()
	}
	second()
	if tt.held != 0 || len(tt.byShare) != 0 {
		t.Errorf("every turn given back leaves %d held, shares %v", tt.held, tt.byShare)
	}

	// NOTE: a user named like a ServiceAccount's namespace share is still
	// a user of its own.
	for _, pair := range [][2]string{{"alice", "bob"}, {"system:serviceaccount:a:one", "system:serviceaccount:b:one"}, {"system:serviceaccount:a", "system:serviceaccount:a:x"}, {"a", "system:serviceaccount:a:x"}} {
		r1, ok1, _ := tt.take(pair[0])
		r2, ok2, _ := tt.take(pair[1])
		if !ok1 || !ok2 {
			t.Errorf("%q and %q do not get a turn each: %v %v", pair[0], pair[1], ok1, ok2)
		}
		for _, r := range []func(){r1, r2} {
			if r != nil {
				r()
			}
		}
	}
}

// TestTurnsWaitForOneGivenBack: a user whose share is taken waits for one
// of its turns to be given back, and takes it; one who waits longer than
// told is refused with the bound it met.
func TestTurnsWaitForOneGivenBack(t *testing.T) {
	tt := newSharedTurns(2, 1)
	held, ok, _ := tt.take("alice")
	if !ok {
		t.Fatal("the first turn was refused")
	}
	if _, ok, met := tt.wait(context.Background(), "alice", 10*time.Millisecond); ok || met != fullShare {
		t.Errorf("a wait past its time: ok %v, bound %v; want the user's share met", ok, met)
	}
	time.AfterFunc(50*time.Millisecond, held)
	start := time.Now()
	again, ok, _ := tt.wait(context.Background(), "alice", 10*time.Second)
	if !ok || time.Since(start) > 5*time.Second {
		t.Fatalf("a wait for a turn given back: ok %v after %s; want the turn once it is given back", ok, time.Since(start))
	}
	again()
}

// TestListsTakeTheirTurnsAsEveryBound: the lists of Addons take their
// turns as the other bounds do, not shared out by user: past the bound a
// list waits listWait and is refused with a 429 and a Retry-After that
// say why, and one waiting takes a turn as soon as one is given back.
func TestListsTakeTheirTurnsAsEveryBound(t *testing.T) {
	srv := &Server{MaxLists: 2}
	srv.Handler()
	release := srv.HoldListTurns()
	start := time.Now()
	_, err := srv.listTurn(context.Background())
	var refused apiError
	if !errors.As(err, &refused) || refused.Code != http.StatusTooManyRequests || refused.retryAfter != listRetryAfter ||
		!strings.Contains(refused.Message, "2 lists of Addons are being read") || time.Since(start) < listWait {
		t.Fatalf("a list while every turn is taken: %v after %s; want a 429 with a Retry-After after waiting %s", err, time.Since(start), listWait)
	}
	time.AfterFunc(50*time.Millisecond, release)
	start = time.Now()
	again, err := srv.listTurn(context.Background())
	if err != nil || time.Since(start) >= listWait {
		t.Fatalf("a list waiting for a turn given back: %v after %s; want the turn once it is given back", err, time.Since(start))
	}
	again()
	for range 2 {
		r, err := srv.listTurn(context.Background())
		if err != nil {
			t.Fatalf("every turn given back, a list is refused: %v", err)
		}
		defer r()
	}
}
