package gitops_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/gitops/gitserver"
)

// BenchmarkSync1000 measures a repository of 1,000 definition files: the
// first sync (1,000 Addons created), a resync with no change and a warm
// cache, and a resync with no change by a syncer that has to clone and parse
// again. Run it with -benchtime=1x for the first sync.
func BenchmarkSync1000(b *testing.B) {
	needCluster(b)
	ctx := context.Background()
	srv := gitserver.Start(b)
	url := srv.Create(b, "big")
	w := gitserver.Clone(b, url)
	for i := range 1000 {
		name := fmt.Sprintf("addon-%04d", i)
		w.Write("addons/"+name+".yaml", fmt.Sprintf("name: %s\nnamespace: apps\nhelm:\n  repo: https://charts.example.com/\n  chart: %s\n  version: 1.0.%d\nvalues:\n  replicas: 2\n  image: {tag: v%d}\n", name, name, i, i))
	}
	commit := w.CommitAndPush("1,000 add-ons")

	var ns string
	b.Run("first", func(b *testing.B) {
		for range b.N {
			ns = newNamespace(b, "gitops-bench")
			start := time.Now()
			createRepo(b, ns, "big", url)
			eventually(b, 5*time.Minute, "first sync", func() error {
				r := getRepo(b, ns, "big")
				if r.Status.LastSyncedCommit != commit || r.Status.Addons != 1000 {
					return fmt.Errorf("addons %d, conditions %+v", r.Status.Addons, r.Status.Conditions)
				}
				return nil
			})
			b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms/first-sync")
		}
	})
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "big"}}
	b.Run("resync-no-change", func(b *testing.B) {
		for range b.N {
			if _, err := env.syncer.Reconcile(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("resync-no-change-cold-cache", func(b *testing.B) {
		for range b.N {
			fresh := &controller.AddonRepositoryReconciler{Client: env.client}
			if _, err := fresh.Reconcile(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(addonListGVK)
	if err := env.client.List(ctx, &list, client.InNamespace(ns)); err != nil || len(list.Items) != 1000 {
		b.Fatalf("%d Addons, %v", len(list.Items), err)
	}
}

var addonListGVK = capstanv1.GroupVersion.WithKind("AddonList")

// BenchmarkWebhookToAddon measures from a push webhook's request to the
// Addon holding the pushed change.
func BenchmarkWebhookToAddon(b *testing.B) {
	needCluster(b)
	ctx := context.Background()
	ns := newNamespace(b, "gitops-hookbench")
	srv := gitserver.Start(b)
	url := srv.Create(b, "gitops")
	w := gitserver.Clone(b, url)
	c := w.Write("addons/app.yaml", "name: app\nhelm: {repo: https://x, chart: app, version: 0.0.0}\n").CommitAndPush("app")
	if err := env.client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hook"}, Data: map[string][]byte{gitops.WebhookSecretKey: []byte("s3cret")}}); err != nil {
		b.Fatal(err)
	}
	createRepo(b, ns, "gitops", url, func(r *capstanv1.AddonRepository) {
		r.Spec.WebhookSecretRef = &capstanv1.LocalObjectReference{Name: "hook"}
	})
	waitSynced(b, ns, "gitops", c)
	hook := httptest.NewServer(&gitops.Webhook{Client: env.client, Syncer: env.syncer})
	b.Cleanup(hook.Close)
	endpoint := hook.URL + "/hooks/git/" + ns + "/gitops"

	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		version := fmt.Sprintf("1.0.%d", i)
		w.Write("addons/app.yaml", "name: app\nhelm: {repo: https://x, chart: app, version: "+version+"}\n").CommitAndPush(version)
		b.StartTimer()
		signedPush(b, endpoint, "s3cret", "refs/heads/main")
		deadline := time.Now().Add(10 * time.Second)
		for mustAddon(b, ns, "app").Spec.Chart.Version != version {
			if time.Now().After(deadline) {
				b.Fatalf("version %s never arrived", version)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}
