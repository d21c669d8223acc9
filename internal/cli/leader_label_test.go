package cli

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestPodLabellerOnTheAPIServer runs the labeller of a replica whose Pod
// still carries the leader label from its container's previous run: the
// label goes before the replica is ready, comes back once it is elected,
// and the Pod's other labels stay.
func TestPodLabellerOnTheAPIServer(t *testing.T) {
	_, c := apiServer(t)
	ns := testNamespace(t, c)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "capstan-controller-0",
			Labels: map[string]string{"app.kubernetes.io/name": "capstan", capstanv1.LeaderLabel: "true"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "controller", Image: "ghcr.io/capstan-dev/capstan:0.1.0"}}},
	}
	if err := c.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	t.Setenv("POD_NAME", pod.Name)
	t.Setenv("POD_NAMESPACE", ns)
	elected := make(chan struct{})
	l := newPodLabeller(c, elected, log.Log)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- l.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the labeller ended with %v", err)
		}
	})

	labels := func() map[string]string {
		got := &corev1.Pod{}
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), got); err != nil {
			t.Fatal(err)
		}
		return got.Labels
	}
	select {
	case <-l.cleared:
	case <-time.After(30 * time.Second):
		t.Fatal("the labeller did not remove the leader label within 30 s")
	}
	if err := readyCheck(l.cleared)(nil); err != nil {
		t.Errorf("a standby whose label is gone is not ready: %v", err)
	}
	if got := labels(); got[capstanv1.LeaderLabel] != "" || got["app.kubernetes.io/name"] != "capstan" {
		t.Errorf("a standby's Pod is labelled %v; want the leader label gone and the rest kept", got)
	}
	close(elected)
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return labels()[capstanv1.LeaderLabel] == "true", nil
	}); err != nil {
		t.Fatalf("the leader's Pod is labelled %v; want %s=true", labels(), capstanv1.LeaderLabel)
	}
	if got := labels(); got["app.kubernetes.io/name"] != "capstan" {
		t.Errorf("the leader's patch dropped the Pod's other labels: %v", got)
	}
}

// TestPodLabellerWithoutAPod: outside a cluster, with no POD_NAME, the
// labeller labels nothing and the replica is ready at once.
func TestPodLabellerWithoutAPod(t *testing.T) {
	t.Setenv("POD_NAME", "")
	t.Setenv("POD_NAMESPACE", "capstan-system")
	l := newPodLabeller(nil, make(chan struct{}), log.Log)
	if err := readyCheck(l.cleared)(nil); err != nil {
		t.Errorf("a replica with no Pod is not ready: %v", err)
	}
	if err := l.Start(t.Context()); err != nil {
		t.Error(err)
	}
}
