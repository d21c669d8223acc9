package controller

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// TestWatchGaps: a Forbidden list is recorded for its resource until the
// resource's informer syncs; another error records nothing; the plan's
// notice names the resources and the verbs to grant.
func TestWatchGaps(t *testing.T) {
	g := &watchGaps{server: "https://b.example:6443"}
	cms := schema.GroupResource{Resource: "configmaps"}
	deploys := schema.GroupResource{Group: "apps", Resource: "deployments"}
	r := &toolscache.Reflector{}
	var logged []string
	ctx := logf.IntoContext(context.Background(), funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{}))
	for range 3 {
		g.handler(ctx, r, apierrors.NewForbidden(deploys, "", errors.New(`User "x" cannot list resource "deployments" in API group "apps" at the cluster scope`)))
	}
	g.handler(context.Background(), r, apierrors.NewInternalError(errors.New("boom")))
	if !g.refused(deploys) || g.refused(cms) || len(g.forbidden) != 1 {
		t.Fatalf("recorded %v; want deployments.apps alone", g.forbidden)
	}
	if len(logged) != 1 || !strings.Contains(logged[0], `"cluster"="the remote cluster https://b.example:6443"`) {
		t.Errorf("logged %q; want one line that names the cluster", logged)
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
	// Secrets: list at the cluster scope reads every one; the least grant
	// leaves them out.
	secrets := schema.GroupResource{Resource: "secrets"}
	s.watchGaps = []schema.GroupResource{secrets, cms}
	n = s.watchNotice("5m0s")
	for _, want := range []string{"drift of configmaps, secrets in", "grant it the verbs list and watch on configmaps in a ClusterRole", "read every Secret in the remote cluster https://b.example:6443", "the least grant leaves secrets out"} {
		if !strings.Contains(n.Message, want) {
			t.Errorf("the notice does not say %q: %s", want, n.Message)
		}
	}
	s.watchGaps = []schema.GroupResource{secrets}
	if n = s.watchNotice("5m0s"); strings.Contains(n.Message, "grant it the verbs") || !strings.Contains(n.Message, "read every Secret") {
		t.Errorf("with secrets alone refused, the notice: %s", n.Message)
	}
	if !g.refusedAny() || (*watchGaps)(nil).refusedAny() || (&watchGaps{}).refusedAny() {
		t.Error("refusedAny does not tell a recorded refusal from none")
	}
	g.synced(deploys)
	if g.refused(deploys) {
		t.Error("a resource whose informer synced is still refused")
	}
	if g.refusedAny() {
		t.Error("refusedAny with every refusal forgotten")
	}
	if (&scope{cluster: &targetCluster{}}).watchNotice("5m0s") != nil {
		t.Error("a notice with nothing refused")
	}
}
