package controller_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
)

// TestNoOpResyncSkipsDryRunsButCatchesDrift checks the cheap resync: once a
// dry run found an object unchanged, a resync with nothing new sends it no
// dry run (the audit log shows none), yet a change someone makes to the
// live object is seen and undone.
// soon bounds what a watch must do in the tests that run on a shard of
// their own: far below that shard's 10-minute resync, so only the watch
// can have done it, and far above what a controller with one add-on takes
// on a loaded machine.
const soon = 30 * time.Second

func TestResyncSkipsDryRunsCatchesDrift(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", map[string]string{
		"templates/more.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-more\ndata:\n  k: v\n",
	}))
	a := create(t, newAddon(controllerNS, "rs-"+ns, url, withTarget(ns)))
	cm := a.Name + "-config"
	synced(t, a)
	// One resync dry-runs what the install applied, and finds it unchanged.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.SyncRequest++ })
	synced(t, a)

	before := dryRuns(t, ns, cm)
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.SyncRequest++ })
	synced(t, a)
	if after := dryRuns(t, ns, cm); after != before {
		t.Errorf("a resync with nothing new dry-ran %s %d time(s); want none", cm, after-before)
	}

	// Drift: someone edits the ConfigMap behind Capstan's back.
	patch := []byte(`{"data":{"greeting":"tampered"}}`)
	if err := admin.Patch(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cm}},
		client.RawPatch(types.MergePatchType, patch), client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	// NOTE: the sync asked for at once may run before the watch delivers
	// the edit; the resync after it (20 s here) then sees it.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.SyncRequest++ })
	eventually(t, 60*time.Second, "the drift to be undone", func() bool {
		return live(t, "v1", "ConfigMap", ns, cm).Object["data"].(map[string]any)["greeting"] == "hello"
	})
	if after := dryRuns(t, ns, cm); after == before {
		t.Error("the drifted ConfigMap was not dry-run again")
	}
}

// dryRuns counts the server-side dry-run applies of one ConfigMap in the
// API server's audit log.
func dryRuns(t *testing.T, ns, name string) int {
	t.Helper()
	entries, err := cluster.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.ObjectRef != nil && e.ObjectRef.Resource == "configmaps" && e.ObjectRef.Namespace == ns && e.ObjectRef.Name == name &&
			e.Verb == "patch" && strings.Contains(e.RequestURI, "dryRun=All") {
			n++
		}
	}
	return n
}

// TestDriftIsUndoneSoon checks that an edit, a delete or the removal of
// Capstan's labels made behind Capstan's back is undone soon (the suite's
// drift delay is 2 s), not at the next resync: the watch on applied
// objects queues the add-on. The add-on is a shard's, whose controller
// resyncs every 10 minutes, so that what undoes the drift within the wait
// is the watch, however slow the machine.
func TestDriftIsUndoneSoon(t *testing.T) {
	ns := newNamespace(t)
	const resync = 10 * time.Minute
	shard := startShard(t, "drift-"+ns[len(ns)-5:], func(c *controller.Config) { c.ResyncInterval = resync })
	url, _ := charts.publish(t, webChart("1.0.0", map[string]string{
		"templates/more.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-more\ndata:\n  k: v\n",
	}))
	a := create(t, newAddon(controllerNS, "drift-"+ns, url, withTarget(ns), shard))
	cm, more := a.Name+"-config", a.Name+"-more"
	synced(t, a)
	// A sync with nothing new: the prompt one after the install is past.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.SyncRequest++ })
	synced(t, a)
	waitFor(t, a, 30*time.Second, "the sync request to be handled", func(cur *capstanv1.Addon) bool {
		return cur.Status.LastSyncRequest == cur.Spec.SyncRequest
	})

	patch := []byte(`{"data":{"greeting":"tampered"}}`)
	if err := admin.Patch(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cm}},
		client.RawPatch(types.MergePatchType, patch), client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	eventually(t, soon, "the edit to be undone before the resync", func() bool {
		return live(t, "v1", "ConfigMap", ns, cm).Object["data"].(map[string]any)["greeting"] == "hello"
	})
	t.Logf("edit undone after %s", time.Since(start).Round(100*time.Millisecond))
	// NOTE: a sync that changed something is followed by a prompt one;
	// let it pass, so what recreates the ConfigMap below is the watch.
	time.Sleep(3 * time.Second)

	if err := admin.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: more}}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	eventually(t, soon, "the deleted ConfigMap to be created again before the resync", func() bool {
		return live(t, "v1", "ConfigMap", ns, more) != nil
	})
	t.Logf("delete undone after %s", time.Since(start).Round(100*time.Millisecond))

	// Capstan's labels removed, managed-by too: the object leaves the
	// label-selected watch (a delete there), and a sync puts them back.
	time.Sleep(3 * time.Second)
	unlabel := []byte(`{"metadata":{"labels":{"` + capstanv1.AddonLabel + `":null,"` + capstanv1.AddonNamespaceLabel + `":null,"` +
		capstanv1.ManagedByLabel + `":null}}}`)
	if err := admin.Patch(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: more}},
		client.RawPatch(types.MergePatchType, unlabel)); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	eventually(t, soon, "Capstan's labels to be put back before the resync", func() bool {
		l := live(t, "v1", "ConfigMap", ns, more).GetLabels()
		return l[capstanv1.AddonLabel] == a.Name && l[capstanv1.ManagedByLabel] == "capstan"
	})
	t.Logf("labels put back after %s", time.Since(start).Round(100*time.Millisecond))
}

// TestPlatformChangeReconcilesAtOnce checks that a change to the platform
// ConfigMap, which every add-on reads, reaches the add-ons at once, not at
// their next resync. The add-on is a shard's, whose controller resyncs
// every 10 minutes: what applies the new hostname within the wait is the
// ConfigMap's watch, however slow the machine, and however many add-ons
// the suite's controller queues for the same change.
func TestPlatformChangeReconcilesAtOnce(t *testing.T) {
	ns := newNamespace(t)
	const resync = 10 * time.Minute
	shard := startShard(t, "platform-"+ns[len(ns)-5:], func(c *controller.Config) { c.ResyncInterval = resync })
	url, _ := charts.publish(t, chart{name: "platform", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: facts\ndata:\n  host: {{ .Values.capstan.hostname | quote }}\n",
	}})
	a := create(t, newAddon(controllerNS, "platform-"+ns, url, withTarget(ns), shard))
	synced(t, a)
	host := func() any { return live(t, "v1", "ConfigMap", ns, "facts").Object["data"].(map[string]any)["host"] }
	if got := host(); got != "apps.example.com" {
		t.Fatalf("host = %v, want the platform's hostname", got)
	}
	// NOTE: a sync that applied something is followed by a prompt one,
	// which would read the new hostname too; a sync with nothing new
	// comes after it, and is followed by none.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.SyncRequest++ })
	waitFor(t, a, 90*time.Second, "the sync request to be handled", func(cur *capstanv1.Addon) bool {
		return cur.Status.LastSyncRequest == cur.Spec.SyncRequest && cur.Status.Phase == capstanv1.PhaseSynced
	})

	setHost := func(h string) {
		t.Helper()
		patch := []byte(`{"data":{"hostname":"` + h + `"}}`)
		if err := admin.Patch(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: platformConfigMap}},
			client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
	}
	setHost("apps.example.org")
	t.Cleanup(func() { setHost("apps.example.com") })
	// NOTE: a bound far above any reconcile's time, and far below the
	// shard's resync.
	eventually(t, soon, "the new hostname to be applied before the resync", func() bool {
		return host() == "apps.example.org"
	})
}

// TestPlatformNamespaceFact renders a chart that reads the
// platform's namespace fact into another namespace than the controller's:
// the fact is the controller's namespace, where the platform runs, not
// the add-on's, which the chart has as .Release.Namespace.
func TestPlatformNamespaceFact(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, chart{name: "platform-ns", version: "1.0.0", files: map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: facts\ndata:\n  platform: {{ .Values.capstan.namespace | quote }}\n  release: {{ .Release.Namespace | quote }}\n",
	}})
	a := create(t, newAddon(controllerNS, "pns-"+ns, url, withTarget(ns)))
	synced(t, a)
	data := live(t, "v1", "ConfigMap", ns, "facts").Object["data"].(map[string]any)
	if data["platform"] != controllerNS || data["release"] != ns {
		t.Errorf("the chart read namespace %v and release namespace %v; want the controller's %s and the add-on's %s", data["platform"], data["release"], controllerNS, ns)
	}
}

// TestFoughtDriftBacksOff plays another controller that keeps rewriting a
// field the chart sets. Capstan undoes it ever more slowly instead of every
// few seconds, and warns on the Addon with a DriftFought event.
func TestFoughtDriftBacksOff(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := create(t, newAddon(controllerNS, "fight-"+ns, url, withTarget(ns)))
	cm := a.Name + "-config"
	synced(t, a)
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.SyncRequest++ })
	synced(t, a)

	// The rival rewrites the field every 500 ms for 20 s, whenever it is
	// not already its value.
	patch := []byte(`{"data":{"greeting":"rival"}}`)
	undone := 0
	waited := false // the Addon said it waits to undo the drift
	for range 40 {
		if c := condition(getAddon(t, a), capstanv1.ConditionReady); c != nil && c.Reason == "DriftFought" {
			waited = waited || strings.Contains(c.Message, "ConfigMap "+ns+"/"+cm)
		}
		cur := live(t, "v1", "ConfigMap", ns, cm)
		if cur.Object["data"].(map[string]any)["greeting"] != "rival" {
			undone++
			if err := admin.Patch(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cm}},
				client.RawPatch(types.MergePatchType, patch), client.FieldOwner("rival")); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	// The first write is the rival's own. Undos 2 s after the drift, then
	// 4 and 8 s after the last undo, fit three in 20 s, where undoing at
	// every prompt resync after an apply fitted about thirteen.
	t.Logf("Capstan undid the rival's edit %d times in 20 s", undone-1)
	if undone-1 > 4 {
		t.Errorf("Capstan undid the fought drift %d times in 20 s; it should back off", undone-1)
	}
	if undone-1 < 2 {
		t.Errorf("Capstan undid the fought drift only %d times in 20 s", undone-1)
	}
	if !waited {
		t.Error("the Addon never said that it waits to undo the fought drift (Ready reason DriftFought)")
	}
	eventually(t, 30*time.Second, "a DriftFought event on the Addon", func() bool {
		var events eventsv1.EventList
		if err := admin.List(context.Background(), &events, client.InNamespace(controllerNS)); err != nil {
			t.Fatal(err)
		}
		for _, e := range events.Items {
			if e.Regarding.Name == a.Name && e.Type == corev1.EventTypeWarning && e.Reason == "DriftFought" && strings.Contains(e.Note, "ConfigMap "+ns+"/"+cm) {
				return true
			}
		}
		return false
	})
}

// TestAFoughtObjectDeletedComesBackAtOnce: after a long fight over a field
// of an object, its undos are paced; the object deleted then is created
// again at the next look, not after the fight's pause. An autoscaler
// fights a field, not an object's being there.
func TestAFoughtObjectDeletedComesBackAtOnce(t *testing.T) {
	ns := newNamespace(t)
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := create(t, newAddon(controllerNS, "refight-"+ns, url, withTarget(ns)))
	cm := a.Name + "-config"
	synced(t, a)
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.SyncRequest++ })
	synced(t, a)

	// The rival rewrites the field until Capstan has undone it three
	// times (2, 4 and 8 s apart): its next undo would wait 16 s.
	patch := []byte(`{"data":{"greeting":"rival"}}`)
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cm}}
	undone := -1 // the first write is the rival's own
	deadline := time.Now().Add(45 * time.Second)
	for undone < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("Capstan undid the rival's edit %d times in 45 s; want 3", undone)
		}
		if live(t, "v1", "ConfigMap", ns, cm).Object["data"].(map[string]any)["greeting"] != "rival" {
			if undone++; undone == 3 {
				break
			}
			if err := admin.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("rival")); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := admin.Delete(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	// The drift delay is 2 s; the fight's pause would be 16 s.
	eventually(t, 8*time.Second, "the deleted ConfigMap created again", func() bool {
		cur := live(t, "v1", "ConfigMap", ns, cm)
		return cur != nil && cur.GetDeletionTimestamp() == nil
	})
	t.Logf("the ConfigMap was back %s after its deletion", time.Since(deleted).Round(100*time.Millisecond))
}

// TestStatusWritesDoNotRerender: the status writes of objects whose health
// no status changes, a LoadBalancer Service's address and an autoscaler's
// replica counts, written every 500 ms for 20 s, reconcile a settled
// add-on neither as drift nor to look at its health (the controller's
// reconcile count shows none); an edit of the Service's spec is still
// undone soon. The add-on is a shard's, whose controller resyncs every 10
// minutes.
func TestStatusWritesDoNotRerender(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	shard := startShard(t, "status-"+ns[len(ns)-5:], func(c *controller.Config) { c.ResyncInterval = 10 * time.Minute })
	url, _ := charts.publish(t, webChart("1.0.0", map[string]string{
		"templates/lb.yaml": `apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}-lb
spec:
  type: LoadBalancer
  externalTrafficPolicy: Cluster
  selector: {app: {{ .Release.Name }}}
  ports:
    - port: 80
      targetPort: http
`,
		"templates/hpa.yaml": `apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ .Release.Name }}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: {{ .Release.Name }}}
  minReplicas: 1
  maxReplicas: 1
`,
	}))
	a := create(t, newAddon(controllerNS, "status-"+ns, url, withTarget(ns), shard))
	synced(t, a)
	// A sync with nothing new: the prompt one after the install is past.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.SyncRequest++ })
	synced(t, a)
	waitFor(t, a, 30*time.Second, "the sync request to be handled", func(cur *capstanv1.Addon) bool {
		return cur.Status.LastSyncRequest == cur.Spec.SyncRequest
	})
	time.Sleep(3 * time.Second)

	lb := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: a.Name + "-lb"}}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: a.Name}}
	before := reconcilesOf(a)
	for i := range 40 {
		lbStatus := fmt.Sprintf(`{"status":{"loadBalancer":{"ingress":[{"hostname":"lb-%d.example"}]}}}`, i)
		if err := admin.Status().Patch(ctx, lb, client.RawPatch(types.MergePatchType, []byte(lbStatus))); err != nil {
			t.Fatal(err)
		}
		hpaStatus := fmt.Sprintf(`{"status":{"currentReplicas":%d,"desiredReplicas":1}}`, 1+i%2)
		if err := admin.Status().Patch(ctx, hpa, client.RawPatch(types.MergePatchType, []byte(hpaStatus))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	if n := reconcilesOf(a) - before; n > 1 {
		t.Errorf("status writes of a Service and an autoscaler reconciled the settled add-on %d times in 20 s; want none", n)
	}

	tamper := []byte(`{"spec":{"externalTrafficPolicy":"Local"}}`)
	if err := admin.Patch(ctx, lb, client.RawPatch(types.MergePatchType, tamper), client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	eventually(t, soon, "the Service's edit to be undone before the resync", func() bool {
		got := &corev1.Service{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(lb), got); err != nil {
			t.Fatal(err)
		}
		return got.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyCluster
	})
}

// TestALoadBalancersLostAddressIsSeenSoon: a settled add-on whose
// spec.healthChecks judge its LoadBalancer Service by its address is no
// longer Healthy soon after the address goes, not at the resync. A Service
// has no metadata.generation: the write of its status alone is told from
// an edit only by a read of the object, and is then a status change. The
// add-on is a shard's, whose controller resyncs every 10 minutes.
func TestALoadBalancersLostAddressIsSeenSoon(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	shard := startShard(t, "lblost-"+ns[len(ns)-5:], func(c *controller.Config) { c.ResyncInterval = 10 * time.Minute })
	url, _ := charts.publish(t, chart{name: "lbapp", version: "1.0.0", files: map[string]string{
		"templates/lb.yaml": `apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}-lb
spec:
  type: LoadBalancer
  selector: {app: {{ .Release.Name }}}
  ports:
    - port: 80
`,
	}})
	a := create(t, newAddon(controllerNS, "lblost-"+ns[len(ns)-5:], url, withTarget(ns), shard, withSpec(func(s *capstanv1.AddonSpec) {
		s.HealthChecks = []capstanv1.HealthCheck{{APIVersion: "v1", Kind: "Service",
			Current: "has(status.loadBalancer) && has(status.loadBalancer.ingress) && size(status.loadBalancer.ingress) > 0"}}
	})))
	lb := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: a.Name + "-lb"}}
	setStatus := func(status string) {
		t.Helper()
		if err := admin.Status().Patch(ctx, lb, client.RawPatch(types.MergePatchType, []byte(status)), client.FieldOwner("cloud-provider")); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, a, 60*time.Second, "the wait for the load balancer's address", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseProgressing && strings.Contains(readyMessage(cur), "Service "+ns+"/"+lb.Name)
	})
	setStatus(`{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.10"}]}}}`)
	waitFor(t, a, 60*time.Second, "Synced and Healthy", func(cur *capstanv1.Addon) bool {
		c := condition(cur, capstanv1.ConditionHealthy)
		return cur.Status.Phase == capstanv1.PhaseSynced && c != nil && c.Status == metav1.ConditionTrue
	})
	time.Sleep(3 * time.Second) // the prompt looks after the install

	setStatus(`{"status":{"loadBalancer":{"ingress":null}}}`)
	waitFor(t, a, soon, "no longer Healthy soon after the address went", func(cur *capstanv1.Addon) bool {
		c := condition(cur, capstanv1.ConditionHealthy)
		return c != nil && c.Status != metav1.ConditionTrue
	})
}

// reconcileCounts counts the suite's controller's reconciles by Addon
// (AddonReconciler.Reconciled).
var reconcileCounts = &addonCounts{n: map[types.NamespacedName]uint64{}}

// addonCounts is a count by Addon.
type addonCounts struct {
	mu sync.Mutex
	n  map[types.NamespacedName]uint64
}

func (c *addonCounts) add(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[key]++
}

// reconcilesOf counts the reconciles of the Addon a by the suite's
// controller: other tests' Addons, failing and retried with backoff in
// the same process, do not count.
func reconcilesOf(a *capstanv1.Addon) uint64 {
	reconcileCounts.mu.Lock()
	defer reconcileCounts.mu.Unlock()
	return reconcileCounts.n[types.NamespacedName{Namespace: a.Namespace, Name: a.Name}]
}
