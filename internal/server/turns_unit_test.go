package server

import "testing"

// TestTurnsAreSharedOutByUserAndNamespace: of two turns, one user gets
// one, and so does one namespace, whoever asks in it; another namespace
// gets the other, and a turn given back is free again.
func TestTurnsAreSharedOutByUserAndNamespace(t *testing.T) {
	tt := newTurns(2)
	first, ok, _ := tt.take("system:serviceaccount:a:one", "a")
	if !ok {
		t.Fatal("the first turn was refused")
	}
	if _, ok, met := tt.take("system:serviceaccount:a:one", "b"); ok || met != fullUser {
		t.Errorf("the user's second turn: ok %v, bound %v; want the user's share met", ok, met)
	}
	if _, ok, met := tt.take("system:serviceaccount:a:two", "a"); ok || met != fullNamespace {
		t.Errorf("another user's turn in the same namespace: ok %v, bound %v; want the namespace's share met", ok, met)
	}
	second, ok, _ := tt.take("system:serviceaccount:b:one", "b")
	if !ok {
		t.Fatal("a turn in another namespace was refused")
	}
	if _, ok, met := tt.take("system:serviceaccount:c:one", "c"); ok || met != fullTotal {
		t.Errorf("a third turn: ok %v, bound %v; want every turn taken", ok, met)
	}
	first()
	first()
	if again, ok, _ := tt.take("system:serviceaccount:a:two", "a"); !ok {
		t.Error("a turn given back is not free again")
	} else {
		again()
	}
	second()
	if tt.held != 0 || len(tt.byUser) != 0 || len(tt.byNamespace) != 0 {
		t.Errorf("every turn given back leaves %d held, users %v, namespaces %v", tt.held, tt.byUser, tt.byNamespace)
	}
}
