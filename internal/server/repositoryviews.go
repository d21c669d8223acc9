package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// repositoryViewTTL is how long the pages' answer of which AddonRepository
// manages an Addon serves their later views.
const repositoryViewTTL = 5 * time.Second

// maxRepositoryViews bounds the answers kept: past it, those that have
// expired are dropped, and all of them when none has.
const maxRepositoryViews = 4096

// repositoryViews keeps, for the pages' views, the AddonRepositories that
// manage Addons, by their namespace and name, as read; one that is gone
// is kept as nil.
//
// NOTE: the AddonRepository is read as the controller, whose client has no
// rate limit, and anyone who may get one git-managed Addon may load its
// page, or its Edit values, in a loop: a read per view would flood the API
// server as the controller, and slow its own reconciles (as catalogCache
// says of the catalog). One read at a time of each repository, then one
// per repositoryViewTTL, whatever the views. The manager's cache is not
// used: the cache of a shard (--watch-label-selector) holds only the
// shard's own AddonRepositories, and an Addon of another shard's
// repository must still show as git-managed. Writes read the repository
// afresh (managedBy): they commit to it.
type repositoryViews struct {
	flight singleflight.Group
	mu     sync.Mutex
	read   map[client.ObjectKey]repositoryView
}

// repositoryView is one answer: the repository, nil when it is gone.
type repositoryView struct {
	repo *capstanv1.AddonRepository
	at   time.Time
}

// get answers the repository key, from the last read when it is under
// repositoryViewTTL old, else read again with r; a failed read is not
// kept.
func (v *repositoryViews) get(ctx context.Context, r client.Reader, key client.ObjectKey, now time.Time) (*capstanv1.AddonRepository, error) {
	v.mu.Lock()
	if seen, ok := v.read[key]; ok && now.Sub(seen.at) < repositoryViewTTL {
		v.mu.Unlock()
		return seen.repo.DeepCopy(), nil
	}
	v.mu.Unlock()
	ch := v.flight.DoChan(key.String(), func() (any, error) {
		// NOTE: shared by every view that waits, so it does not end with
		// the first one's context.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), repositoryViewTTL)
		defer cancel()
		repo := &capstanv1.AddonRepository{}
		err := r.Get(ctx, key, repo)
		if apierrors.IsNotFound(err) {
			repo, err = nil, nil
		}
		if err != nil {
			return nil, err
		}
		v.keep(key, repositoryView{repo: repo, at: now})
		return repo, nil
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(*capstanv1.AddonRepository).DeepCopy(), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// keep stores one answer, within maxRepositoryViews.
func (v *repositoryViews) keep(key client.ObjectKey, seen repositoryView) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.read == nil {
		v.read = map[client.ObjectKey]repositoryView{}
	}
	if len(v.read) >= maxRepositoryViews {
		for k, old := range v.read {
			if seen.at.Sub(old.at) >= repositoryViewTTL {
				delete(v.read, k)
			}
		}
		if len(v.read) >= maxRepositoryViews {
			clear(v.read)
		}
	}
	v.read[key] = seen
}

// managedByView is managedBy for a page's view, which changes nothing:
// its answer may be up to repositoryViewTTL old (repositoryViews).
func (s *Server) managedByView(ctx context.Context, a *capstanv1.Addon) (*capstanv1.AddonRepository, error) {
	name := gitManaged(a)
	if name == "" || s.Controller == nil {
		return s.managedBy(ctx, a)
	}
	repo, err := s.repositoryViews.get(ctx, s.Controller, client.ObjectKey{Namespace: a.Namespace, Name: name}, s.now())
	if err != nil {
		return nil, fmt.Errorf("reading the AddonRepository %s that manages Addon %s: %w", name, a.Name, err)
	}
	return repo, nil
}
