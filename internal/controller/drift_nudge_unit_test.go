package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/plan"
)

// deploymentKind is the kind of the objects the nudge tests change.
var deploymentKind = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}

// knowsAll is a driftWatch.Knows for which every add-on knows every object.
func knowsAll(types.NamespacedName, capstanv1.ObjectRef, client.Reader) bool { return true }

// TestANudgedAddonGoesAheadOfTheQueuedSyncs: an add-on waiting for its
// objects, whose Deployment's status just changed, is looked at before the
// add-ons queued earlier for a sync; one that does not wait is not queued.
func TestANudgedAddonGoesAheadOfTheQueuedSyncs(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("nudge-test")
	defer q.ShutDown()
	request := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "capstan-system", Name: name}}
	}
	for _, name := range []string{"new-1", "new-2", "new-3"} {
		q.Add(request(name))
	}
	d := &driftWatch{Awaiting: func(a types.NamespacedName) bool { return a.Name == "waiting" }, Knows: knowsAll}
	if err := d.start(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	deployment := func(owner, rv string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: owner, ResourceVersion: rv,
			Labels: map[string]string{capstanv1.AddonLabel: owner, capstanv1.AddonNamespaceLabel: "capstan-system"}}}
	}
	d.nudge(deploymentKind, nil, deployment("waiting", "1"), deployment("waiting", "2"))
	d.nudge(deploymentKind, nil, deployment("synced", "1"), deployment("synced", "2"))

	// The nudge is due after nudgeDelay.
	for i := 0; q.Len() < 4; i++ {
		if i == 100 {
			t.Fatalf("after 5 s, %d requests are ready; want the 3 queued and the nudged one", q.Len())
		}
		time.Sleep(50 * time.Millisecond)
	}
	var order []string
	for q.Len() > 0 {
		req, _, _ := q.GetWithPriority()
		order = append(order, req.Name)
		q.Done(req)
	}
	if want := []string{"waiting", "new-1", "new-2", "new-3"}; !slices.Equal(order, want) {
		t.Errorf("the queue gave %v; want %v", order, want)
	}
}

// TestASettledAddonIsLookedAtInItsTurn: a status change of an object of a
// settled add-on (Synced, or held by a gate) queues it after
// healthLookDelay, behind the queued syncs; an add-on neither waiting nor
// settled is not queued, and a burst of changes queues one look.
func TestASettledAddonIsLookedAtInItsTurn(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("settled-test")
	defer q.ShutDown()
	q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "capstan-system", Name: "new-1"}})
	d := &driftWatch{
		Awaiting: func(types.NamespacedName) bool { return false },
		Settled:  func(a types.NamespacedName) bool { return a.Name == "settled" },
		Knows:    knowsAll,
	}
	if err := d.start(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	object := func(owner, rv string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: owner, ResourceVersion: rv,
			Labels: map[string]string{capstanv1.AddonLabel: owner, capstanv1.AddonNamespaceLabel: "capstan-system"}}}
	}
	began := time.Now()
	for rv := 1; rv < 5; rv++ {
		d.nudge(deploymentKind, nil, object("settled", "1"), object("settled", string(rune('1'+rv))))
	}
	d.nudge(deploymentKind, nil, object("other", "1"), object("other", "2"))
	for i := 0; q.Len() < 2; i++ {
		if i == 200 {
			t.Fatalf("after 10 s, %d requests are ready; want the queued one and the settled add-on", q.Len())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if waited := time.Since(began); waited < healthLookDelay {
		t.Errorf("the settled add-on was queued after %s; want at least %s", waited, healthLookDelay)
	}
	time.Sleep(100 * time.Millisecond)
	var order []string
	for q.Len() > 0 {
		req, _, _ := q.GetWithPriority()
		order = append(order, req.Name)
		q.Done(req)
	}
	if want := []string{"new-1", "settled"}; !slices.Equal(order, want) {
		t.Errorf("the queue gave %v; want %v", order, want)
	}
}

// TestSettledLooksAreBounded: a burst of status changes gives one look, and
// an object whose status keeps changing looks at its add-on at most every
// settledLookEvery.
func TestSettledLooksAreBounded(t *testing.T) {
	d := &driftWatch{}
	addon := types.NamespacedName{Namespace: "capstan-system", Name: "web"}
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	if after, ok := d.lookSettled(addon, now); !ok || after != healthLookDelay {
		t.Fatalf("the first change: look after %s, %v; want %s", after, ok, healthLookDelay)
	}
	if _, ok := d.lookSettled(addon, now.Add(time.Second)); ok {
		t.Fatal("a change while a look is queued queued another")
	}
	// Just after the look: the next waits for settledLookEvery.
	at := now.Add(healthLookDelay + time.Millisecond)
	after, ok := d.lookSettled(addon, at)
	if want := now.Add(healthLookDelay + settledLookEvery).Sub(at); !ok || after != want {
		t.Fatalf("a change right after a look: after %s, %v; want %s", after, ok, want)
	}
	// Long after: the delay alone.
	if after, ok := d.lookSettled(addon, now.Add(time.Hour)); !ok || after != healthLookDelay {
		t.Fatalf("a change long after: after %s, %v; want %s", after, ok, healthLookDelay)
	}
	other := types.NamespacedName{Namespace: "capstan-system", Name: "db"}
	if after, ok := d.lookSettled(other, now.Add(time.Hour)); !ok || after != healthLookDelay {
		t.Fatalf("another add-on: after %s, %v", after, ok)
	}
	d.forget(addon)
	if _, ok := d.looks[addon]; ok || len(d.looks) != 1 {
		t.Fatalf("forget left %v", d.looks)
	}
}

// TestOnlyAKnownObjectLooksEarly: Capstan's labels on an object the
// add-on neither applied nor waits for (a tenant's own Deployment, labelled
// for a cluster add-on) neither nudge a waiting add-on ahead of the syncs,
// nor look at a settled one, nor wake an uninstall that waits for its
// objects to be gone. The object the add-on knows does all three.
func TestOnlyAKnownObjectLooksEarly(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("knows-test")
	defer q.ShutDown()
	known := capstanv1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "apps", Name: "web"}
	d := &driftWatch{
		Delay:        time.Hour,
		IsDrift:      func(types.NamespacedName, []change) (bool, []change) { return false, nil },
		Awaiting:     func(a types.NamespacedName) bool { return a.Name == "waiting" },
		Settled:      func(a types.NamespacedName) bool { return a.Name == "settled" },
		AwaitingGone: func(a types.NamespacedName) bool { return a.Name == "deleting" },
		Knows: func(_ types.NamespacedName, ref capstanv1.ObjectRef, _ client.Reader) bool {
			return ref.Key() == known.Key()
		},
	}
	if err := d.start(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	object := func(name, owner, rv string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, ResourceVersion: rv,
			Labels: map[string]string{capstanv1.AddonLabel: owner, capstanv1.AddonNamespaceLabel: "capstan-system"}}}
	}
	for _, owner := range []string{"waiting", "settled", "deleting"} {
		for rv := 1; rv < 20; rv++ {
			d.nudge(deploymentKind, nil, object("forged", owner, "1"), object("forged", owner, string(rune('1'+rv))))
		}
		d.gone(deploymentKind, nil, object("forged", owner, "2"))
	}
	time.Sleep(healthLookDelay + 500*time.Millisecond)
	if n := q.Len(); n != 0 {
		t.Fatalf("objects the add-ons do not know queued %d looks; want none", n)
	}
	d.nudge(deploymentKind, nil, object("web", "waiting", "1"), object("web", "waiting", "2"))
	d.nudge(deploymentKind, nil, object("web", "settled", "1"), object("web", "settled", "2"))
	d.gone(deploymentKind, nil, object("web", "deleting", "2"))
	var got []string
	for len(got) < 3 {
		req, ok := getWithin(q, 2*healthLookDelay)
		if !ok {
			t.Fatalf("the objects the add-ons know queued only %v; want waiting, settled and deleting", got)
		}
		got = append(got, req.Name)
		q.Done(req)
	}
	slices.Sort(got)
	if want := []string{"deleting", "settled", "waiting"}; !slices.Equal(got, want) {
		t.Errorf("the queue gave %v; want %v", got, want)
	}
}

// getWithin takes the next request of q that is due within wait.
func getWithin(q priorityqueue.PriorityQueue[reconcile.Request], wait time.Duration) (reconcile.Request, bool) {
	deadline := time.Now().Add(wait)
	for q.Len() == 0 {
		if time.Now().After(deadline) {
			return reconcile.Request{}, false
		}
		time.Sleep(20 * time.Millisecond)
	}
	req, _, _ := q.GetWithPriority()
	return req, true
}

// TestKnowsObject: an add-on knows what the controller verified of it,
// what its inventory holds (whatever version of its API names it), and the
// hook that status.hook names, heard of from the watch cache of the
// cluster it targets; not an object that only wears its labels, nor one of
// the same name in another cluster Capstan watches.
func TestKnowsObject(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := capstanv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ref := func(apiVersion, kind, name string) capstanv1.ObjectRef {
		return capstanv1.ObjectRef{APIVersion: apiVersion, Kind: kind, Namespace: "apps", Name: name}
	}
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "web", UID: "u1"}}
	addon.Status.Inventory = capstanv1.IDsOf([]capstanv1.ObjectRef{ref("apps/v1", "Deployment", "web"), ref("v1", "ConfigMap", "settings")})
	addon.Status.Hook = &capstanv1.HookProgress{ObjectRef: ref("batch/v1", "Job", "migrate"), Event: "pre-upgrade"}
	r := &AddonReconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(addon).Build()}
	// The add-on targets a remote cluster, whose watch cache is there; here
	// is the controller's own.
	here, there := fake.NewClientBuilder().Build(), fake.NewClientBuilder().Build()
	r.verified.target(addon, &capstanv1.InventoryCluster{Identity: "i", Endpoint: "https://b.example:6443", Server: "https://b.example:6443"}, there, nil)
	r.verified.note(addon, ref("v1", "Service", "web").Key(), plan.Verified{})
	key := types.NamespacedName{Namespace: "capstan-system", Name: "web"}
	for _, tc := range []struct {
		addon  types.NamespacedName
		ref    capstanv1.ObjectRef
		reader client.Reader
		want   bool
	}{
		{key, ref("v1", "Service", "web"), there, true},
		{key, ref("apps/v1", "Deployment", "web"), there, true},
		{key, ref("apps/v1beta2", "Deployment", "web"), there, true},
		{key, ref("v1", "ConfigMap", "settings"), there, true},
		{key, ref("batch/v1", "Job", "migrate"), there, true},
		{key, ref("apps/v1", "Deployment", "tenant"), there, false},
		{key, ref("v1", "ConfigMap", "web"), there, false},
		{key, ref("v1", "Service", "web"), here, false},
		{key, ref("apps/v1", "Deployment", "web"), here, false},
		{key, ref("batch/v1", "Job", "migrate"), here, false},
		{types.NamespacedName{Namespace: "capstan-system", Name: "gone"}, ref("apps/v1", "Deployment", "web"), there, false},
	} {
		if got := r.knowsObject(context.Background(), tc.addon, tc.ref, tc.reader); got != tc.want {
			t.Errorf("%s knows %s (from %s): %v; want %v", tc.addon, tc.ref.Describe(), map[bool]string{true: "its cluster", false: "another cluster"}[tc.reader == there], got, tc.want)
		}
	}
}

// TestAnotherClustersChangeIsNoDrift: an update or a deletion of an object
// the add-on verified is drift when the watch cache of the cluster it
// targets hears of it; the same object in another cluster, changed or
// deleted, is not.
func TestAnotherClustersChangeIsNoDrift(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "web", UID: "uid-web"}}
	key := types.NamespacedName{Namespace: "ops", Name: "web"}
	cm := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-config", ResourceVersion: "20"}}
	cm.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
	here := fake.NewClientBuilder().WithObjects(cm.DeepCopy()).Build()
	there := fake.NewClientBuilder().Build() // deleted there
	r := &AddonReconciler{}
	r.verified.target(addon, &capstanv1.InventoryCluster{Identity: "i", Endpoint: "https://b.example:6443", Server: "https://b.example:6443"}, there, nil)
	c := change{gvk: cm.GroupVersionKind(), namespace: "apps", name: "web-config"}
	r.verified.store(addon, map[string]plan.Verified{c.ref().Key(): {ResourceVersion: "20"}})
	for _, tc := range []struct {
		reader  client.Reader
		rv      string
		deleted bool
		want    bool
	}{
		{there, "21", false, true},
		{there, "21", true, true},
		{here, "21", false, false},
		{here, "99", true, false},
	} {
		c.reader, c.resourceVersion, c.deleted = tc.reader, tc.rv, tc.deleted
		if got := r.objectDrifted(context.Background(), key, c); got != tc.want {
			t.Errorf("a change (deleted %v) at %s from %s: drifted %v, want %v", tc.deleted, tc.rv,
				map[bool]string{true: "its cluster", false: "another cluster"}[tc.reader == there], got, tc.want)
		}
	}
}

// TestVerifiedIsOfOneCluster: what was verified of an add-on's objects in
// one cluster is forgotten when it targets another, and not found again
// when it comes back; another account or server spelling of the same
// cluster keeps it.
func TestVerifiedIsOfOneCluster(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "web", UID: "uid-web"}}
	here := &capstanv1.InventoryCluster{}
	there := &capstanv1.InventoryCluster{Identity: "as-a", Endpoint: "https://b.example:6443", Server: "https://b.example:6443"}
	asAnother := &capstanv1.InventoryCluster{Identity: "as-b", Endpoint: "https://b.example:6443", Server: "https://b.example:6443/"}
	var v verifiedObjects
	v.target(addon, here, nil, nil)
	v.store(addon, map[string]plan.Verified{"k": {ResourceVersion: "1", Generation: 1}})
	v.target(addon, here, nil, nil)
	if len(v.lookup(addon)) != 1 {
		t.Fatal("the same cluster forgot what was verified")
	}
	v.target(addon, there, nil, nil)
	if got := v.lookup(addon); len(got) != 0 {
		t.Fatalf("another cluster found what was verified here: %v", got)
	}
	v.store(addon, map[string]plan.Verified{"k": {ResourceVersion: "7", Generation: 1}})
	v.target(addon, asAnother, nil, nil)
	if len(v.lookup(addon)) != 1 {
		t.Fatal("another account of the same cluster forgot what was verified")
	}
	v.target(addon, here, nil, nil)
	if got := v.lookup(addon); len(got) != 0 {
		t.Fatalf("back here, what was verified there is taken for this cluster's: %v", got)
	}
}

// liveObjects is an objectReader over fixed objects, by ObjectRef.Key.
type liveObjects map[string]*unstructured.Unstructured

func (l liveObjects) Get(_ context.Context, ref capstanv1.ObjectRef) (*unstructured.Unstructured, error) {
	return l[ref.Key()], nil
}

// TestAStatusWriteIsNoDrift: an update of a verified object with a status
// and no generation is drift only when what is outside its status changed:
// a load balancer's address written is not, an edit of its spec is.
func TestAStatusWriteIsNoDrift(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "web", UID: "uid-web"}}
	key := types.NamespacedName{Namespace: "ops", Name: "web"}
	svc := func(rv, policy, ip string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"namespace": "apps", "name": "web", "resourceVersion": rv},
			"spec":     map[string]any{"type": "LoadBalancer", "externalTrafficPolicy": policy},
			"status":   map[string]any{"loadBalancer": map[string]any{}}}}
		if ip != "" {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"ip": ip}}, "status", "loadBalancer", "ingress")
		}
		return u
	}
	c := change{gvk: schema.GroupVersionKind{Version: "v1", Kind: "Service"}, namespace: "apps", name: "web", resourceVersion: "21"}
	for _, tc := range []struct {
		name string
		now  *unstructured.Unstructured
		want bool
	}{
		{"status written", svc("21", "Cluster", "192.0.2.1"), false},
		{"spec edited", svc("21", "Local", ""), true},
		{"gone since", nil, true},
	} {
		r := &AddonReconciler{}
		r.verified.target(addon, &capstanv1.InventoryCluster{}, nil, liveObjects{c.ref().Key(): tc.now})
		r.verified.store(addon, map[string]plan.Verified{c.ref().Key(): plan.VerifiedAt("d", svc("20", "Cluster", ""), time.Now())})
		if got := r.objectDrifted(context.Background(), key, c); got != tc.want {
			t.Errorf("%s: drifted %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestStatusMayChangeHealth: a status change of a Service, an autoscaler,
// a disruption budget, a CronJob or an Ingress cannot make a settled
// add-on less than healthy, unless its spec.healthChecks judge that kind;
// one of a workload or a custom resource can. A settled add-on is not
// looked at for the first.
func TestStatusMayChangeHealth(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := capstanv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	plain := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "plain"}}
	checked := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "checked"}}
	checked.Spec.HealthChecks = []capstanv1.HealthCheck{{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler", Current: "true"}}
	r := &AddonReconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(plain, checked).Build()}
	gvk := func(group, version, kind string) schema.GroupVersionKind {
		return schema.GroupVersionKind{Group: group, Version: version, Kind: kind}
	}
	for _, tc := range []struct {
		addon string
		gvk   schema.GroupVersionKind
		want  bool
	}{
		{"plain", gvk("", "v1", "Service"), false},
		{"plain", gvk("autoscaling", "v2", "HorizontalPodAutoscaler"), false},
		{"plain", gvk("policy", "v1", "PodDisruptionBudget"), false},
		{"plain", gvk("batch", "v1", "CronJob"), false},
		{"plain", gvk("networking.k8s.io", "v1", "Ingress"), false},
		{"checked", gvk("autoscaling", "v2", "HorizontalPodAutoscaler"), true},
		{"plain", gvk("apps", "v1", "Deployment"), true},
		{"plain", gvk("", "v1", "PersistentVolumeClaim"), true},
		{"plain", gvk("batch", "v1", "Job"), true},
		{"plain", gvk("example.com", "v1", "Database"), true},
	} {
		if got := r.statusMayChangeHealth(context.Background(), types.NamespacedName{Namespace: "ops", Name: tc.addon}, tc.gvk); got != tc.want {
			t.Errorf("%s, a status change of a %s: may change health %v, want %v", tc.addon, tc.gvk.Kind, got, tc.want)
		}
	}

	q := priorityqueue.New[reconcile.Request]("blind-test")
	defer q.ShutDown()
	d := &driftWatch{
		Awaiting:     func(types.NamespacedName) bool { return false },
		Settled:      func(types.NamespacedName) bool { return true },
		StatusCounts: func(_ types.NamespacedName, gvk schema.GroupVersionKind) bool { return !statusBlind[gvk.GroupKind()] },
		Knows:        knowsAll,
	}
	if err := d.start(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	object := func(owner, rv string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: owner, ResourceVersion: rv,
			Labels: map[string]string{capstanv1.AddonLabel: owner, capstanv1.AddonNamespaceLabel: "capstan-system"}}}
	}
	d.nudge(gvk("autoscaling", "v2", "HorizontalPodAutoscaler"), nil, object("scaled", "1"), object("scaled", "2"))
	d.nudge(deploymentKind, nil, object("rolled", "1"), object("rolled", "2"))
	req, ok := getWithin(q, 2*healthLookDelay)
	if !ok || req.Name != "rolled" {
		t.Fatalf("the Deployment's status change queued %v, %v; want a look at rolled", req, ok)
	}
	q.Done(req)
	if req, ok := getWithin(q, time.Second); ok {
		t.Errorf("the autoscaler's status change looked at %s", req.Name)
	}
}

// TestAGenerationlessStatusWriteIsAStatusChange: the write of a status
// alone of a verified object with no generation, which only a read tells
// from an edit, looks at a settled add-on in its turn when a status of that
// kind may change its health (a PersistentVolumeClaim, a Service that
// spec.healthChecks judge); not for a Service no check judges.
func TestAGenerationlessStatusWriteIsAStatusChange(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := capstanv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	object := func(kind, rv string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind,
			"metadata": map[string]any{"namespace": "apps", "name": "data", "resourceVersion": rv},
			"spec":     spec, "status": map[string]any{"phase": "Bound"}}}
	}
	for _, tc := range []struct {
		name   string
		kind   string
		checks []capstanv1.HealthCheck
		want   bool
	}{
		{"a claim", "PersistentVolumeClaim", nil, true},
		{"a Service a check judges", "Service", []capstanv1.HealthCheck{{APIVersion: "v1", Kind: "Service", Current: "true"}}, true},
		{"a Service", "Service", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "web", UID: "uid-web"}}
			addon.Spec.HealthChecks = tc.checks
			key := client.ObjectKeyFromObject(addon)
			r := &AddonReconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(addon).Build()}
			verified := object(tc.kind, "20", map[string]any{"size": "1Gi"})
			c := change{gvk: schema.GroupVersionKind{Version: "v1", Kind: tc.kind}, namespace: "apps", name: "data", resourceVersion: "21"}
			// The status was written since: Lost, or an address.
			now := object(tc.kind, "21", map[string]any{"size": "1Gi"})
			now.Object["status"] = map[string]any{"phase": "Lost"}
			there := fake.NewClientBuilder().Build()
			r.verified.target(addon, &capstanv1.InventoryCluster{}, there, liveObjects{c.ref().Key(): now})
			r.verified.store(addon, map[string]plan.Verified{c.ref().Key(): plan.VerifiedAt("d", verified, time.Now())})

			q := priorityqueue.New[reconcile.Request]("status-only-test")
			defer q.ShutDown()
			d := &driftWatch{
				Delay: 10 * time.Millisecond,
				IsDrift: func(a types.NamespacedName, changes []change) (bool, []change) {
					return r.isDrift(context.Background(), a, changes)
				},
				Awaiting: func(types.NamespacedName) bool { return false },
				Settled:  func(types.NamespacedName) bool { return true },
				StatusCounts: func(a types.NamespacedName, gvk schema.GroupVersionKind) bool {
					return r.statusMayChangeHealth(context.Background(), a, gvk)
				},
				Knows: func(a types.NamespacedName, ref capstanv1.ObjectRef, reader client.Reader) bool {
					return r.knowsObject(context.Background(), a, ref, reader)
				},
			}
			if err := d.start(context.Background(), q); err != nil {
				t.Fatal(err)
			}
			if r.objectDrifted(context.Background(), key, change{gvk: c.gvk, namespace: "apps", name: "data", resourceVersion: "21", reader: there}) {
				t.Fatal("the write of a status alone was taken for drift")
			}
			obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "data", ResourceVersion: "21",
				Labels: map[string]string{capstanv1.AddonLabel: "web", capstanv1.AddonNamespaceLabel: "ops"}}}
			d.seen(key, c.gvk, there, obj, false)
			req, ok := getWithin(q, 2*healthLookDelay)
			if ok != tc.want || ok && req.NamespacedName != key {
				t.Errorf("the status write looked at %v (%v); want a look %v", req, ok, tc.want)
			}
		})
	}
}

// TestChangesOfEachClusterAreKeptApart: a change of an object in the
// cluster an add-on targets is not replaced, in the same check, by a later
// change of an object of the same namespace and name in another cluster.
func TestChangesOfEachClusterAreKeptApart(t *testing.T) {
	addon := types.NamespacedName{Namespace: "ops", Name: "web"}
	here, there := fake.NewClientBuilder().Build(), fake.NewClientBuilder().Build()
	decided := make(chan []change, 1)
	d := &driftWatch{
		Delay: 50 * time.Millisecond,
		IsDrift: func(_ types.NamespacedName, changes []change) (bool, []change) {
			decided <- changes
			return false, nil
		},
	}
	q := priorityqueue.New[reconcile.Request]("clusters-test")
	defer q.ShutDown()
	if err := d.start(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	obj := func(rv string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", ResourceVersion: rv}}
	}
	d.seen(addon, deploymentKind, there, obj("7"), true)
	d.seen(addon, deploymentKind, here, obj("40"), false)
	d.seen(addon, deploymentKind, here, obj("41"), false)
	select {
	case changes := <-decided:
		if !slices.ContainsFunc(changes, func(c change) bool { return c.reader == there && c.deleted }) || len(changes) != 2 {
			t.Errorf("the check saw %d change(s), without the deletion there: %+v", len(changes), changes)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("never decided")
	}
}
