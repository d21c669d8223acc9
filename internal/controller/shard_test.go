package controller_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/install"
)

// TestShardSelects: a controller started with --watch-label-selector takes
// up only the Addons its selector matches; one without takes up all.
func TestShardSelects(t *testing.T) {
	shardA := labels.SelectorFromSet(labels.Set{"capstan.dev/shard": "a"})
	notSharded, err := labels.Parse("!capstan.dev/shard")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		selector labels.Selector
		labels   map[string]string
		want     bool
	}{
		{"no selector, no labels", nil, nil, true},
		{"no selector, a shard's Addon", nil, map[string]string{"capstan.dev/shard": "a"}, true},
		{"shard a, its own Addon", shardA, map[string]string{"capstan.dev/shard": "a", "team": "x"}, true},
		{"shard a, shard b's Addon", shardA, map[string]string{"capstan.dev/shard": "b"}, false},
		{"shard a, an Addon in no shard", shardA, nil, false},
		{"main controller, an Addon in no shard", notSharded, map[string]string{"team": "x"}, true},
		{"main controller, an Addon moved to shard a", notSharded, map[string]string{"capstan.dev/shard": "a"}, false},
	} {
		if got := (controller.Config{Selector: c.selector}).Selects(c.labels); got != c.want {
			t.Errorf("%s: Selects = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestShardLeavesOtherAddonsAlone hands a controller of shard a the key
// of an Addon in no shard, as the label-filtered cache does when an Addon
// leaves the shard (its DELETE event) and as a dependsOn across shards
// did. The API server shows the Addon, yet the shard's controller writes
// nothing for it, and does not come back to it.
func TestShardLeavesOtherAddonsAlone(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := synced(t, create(t, newAddon(controllerNS, "shard-"+ns, url, withTarget(ns))))

	cfg := rest.CopyConfig(cluster.ConfigFor(install.ControllerUser))
	cfg.UserAgent = "capstan-shard-a-" + ns
	c, err := client.New(cfg, client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	shard := &controller.AddonReconciler{Client: c, APIReader: c, RestConfig: cfg, Fetcher: reconciler.Fetcher,
		Recorder: reconciler.Recorder,
		Config: controller.Config{Namespace: controllerNS, PlatformConfigMap: platformConfigMap,
			Selector: labels.SelectorFromSet(labels.Set{"capstan.dev/shard": "a"})}}
	res, err := shard.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(a)})
	if err != nil || res != (ctrl.Result{}) {
		t.Errorf("shard a's reconcile of an Addon in no shard: %+v, %v; want no requeue and no error", res, err)
	}

	// NOTE: the audit log records writes only, and after they end. A
	// marker written under the shard's name after the reconcile shows when
	// the log holds every write the reconcile made.
	marker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shard-marker"}}
	if err := c.Create(context.Background(), marker); err != nil {
		t.Fatal(err)
	}
	var mine []auditv1.Event
	eventually(t, 30*time.Second, "the marker in the audit log", func() bool {
		entries, err := cluster.AuditEvents()
		if err != nil {
			t.Fatal(err)
		}
		mine = mine[:0]
		marked := false
		for _, e := range entries {
			if e.UserAgent != cfg.UserAgent || e.Stage != auditv1.StageResponseComplete {
				continue
			}
			if e.ObjectRef != nil && e.ObjectRef.Resource == "configmaps" && e.ObjectRef.Name == marker.Name {
				marked = true
				continue
			}
			mine = append(mine, e)
		}
		return marked
	})
	for _, e := range mine {
		t.Errorf("shard a's controller sent %s %s for an Addon outside its shard; want no write", e.Verb, e.RequestURI)
	}
	if got := getAddon(t, a); got.Status.Phase != capstanv1.PhaseSynced {
		t.Errorf("the Addon's phase is %s; want it left Synced", got.Status.Phase)
	}
}

// shardLabel puts an Addon in a shard, as gitops.ShardLabel does; the
// suite's controller is the main one, which takes up only the Addons in no
// shard.
const shardLabel = "capstan.dev/shard"

// startShard runs a controller of its own for the shard name, as
// `capstan controller --watch-label-selector=capstan.dev/shard=NAME` does:
// its cache holds only the shard's Addons, and its config is the suite's
// changed by change. It stops when the test ends. The returned option puts
// an Addon in the shard.
func startShard(t *testing.T, name string, change func(*controller.Config)) addonOpt {
	t.Helper()
	return startShardWith(t, name, func(r *controller.AddonReconciler) { change(&r.Config) })
}

// startShardWith is startShard, with the shard's reconciler changed by
// change before it starts.
func startShardWith(t *testing.T, name string, change func(*controller.AddonReconciler)) addonOpt {
	t.Helper()
	return startShardUntil(context.Background(), t, name, change)
}

// startShardUntil is startShardWith, with a controller that also stops
// once ctx is done, as one that gets SIGTERM or loses its Lease does.
func startShardUntil(ctx context.Context, t *testing.T, name string, change func(*controller.AddonReconciler)) addonOpt {
	t.Helper()
	sel := labels.SelectorFromSet(labels.Set{shardLabel: name})
	cfg := rest.CopyConfig(cluster.ConfigFor(install.ControllerUser))
	cfg.UserAgent = "capstan-shard-" + name
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme(),
		Client: controller.ClientOptions(),
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&capstanv1.Addon{}: {Label: sel},
		}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// NOTE: the suite's controller has the name addon already, in
		// this process; a shard's runs in a process of its own.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	conf := reconciler.Config
	conf.Selector = sel
	r := &controller.AddonReconciler{Reconciled: reconcileCounts.add, Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), RestConfig: cfg,
		Fetcher: reconciler.Fetcher, Hooks: reconciler.Hooks, Recorder: mgr.GetEventRecorder("capstan"), Config: conf}
	change(r)
	if err := r.SetupWithManager(mgr, 2); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("shard %s's controller: %v", name, err)
		}
	})
	return func(a *capstanv1.Addon) {
		if a.Labels == nil {
			a.Labels = map[string]string{}
		}
		a.Labels[shardLabel] = name
	}
}
