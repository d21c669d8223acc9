package server

import "testing"

func TestMakeRoom(t *testing.T) {
	m := map[int]bool{1: true, 2: false, 3: true, 4: false}
	makeRoom(m, 5, func(expired bool) bool { return expired })
	if len(m) != 4 {
		t.Fatalf("a map under its bound lost entries: %v", m)
	}
	makeRoom(m, 4, func(expired bool) bool { return expired })
	if len(m) != 2 || m[1] || m[3] {
		t.Fatalf("the expired entries should go first: %v", m)
	}
	live := map[int]bool{1: false, 2: false, 3: false}
	makeRoom(live, 3, func(expired bool) bool { return expired })
	if len(live) != 2 {
		t.Fatalf("a full map of live entries must still make room: %v", live)
	}
}
