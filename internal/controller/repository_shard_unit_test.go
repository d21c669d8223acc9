package controller

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/notify"
)

// TestForgetRepositoryClosesOnlyADeletedOne: a failing repository that
// the shard's cache loses is forgotten either way, but its incident is
// closed only when the API server no longer has it; one relabelled into
// another shard keeps its incident open for that shard.
func TestForgetRepositoryClosesOnlyADeletedOne(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := capstanv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	moved := types.NamespacedName{Namespace: "platform", Name: "moved"}
	deleted := types.NamespacedName{Namespace: "platform", Name: "deleted"}
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&capstanv1.AddonRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: moved.Namespace, Name: moved.Name, Labels: map[string]string{"capstan.dev/shard": "b"}}}).Build()
	r := &AddonRepositoryReconciler{APIReader: api, notified: map[types.NamespacedName]repoNotice{
		moved:   {state: "False/RepositoryUnreadable/0", severity: notify.SeverityWarning},
		deleted: {state: "False/RepositoryUnreadable/0", severity: notify.SeverityWarning},
	}}
	for _, tc := range []struct {
		key       types.NamespacedName
		wantClose bool
	}{{moved, false}, {deleted, true}} {
		e, err := r.forgetRepository(context.Background(), tc.key)
		if err != nil {
			t.Fatal(err)
		}
		if got := e != nil; got != tc.wantClose {
			t.Errorf("%s: close sent %v, want %v (event %+v)", tc.key, got, tc.wantClose, e)
		}
		if _, kept := r.notified[tc.key]; kept {
			t.Errorf("%s: still remembered as notified", tc.key)
		}
	}
}
