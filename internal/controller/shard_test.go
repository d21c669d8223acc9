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
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
