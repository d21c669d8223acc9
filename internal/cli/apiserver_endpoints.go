package cli

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/go-logr/logr"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/netguard"
)

// The API server's own endpoints are read from the EndpointSlices of the
// default/kubernetes Service, which the API servers keep themselves.
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list;watch

// apiServerResync is how often the watch of the API server's EndpointSlices
// is listed anew, besides its events.
const apiServerResync = 10 * time.Minute

// apiServerEndpoints keeps a deny-list holding the addresses of the
// cluster API server's endpoints: in a pod, rest.Config's host is the
// kubernetes Service's address, and the servers behind it are reached
// directly at their own addresses, which the fetch guard must refuse as
// well, on every port.
type apiServerEndpoints struct {
	// Reader lists the EndpointSlices once at start, before any fetch.
	Reader client.Reader
	// Clientset watches them while the controller runs.
	Clientset kubernetes.Interface
	// Deny is the list kept current, shared by the fetch guards.
	Deny *netguard.DenyList
	Log  logr.Logger
}

// kubernetesSlices selects the EndpointSlices of the default/kubernetes
// Service, for the first List and for the watch alike.
var kubernetesSlices = labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: "kubernetes"})

// selectKubernetes narrows the watch's list options to kubernetesSlices.
func selectKubernetes(o *metav1.ListOptions) {
	o.LabelSelector = kubernetesSlices.String()
}

// Refresh lists the EndpointSlices and sets the deny-list from them.
func (e *apiServerEndpoints) Refresh(ctx context.Context) error {
	found, err := e.list(ctx)
	if err != nil {
		hint := "it is read again"
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			hint = "the controller's role must allow list and watch on endpointslices.discovery.k8s.io"
		}
		return fmt.Errorf("reading the API server's endpoints (EndpointSlices of the default/kubernetes Service), which the fetch guard refuses: %w; %s", err, hint)
	}
	return e.set(found)
}

// list reads the EndpointSlices of the default/kubernetes Service.
func (e *apiServerEndpoints) list(ctx context.Context) ([]*discoveryv1.EndpointSlice, error) {
	var list discoveryv1.EndpointSliceList
	if err := e.Reader.List(ctx, &list, client.InNamespace(metav1.NamespaceDefault),
		client.MatchingLabelsSelector{Selector: kubernetesSlices}); err != nil {
		return nil, err
	}
	found := make([]*discoveryv1.EndpointSlice, 0, len(list.Items))
	for i := range list.Items {
		found = append(found, &list.Items[i])
	}
	return found, nil
}

// First reads the EndpointSlices until it succeeds, since no fetch may run
// before their addresses are refused. The controller's rights refusing the
// read end it at once, as no retry mends them; an API server that does
// not answer yet is waited for, as the manager would wait for it.
func (e *apiServerEndpoints) First(ctx context.Context) error {
	delay := time.Second
	for {
		attempt, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := e.Refresh(attempt)
		cancel()
		if err == nil || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return err
		}
		e.Log.Info("Waiting for the API server to read its endpoints", "error", err.Error(), "retryIn", delay)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, 30*time.Second)
	}
}

// set puts the slices' addresses on the deny-list.
func (e *apiServerEndpoints) set(found []*discoveryv1.EndpointSlice) error {
	entries := apiServerDenyEntries(found)
	if len(entries) == 0 {
		// NOTE: slices with no address are an API server being restarted
		// or replaced; the addresses seen last are still the API server's
		// until others are listed, so they stay refused.
		return nil
	}
	if err := e.Deny.Set(entries); err != nil {
		return err
	}
	e.Log.V(1).Info("Refusing the API server's endpoints", "addresses", entries)
	return nil
}

// Start watches the EndpointSlices until ctx ends, keeping the deny-list
// current as the API servers come and go.
func (e *apiServerEndpoints) Start(ctx context.Context) error {
	lw := toolscache.NewFilteredListWatchFromClient(e.Clientset.DiscoveryV1().RESTClient(), "endpointslices", metav1.NamespaceDefault, selectKubernetes)
	informer := toolscache.NewSharedIndexInformer(lw, &discoveryv1.EndpointSlice{}, apiServerResync, toolscache.Indexers{})
	update := func() {
		var found []*discoveryv1.EndpointSlice
		for _, o := range informer.GetStore().List() {
			if s, ok := o.(*discoveryv1.EndpointSlice); ok {
				found = append(found, s)
			}
		}
		if err := e.set(found); err != nil {
			e.Log.Error(err, "Cannot refuse the API server's endpoints")
		}
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { update() },
		UpdateFunc: func(any, any) { update() },
		DeleteFunc: func(any) { update() },
	}); err != nil {
		return err
	}
	informer.Run(ctx.Done())
	return nil
}

// NeedLeaderElection is false: every replica fetches (its API server serves
// plans), so every replica keeps its guard's list.
func (e *apiServerEndpoints) NeedLeaderElection() bool { return false }

// apiServerDenyEntries returns the addresses of the endpoints in the
// slices, sorted, as deny-list entries for every port. Every endpoint
// counts, ready or not: one that is starting or terminating is still an
// API server.
func apiServerDenyEntries(found []*discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range found {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		for _, ep := range s.Endpoints {
			for _, a := range ep.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil {
					continue
				}
				out = append(out, ip.Unmap().String())
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
