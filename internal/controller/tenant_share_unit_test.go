package controller

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestTenantShare: each namespace has its own places, a release gives one
// back, a namespace with nothing running is forgotten, and a zero share
// admits everything and counts nothing.
func TestTenantShare(t *testing.T) {
	type op struct {
		release   bool
		namespace string
		want      bool // what acquire answers
	}
	acq := func(ns string, want bool) op { return op{namespace: ns, want: want} }
	rel := func(ns string) op { return op{release: true, namespace: ns} }
	cases := []struct {
		name  string
		limit int
		ops   []op
		want  map[string]int // running, afterwards
	}{
		{"one place, taken", 1, []op{acq("a", true), acq("a", false)}, map[string]int{"a": 1}},
		{"namespaces apart", 1, []op{acq("a", true), acq("b", true), acq("a", false), acq("b", false)}, map[string]int{"a": 1, "b": 1}},
		{"a release gives a place back", 2, []op{acq("a", true), acq("a", true), acq("a", false), rel("a"), acq("a", true), acq("a", false)}, map[string]int{"a": 2}},
		{"released to nothing, forgotten", 2, []op{acq("a", true), acq("a", true), rel("a"), rel("a"), acq("b", true)}, map[string]int{"b": 1}},
		{"a stray release counts nothing below zero", 1, []op{rel("a"), acq("a", true), acq("a", false)}, map[string]int{"a": 1}},
		{"another's release frees no place", 1, []op{acq("a", true), acq("b", true), rel("b"), acq("a", false)}, map[string]int{"a": 1}},
		{"off", 0, []op{acq("a", true), acq("a", true), acq("a", true), rel("a")}, map[string]int{}},
		{"negative is off", -3, []op{acq("a", true), acq("a", true)}, map[string]int{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newTenantShare(c.limit)
			for i, o := range c.ops {
				if o.release {
					s.release(o.namespace)
					continue
				}
				if got := s.acquire(o.namespace); got != o.want {
					t.Fatalf("op %d: acquire(%q) = %v, want %v", i, o.namespace, got, o.want)
				}
			}
			if len(s.running) != len(c.want) {
				t.Errorf("running %v, want %v", s.running, c.want)
			}
			for ns, n := range c.want {
				if got := s.count(ns); got != n {
					t.Errorf("count(%q) = %d, want %d", ns, got, n)
				}
			}
		})
	}
}

// TestTenantShareLimit: the flag's number as given, 0 off, and by default
// a quarter of the workers, at least 1.
func TestTenantShareLimit(t *testing.T) {
	for _, c := range []struct{ flag, workers, want int }{
		{-1, 8, 2},
		{-1, 16, 4},
		{-1, 7, 1},
		{-1, 3, 1},
		{-1, 1, 1},
		{0, 8, 0},
		{3, 8, 3},
		{12, 8, 12},
	} {
		if got := tenantShareLimit(c.flag, c.workers); got != c.want {
			t.Errorf("tenantShareLimit(%d, %d workers) = %d, want %d", c.flag, c.workers, got, c.want)
		}
	}
}

// shareReconciler is a reconciler as SetupWithManager leaves it, with a
// share of limit and no client: a reconcile that gets past the share
// panics in panickyClient.
func shareReconciler(limit int) *AddonReconciler {
	return &AddonReconciler{
		Client:  panickyClient{},
		Config:  Config{Namespace: "capstan-system", TrustedNamespaces: []string{"capstan-system", "platform"}}.WithDefaults(),
		share:   newTenantShare(limit),
		retries: newRetryLimiter(),
	}
}

// panickyClient panics at the first use, as a bug in a reconcile would.
type panickyClient struct{ client.Client }

func (panickyClient) Scheme() *runtime.Scheme { panic("a reconcile went past the share") }

// TestReconcileDefersPastTheShare: a reconcile of a restricted namespace
// whose share is running does nothing (it would panic here if it read the
// Addon) and is queued again after a second or two; the failures the
// add-on had counted stay counted, and its place is not taken.
func TestReconcileDefersPastTheShare(t *testing.T) {
	r := shareReconciler(1)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "tenant", Name: "web"}}
	r.retries.When(req) // two failures before
	r.retries.When(req)
	if !r.share.acquire("tenant") {
		t.Fatal("the share has no place for the first reconcile")
	}
	for range 3 {
		res, err := r.Reconcile(context.Background(), req)
		if err != nil || res.RequeueAfter < shareRetryDelay || res.RequeueAfter > 2*shareRetryDelay {
			t.Fatalf("a reconcile past the share: %+v, %v; want a requeue after %s to %s and no error", res, err, shareRetryDelay, 2*shareRetryDelay)
		}
		// What controller-runtime does after a RequeueAfter.
		r.retries.Forget(req)
	}
	if n := r.retries.NumRequeues(req); n != 2 {
		t.Errorf("after the deferrals the add-on has %d failures counted, want the 2 it had", n)
	}
	if n := r.share.count("tenant"); n != 1 {
		t.Errorf("the deferrals changed the namespace's count to %d, want 1", n)
	}
	r.retries.Forget(req) // a reconcile that ran and ended well
	if n := r.retries.NumRequeues(req); n != 0 {
		t.Errorf("a reconcile that ended well left %d failures counted", n)
	}
}

// TestReconcileGivesItsPlaceBack: a reconcile gives its place back however
// it ends, a panic too; cluster-profile add-ons take no place and are
// never deferred, even with a share of one.
func TestReconcileGivesItsPlaceBack(t *testing.T) {
	r := shareReconciler(1)
	tenant := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "tenant", Name: "web"}}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the reconcile did not get past a free share")
			}
		}()
		_, _ = r.Reconcile(context.Background(), tenant)
	}()
	if n := r.share.count("tenant"); n != 0 {
		t.Fatalf("a reconcile that panicked kept %d places of its namespace", n)
	}
	for _, ns := range []string{"capstan-system", "platform"} {
		for range 3 {
			leave, ok := r.enterShare(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "cert-manager"}})
			if !ok {
				t.Fatalf("a cluster-profile add-on of %s was deferred", ns)
			}
			defer leave()
		}
		if n := r.share.count(ns); n != 0 {
			t.Errorf("cluster-profile add-ons of %s took %d places", ns, n)
		}
	}
	if _, ok := r.enterShare(tenant); !ok {
		t.Error("a tenant's add-on was deferred by cluster-profile reconciles")
	}
}

// TestDeferralDelaysSpread: the requeue delays of a wave of deferrals are
// spread over the second after shareRetryDelay.
func TestDeferralDelaysSpread(t *testing.T) {
	r := shareReconciler(1)
	r.share.acquire("tenant")
	seen := map[time.Duration]bool{}
	for i := range 20 {
		req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "tenant", Name: "web-" + string(rune('a'+i))}}
		res, _ := r.Reconcile(context.Background(), req)
		seen[res.RequeueAfter.Truncate(100*time.Millisecond)] = true
	}
	if len(seen) < 4 {
		t.Errorf("20 deferrals came back at %d moments (to 100 ms), want them spread", len(seen))
	}
}
