package controller

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/health"
)

// TestHealthBudgetReachesEveryObject: 200 Ready objects whose check costs
// so much that one look's budget judges fewer than half of them. Each
// look judges the objects in the same order, so without what the earlier
// looks found the same objects would be left for the next look at every
// look, and the add-on would never be Ready; objects a check found
// Current, unchanged since, cost nothing, and a few looks judge them all.
func TestHealthBudgetReachesEveryObject(t *testing.T) {
	checks, err := health.Compile([]capstanv1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Database",
		Current: "status.phase == 'Ready' && status.items.all(a, status.items.all(b, a + b >= 0))"}})
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, 60)
	for i := range items {
		items[i] = int64(i)
	}
	var objs []*unstructured.Unstructured
	for i := range 200 {
		objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Database",
			"metadata": map[string]any{"namespace": "apps", "name": fmt.Sprintf("db%d", i), "generation": int64(1), "resourceVersion": fmt.Sprint(100 + i)},
			"status":   map[string]any{"phase": "Ready", "observedGeneration": int64(1), "items": items},
		}})
	}
	addon := &capstanv1.Addon{}
	addon.Namespace, addon.Name, addon.UID, addon.Generation = "apps", "dbs", "u1", 1
	r := &AddonReconciler{}
	s := &scope{addon: addon}
	ctx := context.Background()
	look := func() int {
		checks.NewLook()
		j := &judgement{}
		for _, o := range objs {
			if err := r.judgeObject(ctx, s, checks, nil, j, o, o, false, false); err != nil {
				t.Fatal(err)
			}
		}
		return len(j.notCurrent)
	}
	first := look()
	if first == 0 {
		t.Fatal("the first look judged every object: the test needs a check that spends the budget")
	}
	left := first
	for n := 2; n <= 5 && left > 0; n++ {
		left = look()
		t.Logf("look %d: %d objects left for the next look", n, left)
	}
	if left > 0 {
		t.Errorf("after 5 looks, %d of 200 Ready objects are still left for the next look (the first look left %d)", left, first)
	}

	// A new generation may change the check: every object is judged again.
	addon.Generation = 2
	if again := look(); again != first {
		t.Errorf("a look at a new generation left %d objects, want %d as the first look", again, first)
	}

	// A deferred wave's wait looks at the earlier waves' objects once per
	// sync, each look from the first object: it goes on from what the
	// earlier looks found Current too.
	addon.Generation = 3
	byName := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		byName[o.GetName()] = o
	}
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Get: func(_ context.Context, _ client.WithWatch, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
			byName[key.Name].DeepCopyInto(obj.(*unstructured.Unstructured))
			return nil
		},
	}).Build()
	s.applier, s.checks = &apply.Applier{Client: c}, checks
	for n := 1; n <= 5; n++ {
		wl, err := r.lookAtWave(ctx, s, objs, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		if left = len(wl.left); left == 0 {
			break
		}
	}
	if left > 0 {
		t.Errorf("after 5 looks of a wave's wait, %d of 200 Ready objects are still left", left)
	}
}
