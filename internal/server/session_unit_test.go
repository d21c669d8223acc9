package server

import (
	"strconv"
	"testing"
	"time"
)

// TestServiceAccountsOfANamespaceShareABound: the service accounts of one
// namespace, which its admin may create with tokens at will, keep 100
// sessions together, so they cannot fill the table and end the sessions
// of others; each keeps its own 20 as any user does.
func TestServiceAccountsOfANamespaceShareABound(t *testing.T) {
	var s sessions
	now := time.Now()
	admin, _ := s.create(User{Name: "admin@example.com"}, now)
	other, _ := s.create(User{Name: "system:serviceaccount:team-b:ci"}, now)
	for i := range 50 {
		for range 30 {
			s.create(User{Name: "system:serviceaccount:tenant:sa-" + strconv.Itoa(i)}, now)
		}
	}
	perNamespace, perUser := 0, map[string]int{}
	for _, sess := range s.m {
		if ns, ok := serviceAccountNamespace(sess.user.Name); ok && ns == "tenant" {
			perNamespace++
			perUser[sess.user.Name]++
		}
	}
	if perNamespace != maxNamespaceSessions {
		t.Errorf("the tenant's service accounts hold %d sessions; want %d", perNamespace, maxNamespaceSessions)
	}
	for u, n := range perUser {
		if n > maxUserSessions {
			t.Errorf("%s holds %d sessions", u, n)
		}
	}
	for _, id := range []string{admin, other} {
		if _, ok := s.get(id, now); !ok {
			t.Errorf("a session of another user was ended")
		}
	}
	for _, tt := range []struct {
		user, ns string
		ok       bool
	}{
		{"system:serviceaccount:tenant:ci", "tenant", true},
		{"system:serviceaccount::ci", "", false},
		{"system:serviceaccount:tenant", "", false},
		{"alice", "", false},
	} {
		if ns, ok := serviceAccountNamespace(tt.user); ns != tt.ns || ok != tt.ok {
			t.Errorf("serviceAccountNamespace(%q) = %q, %v", tt.user, ns, ok)
		}
	}
}

// TestAFullTableEndsTheSessionsOfWhoFilledIt: when the table is full of
// live sessions, a sign-in ends the oldest session of the group that holds
// the most (here the service accounts of the namespace that filled it),
// never that of a person who holds one.
func TestAFullTableEndsTheSessionsOfWhoFilledIt(t *testing.T) {
	s := sessions{max: 10}
	now := time.Now()
	alice, _ := s.create(User{Name: "alice"}, now)
	first, _ := s.create(User{Name: "system:serviceaccount:filler:sa-0"}, now)
	for i := 1; i < 60; i++ {
		s.create(User{Name: "system:serviceaccount:filler:sa-" + strconv.Itoa(i)}, now)
		if _, ok := s.get(alice, now); !ok {
			t.Fatalf("sign-in %d of the namespace that fills the table ended alice's session", i)
		}
	}
	if len(s.m) != 10 {
		t.Errorf("the table holds %d sessions; want its bound, 10", len(s.m))
	}
	if _, ok := s.get(first, now); ok {
		t.Error("the oldest session of the namespace that filled the table is still there")
	}
}

// TestAFullTableOfEqualGroupsEndsTheOldestSession: when the groups are the
// same size (people with one session each), a sign-in ends the oldest
// session, not the one of whoever's name sorts first, who would otherwise
// lose theirs at every sign-in of someone else.
func TestAFullTableOfEqualGroupsEndsTheOldestSession(t *testing.T) {
	s := sessions{max: 4}
	now := time.Now()
	ids := map[string]string{}
	for _, name := range []string{"zoe", "yann", "xavier", "walt", "adam", "bob"} {
		ids[name], _ = s.create(User{Name: name}, now)
	}
	for name, want := range map[string]bool{"zoe": false, "yann": false, "xavier": true, "walt": true, "adam": true, "bob": true} {
		if _, ok := s.get(ids[name], now); ok != want {
			t.Errorf("%s's session kept: %v; want %v", name, ok, want)
		}
	}
}
