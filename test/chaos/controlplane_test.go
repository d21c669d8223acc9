package chaos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testcluster"
	"capstan.dev/capstan/internal/testcontroller"
)

// TestControlPlaneGoesAway stops kube-apiserver for 30 s
// (CAPSTAN_CHAOS_APISERVER_DOWN, in seconds) while four add-ons with hooks
// install, and restarts etcd while they upgrade. The controller recovers by
// itself: its process never exits, every add-on ends Synced, and nothing is
// deleted (the Deployments keep their UIDs, no namespace is deleted, no
// object is orphaned, no pre hook runs again, no object is applied twice
// with different content, no post hook that succeeded runs again).
func TestControlPlaneGoesAway(t *testing.T) {
	down := time.Duration(envInt("CAPSTAN_CHAOS_APISERVER_DOWN", 30)) * time.Second
	seed := envInt("CAPSTAN_CHAOS_SEED", time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	t.Logf("seed %d; the API server goes away for %s", seed, down)
	ctx := t.Context()
	env := newChaosEnv(t, dbappArchive(t))
	admin, srv := env.admin, env.charts
	rec := watchHistory(t)
	ctrl := env.start("--resync-interval=1h", "--hook-timeout=3m")

	names := []string{"echo", "foxtrot", "golf", "hotel"}
	installed := map[string]bool{}
	asks, installs := renders{}, map[string][]string{}
	for _, name := range names {
		a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "chaos-" + name},
			Spec: capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: srv.URL + "/dbapp-1.0.0.tgz"}, TargetNamespace: "chaos-" + name,
				CreateNamespace: true, Prune: true, DeletionPolicy: capstanv1.DeletionDelete, ReleaseName: name}}
		if err := admin.Create(ctx, a); err != nil {
			t.Fatal(err)
		}
		installed[name] = true
		asks.add(client.ObjectKeyFromObject(a), "1.0", true) // the chart's default
		installs[client.ObjectKeyFromObject(a).String()] = []string{a.ResourceVersion}
	}
	// Mid-sync: within the first 2 s of the installs.
	time.Sleep(time.Duration(rng.IntN(2000)) * time.Millisecond)
	phases := map[string]int{}
	for _, name := range names {
		phases["API server stopped: "+killPoint(ctx, admin, client.ObjectKey{Namespace: install.Namespace, Name: "chaos-" + name})]++
	}
	outage(t, testcluster.KubeAPIServer, down)
	converge(t, admin, ctrl, names, "after the API server came back")

	uids := map[string]types.UID{}
	for _, name := range names {
		d := &appsv1.Deployment{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: "chaos-" + name, Name: name + "-app"}, d); err != nil {
			t.Fatal(err)
		}
		uids[name] = d.UID
	}
	for i, name := range names {
		patch := fmt.Appendf(nil, `{"spec":{"values":{"appVersion":"%d"}}}`, 100+i)
		if err := admin.Patch(ctx, &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "chaos-" + name}},
			client.RawPatch("application/merge-patch+json", patch)); err != nil {
			t.Fatal(err)
		}
		asks.add(client.ObjectKey{Namespace: install.Namespace, Name: "chaos-" + name}, fmt.Sprint(100+i), false)
	}
	time.Sleep(time.Duration(rng.IntN(2000)) * time.Millisecond)
	for _, name := range names {
		phases["etcd restarted: "+killPoint(ctx, admin, client.ObjectKey{Namespace: install.Namespace, Name: "chaos-" + name})]++
	}
	outage(t, testcluster.Etcd, 10*time.Second)
	converge(t, admin, ctrl, names, "after etcd restarted")

	for _, name := range names {
		d := &appsv1.Deployment{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: "chaos-" + name, Name: name + "-app"}, d); err != nil || d.UID != uids[name] {
			t.Errorf("the Deployment of %s was deleted and made again, or is gone: %v", name, err)
		}
	}
	if err := ctrl.Alive(); err != nil {
		t.Fatalf("the controller exited: %v\n%s", err, ctrl.LogTail(30))
	}
	orphans := checkOrphans(t, admin, names, installed)
	deleted := checkNeverDelete(t, admin, names)
	reruns, hooks := checkPreHooks(t, names)
	objects, contents, twice := rec.checkContents(t, asks)
	posts, postReruns, postRetries := rec.checkPostHooks(t, "seed", installs)
	t.Logf("figures: API server away %s, etcd restarted; phases then: %v", down, phases)
	t.Logf("figures: %d hook Jobs; %d orphans, %d never-delete objects deleted, %d pre hooks run again; "+
		"%d objects with %d contents, %d applied twice with different content; %d post-install Jobs, %d run again after they succeeded, %d retried when they had not; %d Jobs deleted while the watch was away",
		hooks, orphans, deleted, reruns, objects, contents, twice, posts, postReruns, postRetries, rec.lostEnds())
}

// outage stops a component for a while and starts it again.
func outage(t *testing.T, component string, d time.Duration) {
	t.Helper()
	start, err := cluster.StopComponent(component)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := start(ctx); err != nil {
		t.Fatalf("%s did not come back: %v", component, err)
	}
}

// converge waits until every add-on is Synced for its generation, with the
// controller process alive throughout.
func converge(t *testing.T, admin client.Client, ctrl *testcontroller.Process, names []string, when string) {
	t.Helper()
	began := time.Now()
	err := wait.PollUntilContextTimeout(t.Context(), time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := ctrl.Alive(); err != nil {
			return false, err
		}
		for _, name := range names {
			a := &capstanv1.Addon{}
			err := admin.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: "chaos-" + name}, a)
			if err != nil || a.Status.Phase != capstanv1.PhaseSynced || a.Status.ObservedGeneration != a.Generation {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the add-ons did not converge %s: %v\n%s", when, err, ctrl.LogTail(30))
	}
	t.Logf("converged %s in %s", when, time.Since(began).Round(time.Second))
}
