package controller

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
)

// TestWatchGaps: a Forbidden list is recorded for its resource until the
// resource's informer syncs; another error records nothing; the plan's
// notice names the resources and the verbs to grant.
func TestWatchGaps(t *testing.T) {
	g := &watchGaps{}
	cms := schema.GroupResource{Resource: "configmaps"}
	deploys := schema.GroupResource{Group: "apps", Resource: "deployments"}
	r := &toolscache.Reflector{}
	for range 3 {
		g.handler(context.Background(), r, apierrors.NewForbidden(deploys, "", errors.New(`User "x" cannot list resource "deployments" in API group "apps" at the cluster scope`)))
	}
	g.handler(context.Background(), r, apierrors.NewInternalError(errors.New("boom")))
	if !g.refused(deploys) || g.refused(cms) || len(g.forbidden) != 1 {
		t.Fatalf("recorded %v; want deployments.apps alone", g.forbidden)
	}
	s := &scope{cluster: &targetCluster{server: "https://b.example:6443", as: "system:serviceaccount:ops:deployer"},
		watchGaps: []schema.GroupResource{deploys, cms, deploys}}
	n := s.watchNotice("5m0s")
	if n == nil || n.Path != "spec.kubeConfig" {
		t.Fatalf("notice %+v", n)
	}
	for _, want := range []string{"configmaps, deployments.apps", "the remote cluster https://b.example:6443", "system:serviceaccount:ops:deployer", "list and watch", "every 5m0s"} {
		if !strings.Contains(n.Message, want) {
			t.Errorf("the notice does not say %q: %s", want, n.Message)
		}
	}
	g.synced(deploys)
	if g.refused(deploys) {
		t.Error("a resource whose informer synced is still refused")
	}
	if (&scope{cluster: &targetCluster{}}).watchNotice("5m0s") != nil {
		t.Error("a notice with nothing refused")
	}
}
