package controller_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/render"
	"capstan.dev/capstan/internal/source"
)

// folderRepo is a git repository on disk, read by the controller over
// file://, which commits files as they are written.
type folderRepo struct {
	t    *testing.T
	dir  string
	repo *git.Repository
}

func newFolderRepo(t *testing.T) *folderRepo {
	t.Helper()
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	return &folderRepo{t: t, dir: dir, repo: repo}
}

func (r *folderRepo) url() string { return "file://" + r.dir }

// commit writes files and commits them, returning the commit.
func (r *folderRepo) commit(files map[string]string) string {
	r.t.Helper()
	wt, err := r.repo.Worktree()
	if err != nil {
		r.t.Fatal(err)
	}
	for name, content := range files {
		p := filepath.Join(r.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
		if _, err := wt.Add(name); err != nil {
			r.t.Fatal(err)
		}
	}
	hash, err := wt.Commit("test", &git.CommitOptions{Author: &object.Signature{Name: "test", Email: "test@capstan.invalid", When: time.Now()}})
	if err != nil {
		r.t.Fatal(err)
	}
	return hash.String()
}

// TestFolderRunsArgoCDHooks: a git folder written for Argo CD runs its
// hooks at Argo CD's phases. The PreSync hook (and a Helm pre-install hook
// rendered into the folder) exists before the Deployment is applied; the
// Sync hook runs after the apply, before the Deployment is Available (its
// minReadySeconds holds it back for seconds); the PostSync hook runs only
// once it is. Skip objects never reach the cluster, and the plan says why;
// a SyncFail hook does not run when the sync succeeds; none of the hooks
// is in the inventory. (etcd's revisions
// order the PreSync hooks before the apply.) A commit that changes nothing
// of the folder runs no hook again; one that changes an object runs the
// PreSync hook anew, and objects an earlier render applied that it marks
// Skip or PreSync leave the inventory, so that the uninstall (with no
// spec.prune) does not delete them. The PostDelete hook runs only at the
// uninstall, and stays after it.
func TestFolderRunsArgoCDHooks(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	hook := func(name, annotations string) string {
		return "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  annotations:\n" + annotations + "data: {a: b}\n"
	}
	deployment := func(image string) string {
		return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  minReadySeconds: 4
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: ` + image + "\n"
	}
	settings := "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata: {a: b}\n"
	wasPlain := func(annotations string) string {
		return "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: was-plain\n" + annotations + "data: {a: b}\n"
	}
	hooks := hook("pre", "    argocd.argoproj.io/hook: PreSync\n") +
		hook("helm-pre", "    helm.sh/hook: pre-install\n") +
		hook("warm", "    argocd.argoproj.io/hook: Sync\n") +
		hook("post", "    argocd.argoproj.io/hook: PostSync\n") +
		hook("local", "    argocd.argoproj.io/hook: Skip\n") +
		hook("alert", "    argocd.argoproj.io/hook: SyncFail\n") +
		hook("bye", "    argocd.argoproj.io/hook: PostDelete\n")
	repo := newFolderRepo(t)
	becameHook := func(annotations string) string {
		return "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: became-hook\n" + annotations + "data: {a: b}\n"
	}
	first := repo.commit(map[string]string{"app/web.yaml": deployment("nginx:1.27") + settings + wasPlain("") + becameHook(""), "app/hooks.yaml": hooks, "README.md": "one\n"})

	a := create(t, &capstanv1.Addon{
		ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: "argo-" + ns[len(ns)-5:]},
		Spec: capstanv1.AddonSpec{
			Git:             &capstanv1.GitSource{URL: repo.url(), Revision: first, Path: "app"},
			TargetNamespace: ns, DeletionPolicy: capstanv1.DeletionDelete,
		},
	})
	installed := waitPhase(t, a, capstanv1.PhaseSynced)

	web := &appsv1.Deployment{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, web); err != nil {
		t.Fatal(err)
	}
	var available time.Time
	for _, c := range web.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			available = c.LastTransitionTime.Time
		}
	}
	if available.IsZero() {
		t.Fatalf("web is not Available once the add-on is Synced: %+v", web.Status)
	}
	created := func(name string) time.Time {
		t.Helper()
		cm := live(t, "v1", "ConfigMap", ns, name)
		if cm == nil {
			t.Fatalf("hook %s did not run", name)
		}
		return cm.GetCreationTimestamp().Time
	}
	// NOTE: etcd's revisions order the writes; creation times have
	// whole seconds only. settings, never changed, was created with the
	// apply.
	revision := func(name string) int64 {
		t.Helper()
		created(name)
		n, err := strconv.ParseInt(live(t, "v1", "ConfigMap", ns, name).GetResourceVersion(), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	applied := revision("settings")
	for _, name := range []string{"pre", "helm-pre"} {
		if revision(name) > applied {
			t.Errorf("%s was created after the apply", name)
		}
	}
	if revision("warm") < applied {
		t.Error("the Sync hook was created before the apply")
	}
	if at := created("warm"); !at.Before(available) {
		t.Errorf("the Sync hook was created at %s, not before web was Available (%s)", at, available)
	}
	if at := created("post"); at.Before(available) {
		t.Errorf("the PostSync hook was created at %s, before web was Available (%s)", at, available)
	}
	for _, name := range []string{"local", "alert", "bye"} {
		if live(t, "v1", "ConfigMap", ns, name) != nil {
			t.Errorf("ConfigMap %s exists after the install", name)
		}
	}
	for _, ref := range capstanv1.RefsOf(installed.Status.Inventory) {
		if ref.Kind == "ConfigMap" && ref.Name != "settings" && ref.Name != "was-plain" && ref.Name != "became-hook" {
			t.Errorf("the inventory holds %s", ref.Describe())
		}
	}
	notices := ""
	if p := installed.Status.Plan; p != nil {
		for _, n := range p.Notices {
			notices += n.Message + "\n"
		}
	}
	for _, want := range []string{"ConfigMap local is marked argocd.argoproj.io/hook: Skip"} {
		if !strings.Contains(notices, want) {
			t.Errorf("the plan's notices do not say %q:\n%s", want, notices)
		}
	}

	// A commit that changes nothing of the folder: no hook runs again.
	preUID := live(t, "v1", "ConfigMap", ns, "pre").GetUID()
	second := repo.commit(map[string]string{"README.md": "two\n"})
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Git.Revision = second })
	same := synced(t, a)
	if same.Status.AppliedHash == installed.Status.AppliedHash {
		t.Fatal("the new commit was not recorded")
	}
	if uid := live(t, "v1", "ConfigMap", ns, "pre").GetUID(); uid != preUID {
		t.Error("a commit that changed nothing of the folder ran the PreSync hook again")
	}

	// A commit that changes the Deployment runs it anew. An object the
	// add-on applied, now marked Skip, leaves the inventory and runs on.
	third := repo.commit(map[string]string{"app/web.yaml": deployment("nginx:1.28") + settings +
		wasPlain("  annotations:\n    argocd.argoproj.io/hook: Skip\n") + becameHook("  annotations:\n    argocd.argoproj.io/hook: PreSync\n")})
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Git.Revision = third })
	upgraded := synced(t, a)
	if uid := live(t, "v1", "ConfigMap", ns, "pre").GetUID(); uid == preUID {
		t.Error("a commit that changed the Deployment did not run the PreSync hook again")
	}
	for _, ref := range capstanv1.RefsOf(upgraded.Status.Inventory) {
		if ref.Name == "was-plain" || ref.Name == "became-hook" {
			t.Errorf("%s stays in the inventory, and the uninstall would delete it", ref.Describe())
		}
	}

	// The uninstall runs the PostDelete hook, which stays.
	if err := admin.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "the Addon gone", func() bool {
		err := admin.Get(ctx, client.ObjectKeyFromObject(a), &capstanv1.Addon{})
		return err != nil
	})
	if live(t, "apps/v1", "Deployment", ns, "web") != nil {
		if d := live(t, "apps/v1", "Deployment", ns, "web"); d.GetDeletionTimestamp() == nil {
			t.Error("the uninstall left web")
		}
	}
	if live(t, "v1", "ConfigMap", ns, "bye") == nil {
		t.Error("the PostDelete hook did not run at the uninstall")
	}
	for _, name := range []string{"was-plain", "became-hook"} {
		if live(t, "v1", "ConfigMap", ns, name) == nil {
			t.Errorf("the uninstall deleted %s, which left the inventory", name)
		}
	}
}

// TestFolderRunsSyncFailHooks: a git folder's SyncFail hook runs when its
// apply fails for good (here its PreSync Job fails), as Argo CD runs it
// when a sync fails, and the Addon's message says so. A retry of the same
// commit that fails again does not run it again; a new commit that fails
// runs it anew; a commit whose sync succeeds runs it not at all, and
// clears the record.
func TestFolderRunsSyncFailHooks(t *testing.T) {
	ns := newNamespace(t)
	migrate := func(fail bool) string {
		label := ""
		if fail {
			label = "      labels: {capstan.dev/test-fail: \"true\"}\n"
		}
		return "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  annotations:\n    argocd.argoproj.io/hook: PreSync\n" +
			"spec:\n  backoffLimit: 0\n  template:\n    metadata:\n" + label + "    spec:\n      restartPolicy: Never\n" +
			"      containers:\n        - name: migrate\n          image: registry.example/tools:1.0\n"
	}
	settings := func(v string) string {
		return "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata: {v: \"" + v + "\"}\n"
	}
	alert := "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: alert\n  annotations:\n    argocd.argoproj.io/hook: SyncFail\ndata: {a: b}\n"
	repo := newFolderRepo(t)
	first := repo.commit(map[string]string{"app/all.yaml": settings("1") + migrate(true) + alert})
	a := create(t, &capstanv1.Addon{
		ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: "syncfail-" + ns[len(ns)-5:]},
		Spec: capstanv1.AddonSpec{
			Git:             &capstanv1.GitSource{URL: repo.url(), Revision: first, Path: "app"},
			TargetNamespace: ns, DeletionPolicy: capstanv1.DeletionDelete,
		},
	})
	failed := failedWith(t, a, "the pre-install hook failed", "then the SyncFail hooks ran")
	if d := failed.Status.SyncFailHooks; d == nil || d.Event != "sync-fail" || d.Hash == "" {
		t.Errorf("status.syncFailHooks = %+v; want the failed render", d)
	}
	listed := false
	for _, h := range failed.Status.Plan.Hooks {
		listed = listed || h.Name == "alert" && slices.Equal(h.Events, []string{"sync-fail"})
	}
	if !listed {
		t.Errorf("the plan's hooks %+v do not list alert at sync-fail", failed.Status.Plan.Hooks)
	}
	ran := live(t, "v1", "ConfigMap", ns, "alert")
	if ran == nil {
		t.Fatal("the SyncFail hook did not run")
	}
	if live(t, "v1", "ConfigMap", ns, "settings") != nil {
		t.Fatal("settings was applied after the PreSync hook failed")
	}

	// The same commit, retried, fails again without the SyncFail hook.
	job1 := job(t, ns, "migrate")
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.SyncRequest++ })
	eventually(t, 90*time.Second, "the PreSync Job run again", func() bool {
		j := job(t, ns, "migrate")
		return j != nil && j.UID != job1.UID
	})
	failedWith(t, a, "the pre-install hook failed")
	if again := live(t, "v1", "ConfigMap", ns, "alert"); again == nil || again.GetUID() != ran.GetUID() {
		t.Fatal("a retry of the same commit ran the SyncFail hook again")
	}

	// A new commit that fails runs it anew.
	second := repo.commit(map[string]string{"app/all.yaml": settings("2") + migrate(true) + alert})
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Git.Revision = second })
	eventually(t, 90*time.Second, "the SyncFail hook run for the new commit", func() bool {
		again := live(t, "v1", "ConfigMap", ns, "alert")
		return again != nil && again.GetUID() != ran.GetUID()
	})
	failedWith(t, a, "the pre-install hook failed", "then the SyncFail hooks ran")

	// A commit whose sync succeeds runs none, and clears the record.
	ran = live(t, "v1", "ConfigMap", ns, "alert")
	third := repo.commit(map[string]string{"app/all.yaml": settings("3") + migrate(false) + alert})
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.Git.Revision = third })
	synced := waitPhase(t, a, capstanv1.PhaseSynced)
	if synced.Status.SyncFailHooks != nil {
		t.Errorf("status.syncFailHooks = %+v after a sync that succeeded", synced.Status.SyncFailHooks)
	}
	if again := live(t, "v1", "ConfigMap", ns, "alert"); again == nil || again.GetUID() != ran.GetUID() {
		t.Error("a sync that succeeded ran the SyncFail hook")
	}
	if live(t, "v1", "ConfigMap", ns, "settings") == nil {
		t.Error("settings was not applied once the PreSync hook succeeded")
	}
}

// TestFolderNamespaceChangeIsANewRender: a git folder's objects that name
// no namespace are put in spec.targetNamespace, so a new target namespace
// moves them all, and is a new render, as a chart's is: held by manual
// sync with the add-on's generation not yet applied (its dependents wait),
// then applied as an upgrade whose Sync hook runs, with a revision in
// status.history. And an add-on a Capstan applied when a folder's hash
// left the namespace out takes that render for the same one: no revision.
func TestFolderNamespaceChangeIsANewRender(t *testing.T) {
	ctx := context.Background()
	first, second := newNamespace(t), newNamespace(t)
	repo := newFolderRepo(t)
	commit := repo.commit(map[string]string{"app/all.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata: {a: b}\n" +
		"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: migrate\n  annotations:\n    argocd.argoproj.io/hook: Sync\ndata: {a: b}\n"})
	a := create(t, &capstanv1.Addon{
		ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: "movens-" + first[len(first)-5:]},
		Spec: capstanv1.AddonSpec{
			Git:             &capstanv1.GitSource{URL: repo.url(), Revision: commit, Path: "app"},
			TargetNamespace: first, DeletionPolicy: capstanv1.DeletionDelete,
		},
	})
	installed := waitPhase(t, a, capstanv1.PhaseSynced)
	if n := len(installed.Status.History); n != 1 {
		t.Fatalf("%d revisions after the install, want 1", n)
	}
	if live(t, "v1", "ConfigMap", first, "migrate") == nil {
		t.Fatal("the Sync hook did not run at the install")
	}

	// As a Capstan whose folder hash left the namespace out recorded it.
	former, err := render.Hash(source.Identity{URL: repo.url(), Commit: commit, Path: "app"}, nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	cur := getAddon(t, a)
	base := cur.DeepCopy()
	cur.Status.AppliedHash = former
	if err := admin.Status().Patch(ctx, cur, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	update(t, a, func(cur *capstanv1.Addon) { cur.Spec.SyncRequest++ })
	same := waitFor(t, a, 90*time.Second, "the former hash taken for this render", func(cur *capstanv1.Addon) bool {
		return cur.Status.LastSyncRequest == cur.Spec.SyncRequest && cur.Status.AppliedHash == installed.Status.AppliedHash
	})
	if n := len(same.Status.History); n != 1 {
		t.Errorf("%d revisions after a sync of the render applied before, recorded with the former hash; want 1", n)
	}

	// A new target namespace, held by manual sync.
	hookUID := live(t, "v1", "ConfigMap", first, "migrate").GetUID()
	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.TargetNamespace, cur.Spec.ManualSync = second, true
	})
	held := waitPhase(t, a, capstanv1.PhaseOutOfSync)
	if held.Status.AppliedGeneration == held.Generation {
		t.Errorf("appliedGeneration %d is the generation held for approval: its dependents would go on", held.Status.AppliedGeneration)
	}
	if live(t, "v1", "ConfigMap", second, "settings") != nil {
		t.Fatal("settings was applied in the new namespace before the approval")
	}
	update(t, a, func(cur *capstanv1.Addon) {
		cur.Spec.ApprovedPlan = cur.Status.Plan.Hash
		cur.Spec.SyncRequest++
	})
	moved := synced(t, a)
	if moved.Status.AppliedHash == installed.Status.AppliedHash {
		t.Error("the render hash did not change with the target namespace")
	}
	if n := len(moved.Status.History); n != 2 || moved.Status.History[0].AppliedHash != moved.Status.AppliedHash {
		t.Errorf("history %+v; want a second revision for the new namespace", moved.Status.History)
	}
	if moved.Status.AppliedGeneration != moved.Generation {
		t.Errorf("appliedGeneration %d, generation %d after the apply", moved.Status.AppliedGeneration, moved.Generation)
	}
	if live(t, "v1", "ConfigMap", second, "settings") == nil {
		t.Error("settings is not in the new namespace")
	}
	if hook := live(t, "v1", "ConfigMap", second, "migrate"); hook == nil || hook.GetUID() == hookUID {
		t.Error("the Sync hook did not run for the new namespace")
	}
}
