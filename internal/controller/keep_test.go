package controller_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestHelmResourcePolicyKeepsObjects: an object its manifests mark to be
// kept is left running, and leaves the inventory, when an upgrade no
// longer renders it (the plan says so before) and when the add-on is
// uninstalled, as Helm leaves it; an object without the mark goes both
// times. Flux's, kapp's and Argo CD's marks are read as those tools read
// them: Flux's prune: disabled, an annotation or a label, and kapp's
// delete-strategy: orphan keep from both, Argo CD's Prune=false from the
// prune alone and Delete=false from the uninstall alone.
func TestHelmResourcePolicyKeepsObjects(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	annotated := func(key, value string) string { return "  annotations:\n    " + key + ": " + value + "\n" }
	labelled := func(key, value string) string { return "  labels:\n    " + key + ": " + value + "\n" }
	keep := annotated("helm.sh/resource-policy", "keep")
	configMap := func(name, meta string) string {
		return "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n" + meta + "data: {a: b}\n"
	}
	url, _ := charts.publish(t, chart{name: "keepapp", version: "1.0.0", files: map[string]string{
		"templates/all.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: stays\ndata: {a: b}\n" +
			"---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: password\n" + keep + "stringData: {password: generated}\n" +
			configMap("stays-too", "") + configMap("stays-three", "") +
			configMap("argo-no-delete", annotated("argocd.argoproj.io/sync-options", "ServerSideApply=true,Delete=false")) +
			configMap("argo-no-prune", annotated("argocd.argoproj.io/sync-options", "Prune=false")) +
			configMap("flux-label-stays", labelled("kustomize.toolkit.fluxcd.io/prune", "disabled")) +
			configMap("kapp-stays", annotated("kapp.k14s.io/delete-strategy", "orphan")),
		"templates/dropped.yaml": "{{ if .Values.all }}" + configMap("kept", keep) + configMap("plain", "") +
			configMap("flux-kept", annotated("kustomize.toolkit.fluxcd.io/prune", "disabled")) +
			configMap("argo-kept", annotated("argocd.argoproj.io/sync-options", "Prune=false")) +
			configMap("flux-label-kept", labelled("kustomize.toolkit.fluxcd.io/prune", "disabled")) +
			configMap("kapp-kept", annotated("kapp.k14s.io/delete-strategy", "orphan")) +
			configMap("argo-pruned", annotated("argocd.argoproj.io/sync-options", "Delete=false")) + "{{ end }}",
	}})
	a := create(t, newAddon(controllerNS, "keep-"+ns[len(ns)-5:], url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Prune = true
		s.DeletionPolicy = capstanv1.DeletionDelete
		s.Values = jsonValues("all: true")
	})))
	synced := waitPhase(t, a, capstanv1.PhaseSynced)
	inInventory := func(cur *capstanv1.Addon, name string) bool {
		for _, ref := range capstanv1.RefsOf(cur.Status.Inventory) {
			if ref.Name == name {
				return true
			}
		}
		return false
	}
	if !inInventory(synced, "kept") || !inInventory(synced, "plain") {
		t.Fatalf("inventory %v", synced.Status.Inventory)
	}

	// The upgrade drops both ConfigMaps; held for approval, the plan says
	// which one goes and which one stays.
	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.ManualSync = true
		cur.Spec.Values = jsonValues("all: false")
	})
	held := waitFor(t, a, 60*time.Second, "the plan held for approval", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseOutOfSync && cur.Status.ObservedGeneration == cur.Generation
	})
	var deletes []string
	for _, o := range held.Status.Plan.Objects {
		if o.Action == capstanv1.ActionDelete {
			deletes = append(deletes, o.Name)
		}
	}
	slices.Sort(deletes)
	noticed := false
	for _, n := range held.Status.Plan.Notices {
		noticed = noticed || strings.Contains(n.Message, "5 object(s) the render no longer applies are marked to be kept") &&
			strings.Contains(n.Message, "ConfigMap "+ns+"/kept (helm.sh/resource-policy: keep)") &&
			strings.Contains(n.Message, "ConfigMap "+ns+"/flux-kept (kustomize.toolkit.fluxcd.io/prune: disabled)") &&
			strings.Contains(n.Message, "ConfigMap "+ns+"/argo-kept (argocd.argoproj.io/sync-options: Prune=false)") &&
			strings.Contains(n.Message, "ConfigMap "+ns+"/flux-label-kept (label kustomize.toolkit.fluxcd.io/prune: disabled)") &&
			strings.Contains(n.Message, "ConfigMap "+ns+"/kapp-kept (kapp.k14s.io/delete-strategy: orphan)")
	}
	if !slices.Equal(deletes, []string{"argo-pruned", "plain"}) || !noticed {
		t.Fatalf("the plan should delete plain and argo-pruned alone and say what keeps the rest: deletes %v: %s", deletes, describeStatus(held))
	}
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.ManualSync = false })
	upgraded := waitFor(t, a, 60*time.Second, "the upgrade applied", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.AppliedHash != synced.Status.AppliedHash
	})
	for _, name := range []string{"kept", "flux-kept", "argo-kept", "flux-label-kept", "kapp-kept"} {
		if live(t, "v1", "ConfigMap", ns, name) == nil {
			t.Fatalf("the prune deleted %s, which its manifests mark to keep", name)
		}
		if inInventory(upgraded, name) {
			t.Fatalf("the kept object %s should leave the inventory: %v", name, upgraded.Status.Inventory)
		}
	}
	for _, name := range []string{"plain", "argo-pruned"} {
		eventually(t, 30*time.Second, name+" pruned", func() bool { return live(t, "v1", "ConfigMap", ns, name) == nil })
		if inInventory(upgraded, name) {
			t.Fatalf("the pruned %s should leave the inventory: %v", name, upgraded.Status.Inventory)
		}
	}
	var events eventsv1.EventList
	if err := admin.List(ctx, &events, client.InNamespace(controllerNS)); err != nil {
		t.Fatal(err)
	}
	told := false
	for _, e := range events.Items {
		told = told || e.Regarding.Name == a.Name && e.Reason == "KeptByResourcePolicy" && e.Action == "Prune" &&
			strings.Contains(e.Note, "ConfigMap "+ns+"/kept (helm.sh/resource-policy: keep)") && strings.Contains(e.Note, "ConfigMap "+ns+"/argo-kept (argocd.argoproj.io/sync-options: Prune=false)")
	}
	if !told {
		t.Error("no KeptByResourcePolicy event names the kept ConfigMap")
	}

	// The uninstall leaves the marked Secret running.
	if err := admin.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the Addon uninstalled", func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(a), &capstanv1.Addon{}))
	})
	for _, name := range []string{"stays", "stays-too", "stays-three", "argo-no-prune"} {
		if live(t, "v1", "ConfigMap", ns, name) != nil {
			t.Fatalf("the uninstall left %s, which nothing keeps from an uninstall", name)
		}
	}
	for _, name := range []string{"argo-no-delete", "flux-label-stays", "kapp-stays"} {
		if live(t, "v1", "ConfigMap", ns, name) == nil {
			t.Fatalf("the uninstall deleted %s, which its manifests mark to keep", name)
		}
	}
	if live(t, "v1", "Secret", ns, "password") == nil {
		t.Fatal("the uninstall deleted a Secret its chart marks to keep")
	}
	for _, name := range []string{"kept", "flux-kept", "argo-kept", "flux-label-kept", "kapp-kept"} {
		if live(t, "v1", "ConfigMap", ns, name) == nil {
			t.Fatalf("the uninstall deleted %s, which an earlier prune kept", name)
		}
	}
}

// TestPruneConfirmWaitsForApproval: a prune of an object its manifests
// mark Prune=confirm (Argo CD's sync option) waits, OutOfSync, until that
// plan is approved, with the object running meanwhile; the approval
// applies it.
func TestPruneConfirmWaitsForApproval(t *testing.T) {
	ns := newNamespace(t)
	configMap := func(name, meta string) string {
		return "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n" + meta + "data: {a: b}\n"
	}
	url, _ := charts.publish(t, chart{name: "confirmapp", version: "1.0.0", files: map[string]string{
		"templates/all.yaml": configMap("one", "") + configMap("two", "") + configMap("three", ""),
		"templates/dropped.yaml": "{{ if .Values.all }}" + configMap("precious", "  annotations:\n    argocd.argoproj.io/sync-options: Prune=confirm\n") +
			"{{ end }}",
	}})
	a := create(t, newAddon(controllerNS, "confirm-"+ns[len(ns)-5:], url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Prune = true
		s.Values = jsonValues("all: true")
	})))
	waitPhase(t, a, capstanv1.PhaseSynced)
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("all: false") })
	held := waitFor(t, a, 60*time.Second, "the prune held for a confirmation", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseOutOfSync && cur.Status.ObservedGeneration == cur.Generation
	})
	if !strings.Contains(describeStatus(held), "PruneNeedsApproval: this plan deletes 1 object(s) whose manifests ask for a confirmation first (argocd.argoproj.io/sync-options: Prune=confirm): ConfigMap "+ns+"/precious") {
		t.Fatalf("the plan should wait for a confirmation of the prune: %s", describeStatus(held))
	}
	if live(t, "v1", "ConfigMap", ns, "precious") == nil {
		t.Fatal("the object to confirm was deleted before the approval")
	}
	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.ApprovedPlan = cur.Status.Plan.Hash
		cur.Spec.SyncRequest++
	})
	waitPhase(t, a, capstanv1.PhaseSynced)
	eventually(t, 30*time.Second, "the confirmed prune", func() bool { return live(t, "v1", "ConfigMap", ns, "precious") == nil })
}

// TestPruneConfirmBindsTheObjectSeen: an approval of a prune to confirm
// covers the object its approver saw, not another created in its place
// under the same name, with the same labels and marks, while the plan
// waited: the plan's hash changes with the object's UID, and an approval
// of the hash seen deletes nothing.
func TestPruneConfirmBindsTheObjectSeen(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	configMap := func(name, meta string) string {
		return "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n" + meta + "data: {a: b}\n"
	}
	url, _ := charts.publish(t, chart{name: "confirmuid", version: "1.0.0", files: map[string]string{
		"templates/all.yaml": configMap("one", ""),
		"templates/dropped.yaml": "{{ if .Values.all }}" + configMap("precious", "  annotations:\n    argocd.argoproj.io/sync-options: Prune=confirm\n") +
			"{{ end }}",
	}})
	a := create(t, newAddon(controllerNS, "uid-"+ns[len(ns)-5:], url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Prune = true
		s.Values = jsonValues("all: true")
	})))
	waitPhase(t, a, capstanv1.PhaseSynced)
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("all: false") })
	held := waitFor(t, a, 60*time.Second, "the prune held for a confirmation", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseOutOfSync && cur.Status.ObservedGeneration == cur.Generation &&
			strings.Contains(readyMessage(cur), "ask for a confirmation first")
	})
	seen := held.Status.Plan.Hash

	// Someone deletes the object and creates it anew, as it was.
	old := live(t, "v1", "ConfigMap", ns, "precious")
	if err := admin.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	anew := old.DeepCopy()
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields"} {
		delete(anew.Object["metadata"].(map[string]any), f)
	}
	if err := admin.Create(ctx, anew); err != nil {
		t.Fatal(err)
	}
	waitFor(t, a, 60*time.Second, "a plan for the object made anew", func(cur *capstanv1.Addon) bool {
		return cur.Status.Plan != nil && cur.Status.Plan.Hash != seen && strings.Contains(readyMessage(cur), "ask for a confirmation first")
	})

	// The approval of the plan seen deletes nothing.
	approved := update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.ApprovedPlan = seen
		cur.Spec.SyncRequest++
	})
	after := waitFor(t, a, 60*time.Second, "the approval looked at", func(cur *capstanv1.Addon) bool {
		return cur.Status.ObservedGeneration == approved.Generation
	})
	if !strings.Contains(readyMessage(after), "ask for a confirmation first") {
		t.Fatalf("the plan for the object made anew should still wait for a confirmation: %s", describeStatus(after))
	}
	if now := live(t, "v1", "ConfigMap", ns, "precious"); now == nil || now.GetUID() == old.GetUID() {
		t.Fatal("an approval of deleting one object deleted another created in its place")
	}
}

// TestPruneConfirmMarkedAfterThePlan: an object marked Prune=confirm after
// the plan that prunes it was made (here at the prune step, as a person
// marking it while the sync runs would) is not deleted: the prune reads
// the mark at the delete, leaves the object running and in the inventory,
// and the next plan waits for a confirmation of it.
func TestPruneConfirmMarkedAfterThePlan(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	configMap := func(name string) string {
		return "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata: {a: b}\n"
	}
	url, _ := charts.publish(t, chart{name: "confirmlate", version: "1.0.0", files: map[string]string{
		"templates/all.yaml":     configMap("one"),
		"templates/dropped.yaml": "{{ if .Values.all }}" + configMap("precious") + "{{ end }}",
	}})
	a := create(t, newAddon(controllerNS, "late-"+ns[len(ns)-5:], url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Prune = true
		s.Values = jsonValues("all: true")
	})))
	waitPhase(t, a, capstanv1.PhaseSynced)
	key := a.Namespace + "/" + a.Name
	var marked atomic.Bool
	stepHooks.Store(key, func(step string) error {
		if step == "prune" && marked.CompareAndSwap(false, true) {
			obj := live(t, "v1", "ConfigMap", ns, "precious")
			if obj == nil {
				return errors.New("precious is gone before the prune")
			}
			patch := []byte(`{"metadata":{"annotations":{"argocd.argoproj.io/sync-options":"Prune=confirm"}}}`)
			return admin.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
		}
		return nil
	})
	t.Cleanup(func() { stepHooks.Delete(key) })
	statuses := watchStatus(t, a)
	changed := update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Values = jsonValues("all: false") })
	held := waitFor(t, a, 60*time.Second, "the next plan, waiting for a confirmation", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseOutOfSync && cur.Status.ObservedGeneration == cur.Generation &&
			strings.Contains(readyMessage(cur), "ask for a confirmation first")
	})
	// The sync whose prune held is not Synced for a moment: its own status
	// says what it left, before the plan after it asks.
	said := false
	for _, cur := range statuses() {
		if cur.Status.ObservedGeneration != changed.Generation {
			continue
		}
		if cur.Status.Phase == capstanv1.PhaseSynced {
			t.Fatalf("the sync whose prune held reported Synced: %s", describeStatus(cur))
		}
		said = said || strings.Contains(readyMessage(cur), "Applied, but the prune left 1 object(s) running: ConfigMap "+ns+"/precious")
	}
	if !said {
		t.Error("no status said what the sync's prune left")
	}
	if !marked.Load() {
		t.Fatal("the sync never reached the prune")
	}
	if !strings.Contains(describeStatus(held), "PruneNeedsApproval") || !strings.Contains(describeStatus(held), "ConfigMap "+ns+"/precious") {
		t.Fatalf("the plan after the sync should wait for a confirmation of precious: %s", describeStatus(held))
	}
	if live(t, "v1", "ConfigMap", ns, "precious") == nil {
		t.Fatal("the prune deleted an object marked Prune=confirm after its plan was approved")
	}
	inInventory := false
	for _, ref := range capstanv1.RefsOf(held.Status.Inventory) {
		inInventory = inInventory || ref.Name == "precious"
	}
	if !inInventory {
		t.Errorf("precious left the inventory: %v", held.Status.Inventory)
	}
	if h := held.Status.History; len(h) != 2 || h[0].Changes.Delete != 0 {
		t.Fatalf("the revision of the sync whose prune held should count no delete: %+v", h)
	}
	// Confirmed, the delete of the same render is a revision of its own.
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.ApprovedPlan = cur.Status.Plan.Hash; cur.Spec.SyncRequest++ })
	done := waitFor(t, a, 60*time.Second, "the confirmed prune", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseSynced && cur.Status.LastSyncRequest == cur.Spec.SyncRequest
	})
	if live(t, "v1", "ConfigMap", ns, "precious") != nil {
		t.Fatal("the confirmed prune left precious")
	}
	if h := done.Status.History; len(h) != 3 || h[0].Changes.Delete != 1 || h[0].AppliedHash != h[1].AppliedHash || h[0].PlanHash != done.Spec.ApprovedPlan {
		t.Fatalf("the confirmed delete should be a revision of the same render, with the approved plan: %+v", h)
	}
}

// watchStatus keeps every version of a the API server stores from now on,
// and returns a look at them.
func watchStatus(t *testing.T, a *capstanv1.Addon) func() []*capstanv1.Addon {
	t.Helper()
	wc, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &capstanv1.AddonList{}, client.InNamespace(a.Namespace),
		client.MatchingFields{"metadata.name": a.Name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	var seen []*capstanv1.Addon
	go func() {
		for ev := range w.ResultChan() {
			if cur, ok := ev.Object.(*capstanv1.Addon); ok {
				mu.Lock()
				seen = append(seen, cur)
				mu.Unlock()
			}
		}
	}()
	return func() []*capstanv1.Addon {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// TestPrunePlanNamesOwnersOfClaims: a claim that names an object of the
// inventory as its owner (an operator's custom resource owns its
// database's claims so) goes with it when the prune deletes the owner,
// since the garbage collector follows the reference; Capstan keeps only a
// StatefulSet's claims from its delete. The plan says so before, naming
// the owner and the claim, and says nothing of an object no claim names.
func TestPrunePlanNamesOwnersOfClaims(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	configMap := func(name string) string {
		return "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata: {a: b}\n"
	}
	url, _ := charts.publish(t, chart{name: "ownerapp", version: "1.0.0", files: map[string]string{
		"templates/all.yaml":     configMap("stays"),
		"templates/dropped.yaml": "{{ if .Values.all }}" + configMap("owner") + configMap("plain") + "{{ end }}",
	}})
	a := create(t, newAddon(controllerNS, "owner-"+ns[len(ns)-5:], url, withTarget(ns), withSpec(func(s *capstanv1.AddonSpec) {
		s.Prune = true
		s.Values = jsonValues("all: true")
	})))
	waitPhase(t, a, capstanv1.PhaseSynced)
	owner := live(t, "v1", "ConfigMap", ns, "owner")
	if owner == nil {
		t.Fatal("the owner ConfigMap was not applied")
	}
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data", OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: owner.GetUID()}}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := admin.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}

	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.ManualSync = true
		cur.Spec.Values = jsonValues("all: false")
	})
	held := waitFor(t, a, 60*time.Second, "the plan held for approval", func(cur *capstanv1.Addon) bool {
		return cur.Status.Phase == capstanv1.PhaseOutOfSync && cur.Status.ObservedGeneration == cur.Generation
	})
	var said []string
	for _, n := range held.Status.Plan.Notices {
		if strings.Contains(n.Message, "named as owner by PersistentVolumeClaims") {
			said = append(said, n.Message)
		}
	}
	want := "1 object(s) that the prune deletes are named as owner by PersistentVolumeClaims"
	if len(said) != 1 || !strings.HasPrefix(said[0], want) ||
		!strings.Contains(said[0], "ConfigMap "+ns+"/owner (owner of PersistentVolumeClaim "+ns+"/data)") || strings.Contains(said[0], "/plain") {
		t.Fatalf("want one notice %q naming ConfigMap %s/owner and its claim alone; got %q\n%s", want, ns, said, describeStatus(held))
	}
}
