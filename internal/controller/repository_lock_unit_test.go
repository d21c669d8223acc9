package controller

import (
	"fmt"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestCreatingLocksAreBounded: the syncer's locks for creating Addons are
// a fixed set, however many names it creates, and one name always gets
// the same lock.
func TestCreatingLocksAreBounded(t *testing.T) {
	r := &AddonRepositoryReconciler{}
	seen := map[*sync.Mutex]bool{}
	for i := range 10000 {
		seen[r.creatingLock(types.NamespacedName{Namespace: "tenant", Name: fmt.Sprintf("addon-%d", i)})] = true
	}
	if len(seen) > creatingStripes {
		t.Errorf("10,000 names got %d locks, want at most %d", len(seen), creatingStripes)
	}
	key := types.NamespacedName{Namespace: "tenant", Name: "wiki"}
	first, again := r.creatingLock(key), r.creatingLock(types.NamespacedName{Namespace: "tenant", Name: "wiki"})
	if first != again {
		t.Error("one name got two locks: two creations of it could overlap")
	}
}
