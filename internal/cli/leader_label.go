package cli

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// The leader labels its own Pod, in the controller's namespace.
// +kubebuilder:rbac:groups="",namespace=system,resources=pods,verbs=get;patch

// leaderLabelRetry is how long the labeller waits between two tries of a
// patch the API server did not take.
const leaderLabelRetry = 2 * time.Second

// podLabeller keeps capstanv1.LeaderLabel on the controller's own Pod
// true to what the replica is: it removes the label as the replica starts,
// and sets it once the replica is elected. The Service of the API, the web
// page and the git webhooks selects the label, so that it sends them to
// the leader, the one replica that serves them, while every replica that
// is healthy is Ready.
//
// NOTE: two Pods may carry the label for a short while. A leader that
// loses its Lease exits (controller-runtime's manager returns "leader
// election lost"), and its container restarts in the same Pod, label
// and all: the Pod is not Ready while the container is down, and the
// restarted replica removes the label before it reports itself ready
// (cleared), so the Service never sends it a request as a standby. A
// replica that is cut off from the API server long enough for another
// to take the Lease gives up leading after the renew deadline (10 s),
// before the Lease expires for the others (15 s); only a process stalled
// past both, or clocks apart by more than the difference, has two Ready
// Pods labelled at once, and then the API's requests are served by either:
// each of them is one request to the API server, which orders the writes
// as it does those of the two reconcilers that leader election allows in
// that same window.
type podLabeller struct {
	client  client.Client
	pod     types.NamespacedName
	elected <-chan struct{}
	log     logr.Logger
	// cleared closes once the label is off the Pod, or at once when the
	// replica knows no Pod of its own.
	cleared chan struct{}
}

// newPodLabeller labels the Pod that POD_NAME and POD_NAMESPACE name, as
// the downward API sets them in the chart's and config/'s Deployment.
// Without them, as when the controller runs outside a cluster, it labels
// nothing and says so once.
func newPodLabeller(c client.Client, elected <-chan struct{}, log logr.Logger) *podLabeller {
	l := &podLabeller{client: c, elected: elected, log: log, cleared: make(chan struct{}),
		pod: types.NamespacedName{Namespace: os.Getenv("POD_NAMESPACE"), Name: os.Getenv("POD_NAME")}}
	if l.pod.Name == "" || l.pod.Namespace == "" {
		log.Info("Not labelling the controller's Pod as the leader: POD_NAME or POD_NAMESPACE is not set (the Deployment sets them from the downward API)",
			"label", capstanv1.LeaderLabel)
		close(l.cleared)
	}
	return l
}

// NeedLeaderElection is false: a standby removes a label it may have kept
// from its container's previous run, before it is ready.
func (l *podLabeller) NeedLeaderElection() bool { return false }

// Start removes the label, waits to lead, then sets it. Each patch is
// tried again until the API server takes it or ctx ends.
func (l *podLabeller) Start(ctx context.Context) error {
	if l.pod.Name == "" || l.pod.Namespace == "" {
		return nil
	}
	if !l.patch(ctx, false) {
		return nil
	}
	close(l.cleared)
	select {
	case <-ctx.Done():
		return nil
	case <-l.elected:
	}
	if l.patch(ctx, true) {
		l.log.Info("Labelled the controller's Pod as the leader", "pod", l.pod.String(), "label", capstanv1.LeaderLabel)
	}
	return nil
}

// patch sets the label (leading) or removes it, and reports whether it did
// before ctx ended.
func (l *podLabeller) patch(ctx context.Context, leading bool) bool {
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name = l.pod.Namespace, l.pod.Name
	data := leaderLabelPatch(leading)
	err := wait.PollUntilContextCancel(ctx, leaderLabelRetry, true, func(ctx context.Context) (bool, error) {
		if err := l.client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, data)); err != nil {
			l.log.Error(err, "Cannot label the controller's Pod; trying again (the controller's Role must let it get and patch pods in its namespace)",
				"pod", l.pod.String(), "label", capstanv1.LeaderLabel, "leading", leading)
			return false, nil
		}
		return true, nil
	})
	return err == nil
}

// leaderLabelPatch is the JSON merge patch of a Pod's labels that sets
// capstanv1.LeaderLabel to "true" when leading, and removes it otherwise.
// It names that label alone, so the Deployment's own labels stay.
func leaderLabelPatch(leading bool) []byte {
	var value any // null removes the label
	if leading {
		value = "true"
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{capstanv1.LeaderLabel: value}}})
	if err != nil {
		panic(err) // a map of strings always marshals
	}
	return data
}

// readyCheck is the controller's /readyz: a replica is ready when it is
// healthy, leader or standby, since a standby can take over. It waits
// only for cleared, so that a replica whose container restarted in a Pod
// still labelled as the leader's gets no request before the label is gone.
// Which replica serves the API, the web page and the git webhooks is the
// Service's selector's business (capstanv1.LeaderLabel), not readiness':
// a standby that is not Ready held `helm install --wait`, `kubectl rollout
// status` and any rollout with maxUnavailable 0 for ever.
func readyCheck(cleared <-chan struct{}) healthz.Checker {
	return func(*http.Request) error {
		select {
		case <-cleared:
			return nil
		default:
			return errors.New("removing the leader label that the controller's Pod may keep from an earlier run")
		}
	}
}
