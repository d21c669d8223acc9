package controller_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestRepointedAddon installs an add-on in the controller's own cluster,
// then points its spec.kubeConfig at a second local control plane with a
// new chart version in the same change. The plan says the sync installs
// anew there, and the status keeps describing this cluster until it is
// approved. The sync then runs the install hooks there, not the upgrade
// hooks; deletes nothing there on the strength of the former inventory,
// not even an object of that name with the add-on's labels; leaves the
// objects here running; records the new cluster; and a Warning event says
// what stays here. Removing spec.kubeConfig again is a new install here;
// and an Addon deleted once repointed deletes nothing and runs no delete
// hook in either cluster.
func TestRepointedAddon(t *testing.T) {
	ctx := context.Background()
	remote, rc, installer, _ := startRemote(t)
	proxy := &tcpProxy{addr: "127.0.0.1:0", target: strings.TrimPrefix(remote.Config.Host, "https://")}
	proxy.up(t)
	defer proxy.down()

	ns := newNamespace(t)
	name := "repoint-" + ns
	hooks := map[string]string{
		"templates/installed.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-installed\n  annotations: {\"helm.sh/hook\": post-install}\n",
		"templates/upgraded.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-upgraded\n  annotations: {\"helm.sh/hook\": post-upgrade}\n",
		"templates/deleting.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-deleting\n  annotations: {\"helm.sh/hook\": pre-delete}\n",
	}
	v1 := map[string]string{"templates/extra.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-extra\n"}
	for k, v := range hooks {
		v1[k] = v
	}
	url1, _ := charts.publish(t, webChart("1.0.0", v1))
	url2, _ := charts.publish(t, webChart("1.0.1", hooks))
	a := create(t, newAddon(controllerNS, name, url1, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) { s.Prune = true })))
	got := waitPhase(t, a, capstanv1.PhaseSynced)
	if c := got.Status.InventoryCluster; c == nil || *c != (capstanv1.InventoryCluster{}) {
		t.Fatalf("the inventory is not recorded as this cluster's: %+v", c)
	}
	here := len(got.Status.Inventory)

	// The remote cluster already holds an object of the name the former
	// inventory holds and the new render drops, with the add-on's labels.
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-extra", Labels: got.AppliedLabels()}},
	} {
		if err := rc.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name},
		Data: map[string][]byte{"value": remoteKubeconfig(t, remote, "https://"+proxy.addr, installer)}}); err != nil {
		t.Fatal(err)
	}
	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.Chart.URL, cur.Spec.ManualSync = url2, true
		cur.Spec.KubeConfig = &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: name}}
	})
	got = waitPhase(t, a, capstanv1.PhaseOutOfSync)
	if !slices.ContainsFunc(got.Status.Plan.Notices, func(n capstanv1.Notice) bool {
		return n.Path == "spec.kubeConfig" && strings.Contains(n.Message, "are in the controller's own cluster, which spec.kubeConfig no longer names")
	}) {
		t.Errorf("the plan does not say it leaves the inventory in this cluster: %+v", got.Status.Plan.Notices)
	}
	if c := got.Status.InventoryCluster; c == nil || c.Server != "" || len(got.Status.Inventory) != here || got.Status.AppliedHash == "" {
		t.Errorf("a plan that waits for its approval changed the stored status: %+v, %d objects", c, len(got.Status.Inventory))
	}

	update(t, got, func(cur *capstanv1.Addon) { cur.Spec.ApprovedPlan = cur.Status.Plan.Hash; cur.Spec.SyncRequest++ })
	got = waitFor(t, a, 90*time.Second, "the install there", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.ObservedGeneration == cur.Generation && cur.Status.LastSyncRequest == cur.Spec.SyncRequest
	})
	if c := got.Status.InventoryCluster; c == nil || c.Server != "https://"+proxy.addr || c.Identity == "" {
		t.Errorf("the status does not record the remote cluster: %+v", c)
	}
	remoteCM := func(suffix string) bool {
		err := rc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + suffix}, &corev1.ConfigMap{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	if !remoteCM("-installed") || remoteCM("-upgraded") {
		t.Errorf("the new cluster ran the upgrade hooks, not the install hooks: post-install %v, post-upgrade %v", remoteCM("-installed"), remoteCM("-upgraded"))
	}
	if !remoteCM("-config") {
		t.Error("the render was not applied there")
	}
	if !remoteCM("-extra") {
		t.Error("the sync deleted there an object that only the former cluster's inventory held")
	}
	for _, suffix := range []string{"-config", "-extra", "-installed"} {
		if live(t, "v1", "ConfigMap", ns, name+suffix) == nil {
			t.Errorf("%s%s was deleted here, where nothing is managed any more", name, suffix)
		}
	}
	if live(t, "v1", "ConfigMap", ns, name+"-upgraded") != nil {
		t.Error("the upgrade hooks ran here")
	}
	leftEvents := func() []string {
		var events eventsv1.EventList
		if err := admin.List(ctx, &events, client.InNamespace(controllerNS)); err != nil {
			t.Fatal(err)
		}
		var notes []string
		for _, e := range events.Items {
			if e.Regarding.Name == name && e.Reason == "LeftOnFormerCluster" && e.Type == corev1.EventTypeWarning {
				notes = append(notes, e.Note)
			}
		}
		return notes
	}
	var notes []string
	eventually(t, 10*time.Second, "a LeftOnFormerCluster event", func() bool { notes = leftEvents(); return len(notes) > 0 })
	if n := notes[0]; !strings.Contains(n, "object(s) of the inventory stay in the controller's own cluster") ||
		!strings.Contains(n, "ConfigMap "+ns+"/"+name+"-extra") || !strings.Contains(n, capstanv1.AddonLabel+"="+name) {
		t.Errorf("the event does not say what stays, where, and how to remove it: %s", n)
	}

	// Back to this cluster: an install again, and the remote objects stay.
	update(t, got, func(cur *capstanv1.Addon) {
		cur.Spec.KubeConfig, cur.Spec.ManualSync = nil, false
	})
	got = waitFor(t, a, 90*time.Second, "the install here", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.ObservedGeneration == cur.Generation
	})
	if c := got.Status.InventoryCluster; c == nil || *c != (capstanv1.InventoryCluster{}) {
		t.Errorf("the inventory is not recorded as this cluster's again: %+v", c)
	}
	if !remoteCM("-config") || !remoteCM("-installed") {
		t.Error("removing spec.kubeConfig deleted the objects of the remote cluster")
	}
	if live(t, "v1", "ConfigMap", ns, name+"-extra") == nil || live(t, "v1", "ConfigMap", ns, name+"-upgraded") != nil {
		t.Error("the install here pruned on the strength of the remote inventory, or ran the upgrade hooks")
	}
	eventually(t, 10*time.Second, "a second LeftOnFormerCluster event", func() bool { return len(leftEvents()) > 1 })

	// Repointed, its install there held for approval, then uninstalled:
	// the uninstall there has nothing to delete and no delete hook to run,
	// and this cluster is not touched.
	update(t, got, func(cur *capstanv1.Addon) {
		cur.Spec.KubeConfig = &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: name}}
		cur.Spec.ManualSync = true
		cur.Annotations = map[string]string{capstanv1.UninstallAnnotation: "true"}
	})
	waitPhase(t, a, capstanv1.PhaseOutOfSync)
	if err := admin.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the Addon gone", func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(a), &capstanv1.Addon{}))
	})
	if remoteCM("-deleting") || !remoteCM("-config") {
		t.Errorf("the uninstall ran a delete hook (%v) or deleted (%v) in a cluster it never applied to", remoteCM("-deleting"), !remoteCM("-config"))
	}
	if live(t, "v1", "ConfigMap", ns, name+"-config") == nil || live(t, "v1", "ConfigMap", ns, name+"-deleting") != nil {
		t.Error("the uninstall touched the former cluster")
	}
	eventually(t, 10*time.Second, "a LeftOnFormerCluster event of the uninstall", func() bool {
		notes := leftEvents()
		return slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "where the uninstall had nothing to delete") })
	})
}

// TestRemoteAccountEdited installs an add-on into a second local control
// plane, then edits its kubeconfig Secret to act there as another account,
// with the same RBAC and groups of its own, and upgrades the chart. That
// is the same cluster: the sync is an upgrade (the upgrade hook runs, the
// install hooks do not run again), the kept inventory prunes the object
// the new version drops, no LeftOnFormerCluster event is emitted, and the
// status records the cluster as the Secret now names it.
func TestRemoteAccountEdited(t *testing.T) {
	ctx := context.Background()
	remote, rc, installer, proxy := startRemote(t)
	deployer := "system:serviceaccount:capstan-remote:deployer"
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-remote", Name: "deployer"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "capstan-deployer"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "capstan-remote", Name: "deployer"}}},
	} {
		if err := rc.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	ns := newNamespace(t)
	name := "account-" + ns
	if err := rc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	hooks := map[string]string{
		"templates/migrate.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-migrated\n  annotations: {\"helm.sh/hook\": pre-install}\n",
		"templates/installed.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-installed\n  annotations: {\"helm.sh/hook\": post-install}\n",
		"templates/upgraded.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-upgraded\n  annotations: {\"helm.sh/hook\": post-upgrade}\n",
	}
	v1 := map[string]string{"templates/extra.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-extra\n"}
	for k, v := range hooks {
		v1[k] = v
	}
	url1, _ := charts.publish(t, webChart("1.0.0", v1))
	url2, _ := charts.publish(t, webChart("1.0.1", hooks))
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name},
		Data: map[string][]byte{"value": remoteKubeconfig(t, remote, "https://"+proxy.addr, installer)}}
	if err := admin.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	a := create(t, newAddon(controllerNS, name, url1, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Prune = true
		s.KubeConfig = &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: name}}
	})))
	installed := waitPhase(t, a, capstanv1.PhaseSynced)
	before := installed.Status.InventoryCluster
	if before == nil || before.Server != "https://"+proxy.addr || before.Identity == "" || before.Endpoint == "" {
		t.Fatalf("the status does not record the remote cluster: %+v", before)
	}
	remoteCM := func(suffix string) bool {
		err := rc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + suffix}, &corev1.ConfigMap{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	// The install hooks ran once; what they left is removed, so a second
	// run would show.
	for _, suffix := range []string{"-migrated", "-installed"} {
		if !remoteCM(suffix) {
			t.Fatalf("the install hook %s%s did not run there", name, suffix)
		}
		if err := rc.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + suffix}}); err != nil {
			t.Fatal(err)
		}
	}

	// The administrator edits the Secret: another account, with groups.
	kc, err := clientcmd.Load(remoteKubeconfig(t, remote, "https://"+proxy.addr, deployer))
	if err != nil {
		t.Fatal(err)
	}
	kc.AuthInfos["admin"].ImpersonateGroups = []string{"system:serviceaccounts", "capstan:deployers"}
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	secret.Data["value"] = data
	if err := admin.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Chart.URL = url2 })
	got := waitFor(t, a, 90*time.Second, "the upgrade as the new account", func(cur *capstanv1.Addon) bool {
		c := cur.Status.InventoryCluster
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.ObservedGeneration == cur.Generation &&
			cur.Status.AppliedHash != installed.Status.AppliedHash && c != nil && c.Identity != before.Identity
	})
	if c := got.Status.InventoryCluster; c.Server != before.Server || c.Endpoint != before.Endpoint {
		t.Errorf("the same cluster is recorded as another one: %+v, was %+v", c, before)
	}
	if remoteCM("-migrated") || remoteCM("-installed") {
		t.Errorf("the install hooks ran again on the running release: pre-install %v, post-install %v", remoteCM("-migrated"), remoteCM("-installed"))
	}
	if !remoteCM("-upgraded") {
		t.Error("the sync was not an upgrade: the post-upgrade hook did not run")
	}
	if remoteCM("-extra") {
		t.Error("the object the new version drops was not pruned: the inventory was not kept")
	}
	if !remoteCM("-config") {
		t.Error("the render is not there")
	}
	var events eventsv1.EventList
	if err := admin.List(ctx, &events, client.InNamespace(controllerNS)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Regarding.Name == name && e.Reason == "LeftOnFormerCluster" {
			t.Errorf("an edited account is taken for another cluster: %s", e.Note)
		}
	}
	eventually(t, 20*time.Second, "the remote audit log to name the new account", func() bool {
		events, err := remote.AuditEvents()
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(events, func(e auditv1.Event) bool {
			return e.ImpersonatedUser != nil && e.ImpersonatedUser.Username == deployer && slices.Contains(e.ImpersonatedUser.Groups, "capstan:deployers")
		})
	})
}

// TestRepointedBackAppliesWhatChanged installs an add-on here, points it
// at a second local control plane with another replica count in the same
// change, and back again within a minute. The Deployment left here runs
// the former count at the generation the remote one has: what the
// controller verified there must not pass it as unchanged here, so the
// sync back updates it, and its plan says so.
func TestRepointedBackAppliesWhatChanged(t *testing.T) {
	ctx := context.Background()
	remote, rc, installer, proxy := startRemote(t)
	ns := newNamespace(t)
	name := "back-" + ns
	url, _ := charts.publish(t, webChart("1.0.0", nil))
	a := create(t, newAddon(controllerNS, name, url, withTarget(ns)))
	waitPhase(t, a, capstanv1.PhaseSynced)
	replicas := func(d *unstructured.Unstructured) int64 {
		n, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
		return n
	}
	here := live(t, "apps/v1", "Deployment", ns, name)
	if here == nil || replicas(here) != 1 || here.GetGeneration() != 1 {
		t.Fatalf("the Deployment here: %v", here)
	}

	if err := rc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: name},
		Data: map[string][]byte{"value": remoteKubeconfig(t, remote, "https://"+proxy.addr, installer)}}); err != nil {
		t.Fatal(err)
	}
	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.Values = jsonValues("replicas: 2")
		cur.Spec.KubeConfig = &capstanv1.KubeConfigReference{SecretRef: capstanv1.LocalObjectReference{Name: name}}
	})
	got := waitFor(t, a, 90*time.Second, "the install there", func(cur *capstanv1.Addon) bool {
		c := cur.Status.InventoryCluster
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.ObservedGeneration == cur.Generation && c != nil && c.Server != ""
	})
	there := &appsv1.Deployment{}
	if err := rc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, there); err != nil {
		t.Fatal(err)
	}
	if there.Spec.Replicas == nil || *there.Spec.Replicas != 2 || there.Generation != 1 {
		t.Fatalf("the Deployment there: replicas %v, generation %d; want 2 at generation 1", there.Spec.Replicas, there.Generation)
	}

	update(t, got, func(cur *capstanv1.Addon) { cur.Spec.KubeConfig = nil })
	got = waitFor(t, a, 90*time.Second, "the install back here", func(cur *capstanv1.Addon) bool {
		c := cur.Status.InventoryCluster
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.ObservedGeneration == cur.Generation && c != nil && c.Server == ""
	})
	if d := live(t, "apps/v1", "Deployment", ns, name); d == nil {
		t.Error("back here, the Deployment is gone")
	} else if replicas(d) != 2 {
		t.Errorf("back here, the Deployment runs %d replicas; want the 2 the add-on, %s, says it applied", replicas(d), got.Status.Phase)
	}
	if p := got.Status.Plan; p != nil {
		for _, o := range p.Objects {
			if o.Kind == "Deployment" && o.Name == name && o.Action == capstanv1.ActionUnchanged {
				t.Errorf("the plan back here shows the Deployment unchanged")
			}
		}
	}
}
