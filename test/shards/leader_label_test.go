package shards_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testcluster"
	"capstan.dev/capstan/internal/testcontroller"
)

// TestLeaderLabelsItsPod runs two controllers with --leader-elect and the
// API on, each as the replica of a Pod object of its own (kwok's nodes run
// them), with the controller's own RBAC from config/. The first leads and
// labels its Pod; the second, whose Pod still carries the label as after a
// restart of its container, is Ready as a standby (before, /readyz refused
// every standby while the API was on, and it never started), and its Pod's
// label is gone by then. Once the first stops, the second takes the Lease
// and labels its own Pod, which the API's Service selects, within
// maxHandOver: the first gives its Lease up as it stops.
func TestLeaderLabelsItsPod(t *testing.T) {
	f := setup(t)
	ctx := t.Context()
	ports, err := testcluster.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	pods := []string{"capstan-controller-first", "capstan-controller-second"}
	for i, name := range pods {
		labels := map[string]string{"app.kubernetes.io/name": "capstan", "app.kubernetes.io/component": "controller"}
		if i == 1 {
			labels[capstanv1.LeaderLabel] = "true"
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: name, Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "controller", Image: "ghcr.io/capstan-dev/capstan:0.1.0"}}}}
		if err := f.admin.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.admin.Delete(context.Background(), pod) })
	}
	start := func(i int) *testcontroller.Process {
		bin, err := testcontroller.Named(f.bin, f.dir, pods[i])
		if err != nil {
			t.Fatal(err)
		}
		// NOTE: a Lease of the test's own, apart from the failover test's.
		return testcontroller.StartInPod(t, cluster, bin, f.dir, pods[i], "--leader-elect", "--leader-election-id=capstan-leader-label",
			"--http-bind-address="+net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i])))
	}
	leader := func(name string) bool {
		pod := &corev1.Pod{}
		if err := f.admin.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: name}, pod); err != nil {
			t.Fatal(err)
		}
		return pod.Labels[capstanv1.LeaderLabel] == "true"
	}
	waitLeader := func(name string, limit time.Duration) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, limit, true, func(context.Context) (bool, error) {
			return leader(name), nil
		}); err != nil {
			t.Fatalf("Pod %s is not labelled %s=true within %s", name, capstanv1.LeaderLabel, limit)
		}
	}

	first := start(0)
	waitLeader(pods[0], 60*time.Second)
	// start returns once /readyz answers 200: the standby is Ready.
	start(1)
	if leader(pods[1]) {
		t.Errorf("the standby is Ready while its Pod is still labelled as the leader's")
	}
	if !leader(pods[0]) {
		t.Errorf("the leader's Pod lost its label when a standby started")
	}
	// SIGTERM, as a rollout or a drain sends: the leader gives its Lease
	// up as it stops, and the standby labels its Pod without waiting for
	// the Lease to expire.
	stopped := time.Now()
	first.Stop()
	waitLeader(pods[1], maxTakeover+10*time.Second)
	handOver := time.Since(stopped)
	t.Logf("the standby labelled its Pod %s after the leader was sent SIGTERM (lease %s)", handOver.Round(100*time.Millisecond), leaseDuration)
	if handOver > maxHandOver {
		t.Errorf("the hand-over after SIGTERM took %s; want within %s, well within the lease of %s: the leader gives its Lease up as it stops",
			handOver, maxHandOver, leaseDuration)
	}
}
