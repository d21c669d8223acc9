package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// repositoryReads is the controller's reader, counting the
// AddonRepositories it reads.
type repositoryReads struct {
	client.Reader
	n atomic.Int64
}

func (r *repositoryReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*capstanv1.AddonRepository); ok {
		r.n.Add(1)
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// TestPageViewsReadTheRepositoryOnce loads a git-managed Addon's page 50
// times: the AddonRepository that manages it, read as the controller,
// whose client has no rate limit, is read once, where each view read it;
// once the answer is older than a few seconds it is read again, so a
// repository deleted or created shows within them. A save of Edit values,
// which reads it afresh, reads it only once its CSRF token has passed.
func TestPageViewsReadTheRepositoryOnce(t *testing.T) {
	ns := namespace(t)
	gitManagedLonghorn(t, ns)
	editor := user(t, ns, "editor", addonRule("get", "list", "patch"))
	srv := newServer()
	c := &clock{now: time.Now()}
	srv.Now = c.Now
	reads := &repositoryReads{Reader: srv.Controller}
	srv.Controller = reads
	s := signInAt(t, serve(t, srv), editor)
	view := func() {
		t.Helper()
		code, page := s.send(t, http.MethodGet, "/addons/"+ns+"/longhorn", nil)
		if code != http.StatusOK || !strings.Contains(page, "committed to git") {
			t.Fatalf("the page of a git-managed Addon: %d, and it does not say that edits are committed\n%s", code, page)
		}
	}
	for range 50 {
		view()
	}
	if n := reads.n.Load(); n != 1 {
		t.Errorf("50 views of the page read the AddonRepository %d times as the controller; want 1", n)
	}
	c.advance(10 * time.Second)
	view()
	if n := reads.n.Load(); n != 2 {
		t.Errorf("a view after the answer expired: %d reads in all; want 2", n)
	}
	// A save, which reads the repository afresh, without the form's CSRF
	// token reads nothing.
	forged := s
	forged.csrf = "not-this-session's"
	for range 10 {
		if code, _ := forged.send(t, http.MethodPost, "/addons/"+ns+"/longhorn/edit", url.Values{}); code != http.StatusForbidden {
			t.Fatalf("a save without the form's CSRF token: %d; want 403", code)
		}
	}
	if n := reads.n.Load(); n != 2 {
		t.Errorf("10 saves without the form's CSRF token: %d reads in all; want still 2", n)
	}
}
