package cli

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/netguard"
)

// addRemoteClusterAllowFlag defines --remote-cluster-allow. `capstan
// controller` and `capstan plan` share it, so that a plan reaches the
// remote clusters the controller would, and the flag that a refusal names
// is one that both take.
func addRemoteClusterAllowFlag(fs *pflag.FlagSet, allow *[]string) {
	fs.StringSliceVar(allow, "remote-cluster-allow", nil,
		"Remote API servers (spec.kubeConfig) the egress guard lets through although it would refuse them, in the forms of --fetch-allow; loopback, link-local and metadata addresses are refused otherwise.")
}

// remoteGuard returns the egress guard of the remote clusters' API servers
// (spec.kubeConfig), built from the fetch guard's configuration: its
// deny-list, which holds this cluster's API server, fixed and kept current,
// and --fetch-deny-private, and the tests' --fetch-loopback-only. Only
// allow, --remote-cluster-allow, opens it: --fetch-allow names sources,
// not clusters to send credentials to.
//
// NOTE: a remote cluster is another cluster: never this one's API server,
// which an Addon would otherwise reach with the kubeconfig's credentials
// instead of the add-ons account's. The controller and `capstan plan`
// both build their guard here, so that neither dials what the other
// refuses.
func remoteGuard(allow []string, fetch netguard.Config) (netguard.Config, error) {
	g := netguard.Config{Allow: allow, Deny: fetch.Deny, DenyLive: fetch.DenyLive, DenyPrivate: fetch.DenyPrivate, LoopbackOnly: fetch.LoopbackOnly}
	if _, err := netguard.New(g); err != nil {
		return netguard.Config{}, fmt.Errorf("--remote-cluster-allow: %w", err)
	}
	return g, nil
}

// planGuards returns the fetch guard's and the remote clusters' egress
// guard's configuration for a command that plans in the person's own
// process: both refuse this cluster's API server, at the address cfg names
// (and, in a pod, the kubernetes Service's) and at the addresses of the
// default/kubernetes Service's endpoints, read once with reader, as the
// controller does before its first fetch. A plan runs for seconds, so the
// endpoints are not watched.
//
// A person whose rights do not cover reading the endpoints plans with the
// API server's address alone refused, as a plan is no reason to grant
// them; any other error of the read ends the plan, which would not reach
// the API server either.
func planGuards(ctx context.Context, cfg *rest.Config, reader client.Reader, fetch netguard.Config, remoteAllow []string) (fetchGuard, remote netguard.Config, err error) {
	fetch.Deny = append(append([]string(nil), fetch.Deny...), netguard.APIServerDenyEntries(cfg.Host)...)
	fetch.DenyLive = &netguard.DenyList{}
	endpoints := &apiServerEndpoints{Reader: reader, Deny: fetch.DenyLive, Log: logr.Discard()}
	if slices, err := endpoints.list(ctx); err == nil {
		if err := endpoints.set(slices); err != nil {
			return netguard.Config{}, netguard.Config{}, err
		}
	} else if !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
		// NOTE: the command reads them once and stops; the controller's
		// hint that they are read again does not hold here.
		return netguard.Config{}, netguard.Config{}, fmt.Errorf("%w; the plan reads the API server's endpoints (EndpointSlices of the default/kubernetes Service) to keep its fetches off them", err)
	}
	remote, err = remoteGuard(remoteAllow, fetch)
	if err != nil {
		return netguard.Config{}, netguard.Config{}, err
	}
	return fetch, remote, nil
}
