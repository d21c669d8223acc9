package gitops_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/gitops"
)

// objects is a client.Reader over a few AddonRepositories and Secrets, as
// the API server would answer for them.
type objects map[client.ObjectKey]client.Object

func (o objects) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	have, ok := o[key]
	switch {
	case !ok:
		return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
	case fmt.Sprintf("%T", have) != fmt.Sprintf("%T", obj):
		return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
	}
	switch dst := obj.(type) {
	case *capstanv1.AddonRepository:
		have.(*capstanv1.AddonRepository).DeepCopyInto(dst)
	case *corev1.Secret:
		have.(*corev1.Secret).DeepCopyInto(dst)
	}
	return nil
}

func (o objects) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("not listed")
}

// TestWebhookRefusesAnotherShardsRepository: a controller started with
// --watch-label-selector capstan.dev/shard=a answers a valid push for a
// repository of shard b, or of no shard, with 409 naming its shard, and
// queues nothing; its own shard's push is queued.
func TestWebhookRefusesAnotherShardsRepository(t *testing.T) {
	const ns = "gitops"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hook"}, Data: map[string][]byte{gitops.WebhookSecretKey: []byte("s3cret")}}
	repo := func(name, shard string) *capstanv1.AddonRepository {
		r := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: capstanv1.AddonRepositorySpec{URL: "https://git.example.com/gitops.git", Branch: "main",
				WebhookSecretRef: &capstanv1.LocalObjectReference{Name: "hook"}}}
		if shard != "" {
			r.Labels = map[string]string{gitops.ShardLabel: shard}
		}
		return r
	}
	reader := objects{client.ObjectKeyFromObject(secret): secret}
	for _, r := range []*capstanv1.AddonRepository{repo("mine", "a"), repo("theirs", "b"), repo("main", "")} {
		reader[client.ObjectKeyFromObject(r)] = r
	}
	sel, err := labels.Parse(gitops.ShardLabel + "=a")
	if err != nil {
		t.Fatal(err)
	}
	syncer := &controller.AddonRepositoryReconciler{APIReader: reader, Selector: sel}
	hook := httptest.NewServer(&gitops.Webhook{Client: reader, Syncer: syncer})
	t.Cleanup(hook.Close)

	push := func(name string) (int, string) {
		t.Helper()
		return signedPush(t, hook.URL+"/hooks/git/"+ns+"/"+name, "s3cret", "refs/heads/main")
	}
	if code, body := push("mine"); code != http.StatusAccepted || !strings.Contains(body, "queued") {
		t.Fatalf("a push for this shard's repository: %d %q", code, body)
	}
	for name, want := range map[string]string{"theirs": `shard "b" (capstan.dev/shard=b)`, "main": "no shard"} {
		code, body := push(name)
		if code != http.StatusConflict || !strings.Contains(body, want) || !strings.Contains(body, "capstan.dev/shard=a") {
			t.Errorf("a push for %s, of another shard: %d %q; want 409 naming %s and this controller's selector", name, code, body, want)
		}
	}
	var other *gitops.OtherShardError
	if err := syncer.Trigger(context.Background(), client.ObjectKey{Namespace: ns, Name: "theirs"}); !errors.As(err, &other) || other.Shard != "b" {
		t.Errorf("Trigger of another shard's repository: %v", err)
	}
	if err := syncer.Trigger(context.Background(), client.ObjectKey{Namespace: ns, Name: "nothing-here"}); err == nil {
		t.Error("Trigger of a repository that does not exist queued a sync")
	}
}

// unavailable is a reader whose every read fails, as an API server that
// does not answer for a moment.
type unavailable struct{ objects }

func (unavailable) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return apierrors.NewServiceUnavailable("etcd is not answering")
}

// TestWebhookQueuesWhenTheShardCannotBeRead: a push whose repository the
// syncer cannot read, to tell its shard, for a moment's trouble of the API
// server is queued (202) all the same: a git host does not deliver a push
// again, and the sync reads the repository anew.
func TestWebhookQueuesWhenTheShardCannotBeRead(t *testing.T) {
	const ns = "gitops"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hook"}, Data: map[string][]byte{gitops.WebhookSecretKey: []byte("s3cret")}}
	repo := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine", Labels: map[string]string{gitops.ShardLabel: "a"}},
		Spec: capstanv1.AddonRepositorySpec{URL: "https://git.example.com/org/gitops.git", Branch: "main",
			WebhookSecretRef: &capstanv1.LocalObjectReference{Name: "hook"}}}
	reader := objects{client.ObjectKeyFromObject(secret): secret, client.ObjectKeyFromObject(repo): repo}
	sel, err := labels.Parse(gitops.ShardLabel + "=a")
	if err != nil {
		t.Fatal(err)
	}
	syncer := &controller.AddonRepositoryReconciler{APIReader: unavailable{reader}, Selector: sel}
	hook := httptest.NewServer(&gitops.Webhook{Client: reader, Syncer: syncer})
	t.Cleanup(hook.Close)
	if code, body := signedPush(t, hook.URL+"/hooks/git/"+ns+"/mine", "s3cret", "refs/heads/main"); code != http.StatusAccepted {
		t.Fatalf("a push while the API server does not answer: %d %q; want 202 queued", code, body)
	}
}
