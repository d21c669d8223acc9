package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// watchGaps records the resources a watch cache may not list or watch: its
// informers are cluster-wide, so an account with rights in some namespaces
// only (as a remote cluster's least-privilege account often is) is refused
// them. Drift of such a resource is then undone at the resync only, and
// its objects are read from the API server at every look. The refusal is
// logged once per resource, not at each of the reflector's retries, and
// the plan names the resource and what to grant (watchNotice). Once the
// account is granted, the next list succeeds and the informer syncs.
type watchGaps struct {
	// server is the cluster's API server, redacted (remote.Config.Server);
	// empty for the controller's own cluster.
	server string

	mu sync.Mutex
	// forbidden holds the resources refused, each with the refusal.
	forbidden map[schema.GroupResource]string
}

// handler is the watch cache's DefaultWatchErrorHandler: a Forbidden
// list or watch is recorded, and logged the first time for its resource;
// other errors are client-go's to log.
func (g *watchGaps) handler(ctx context.Context, r *toolscache.Reflector, err error) {
	gr, ok := forbiddenResource(err)
	if !ok {
		toolscache.DefaultWatchErrorHandler(ctx, r, err)
		return
	}
	g.mu.Lock()
	_, seen := g.forbidden[gr]
	if g.forbidden == nil {
		g.forbidden = map[schema.GroupResource]string{}
	}
	g.forbidden[gr] = err.Error()
	g.mu.Unlock()
	if !seen {
		logf.FromContext(ctx).Info("Watching for drift is forbidden: drift of this resource waits for the resync; grant the account list and watch on it at the cluster scope",
			"resource", gr.String(), "cluster", clusterName(g.server), "error", err.Error())
	}
}

// forbiddenResource returns the resource a Forbidden error names.
func forbiddenResource(err error) (schema.GroupResource, bool) {
	var status apierrors.APIStatus
	if !apierrors.IsForbidden(err) || !errors.As(err, &status) {
		return schema.GroupResource{}, false
	}
	d := status.Status().Details
	if d == nil || d.Kind == "" {
		return schema.GroupResource{}, false
	}
	return schema.GroupResource{Group: d.Group, Resource: d.Kind}, true
}

// refused reports whether the cache was refused gr; nil refuses nothing.
func (g *watchGaps) refused(gr schema.GroupResource) bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.forbidden[gr]
	return ok
}

// refusedAny reports whether the cache was refused any resource; nil
// refuses nothing.
func (g *watchGaps) refusedAny() bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.forbidden) > 0
}

// synced forgets a refusal once the resource's informer has synced: the
// account was granted it.
func (g *watchGaps) synced(gr schema.GroupResource) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.forbidden, gr)
}

// watchNotice tells, in the plan, which of the add-on's resources the
// cluster's watch cache may not list or watch, and what to grant; nil when
// there is none.
func (s *scope) watchNotice(resync string) *capstanv1.Notice {
	if len(s.watchGaps) == 0 {
		return nil
	}
	names := make([]string, 0, len(s.watchGaps))
	for _, gr := range s.watchGaps {
		names = append(names, gr.String())
	}
	slices.Sort(names)
	names = slices.Compact(names)
	path, who := "objects", "the add-ons account"
	if s.cluster.server != "" {
		path, who = "spec.kubeConfig", s.cluster.as
	}
	where := clusterName(s.cluster.server)
	msg := fmt.Sprintf("drift of %s in %s is not watched: %s may not list and watch them at the cluster scope, so a change made there behind Capstan's back is undone at the resync (every %s), not within seconds",
		strings.Join(names, ", "), where, who, resync)
	grant := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == secretsResource })
	if len(grant) > 0 {
		msg += fmt.Sprintf("; grant it the verbs list and watch on %s in a ClusterRole", strings.Join(grant, ", "))
	}
	if len(grant) < len(names) {
		// NOTE: the informer asks for the metadata of Capstan's Secrets
		// alone, but RBAC cannot grant that: list on secrets returns
		// their data, of every Secret the grant covers.
		msg += fmt.Sprintf("; for secrets, list and watch at the cluster scope would let it read every Secret in %s, their data included, whatever Capstan asks for: the least grant leaves secrets out, and their drift to the resync", where)
	}
	return &capstanv1.Notice{Path: path, Message: msg}
}

// secretsResource is how watchNotice names the Secrets resource.
const secretsResource = "secrets"
