package gitops_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/gitops/gitserver"
)

// TestSyncerMovesAnAddonBetweenFolders: two AddonRepositories read one
// branch of one git repository, with the folders team-a and team-b. One
// commit moves team-a/x.yaml to team-b/x.yaml. Whichever repository syncs
// first, the Addon x goes to team-b as it is: the same object (its UID),
// with what others wrote on it, and never deleted on the way.
func TestSyncerMovesAnAddonBetweenFolders(t *testing.T) {
	needCluster(t)
	for _, order := range [][]string{{"team-a", "team-b"}, {"team-b", "team-a"}} {
		t.Run(order[0]+" first", func(t *testing.T) {
			ctx := context.Background()
			ns := newNamespace(t, "gitops-move")
			w, x := twoTeams(t, ns)
			before := mustAddon(t, ns, "x")
			if before.Labels[gitops.ManagedByGitLabel] != "team-a" {
				t.Fatalf("x is not team-a's: %v", before.Labels)
			}
			// What others wrote on it, which a deletion would lose.
			before.Spec.SyncRequest, before.Spec.ApprovedPlan = 2, approved
			// A mark for a removal (capstan addon remove --uninstall),
			// which a move is not.
			metav1.SetMetaDataAnnotation(&before.ObjectMeta, capstanv1.UninstallAnnotation, "true")
			if err := env.client.Update(ctx, before, client.FieldOwner("someone")); err != nil {
				t.Fatal(err)
			}

			// NOTE: the cluster's syncer reads both in an hour; these
			// syncers read them in the order of the subtest, one at a time.
			c2 := w.Remove("team-a/x.yaml").Write("team-b/x.yaml", x).CommitAndPush("x goes to team b")
			syncer := &controller.AddonRepositoryReconciler{Client: env.client, APIReader: env.client}
			for _, team := range order {
				if _, err := syncer.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: team}}); err != nil {
					t.Fatalf("sync of %s: %v", team, err)
				}
				if err := sameAddon(t, ns, "x", before.UID); err != nil {
					t.Fatalf("after the sync of %s: %v", team, err)
				}
			}
			for _, team := range order {
				if r := getRepo(t, ns, team); r.Status.LastSyncedCommit != c2 || r.Status.InvalidFileCount != 0 {
					t.Fatalf("%s: synced %s, invalid files %+v", team, r.Status.LastSyncedCommit, r.Status.InvalidFiles)
				}
			}
			got := mustAddon(t, ns, "x")
			switch {
			case got.Labels[gitops.ManagedByGitLabel] != "team-b" || got.Annotations[gitops.GitFileAnnotation] != "team-b/x.yaml":
				t.Fatalf("x was not handed to team-b: labels %v, annotations %v", got.Labels, got.Annotations)
			case got.Spec.SyncRequest != 2 || got.Spec.ApprovedPlan != approved:
				t.Fatalf("what others wrote on x was lost: %d %q", got.Spec.SyncRequest, got.Spec.ApprovedPlan)
			case got.Annotations[capstanv1.UninstallAnnotation] != "":
				t.Fatalf("x moved with the uninstall mark of a removal: %v", got.Annotations)
			}
			mustAddon(t, ns, "y")
			mustAddon(t, ns, "z")
		})
	}
}

// TestSyncerMovesAnAddonToAnInvalidFile: x moves from team-a's folder to
// team-b's, where its file is invalid, so team-b does not apply it. The
// hand-over points x's git-file at team-b's folder all the same, so x is
// team-b's own Addon, not a copy of team-a's: when the file is then
// removed, team-b deletes it, instead of keeping it for ever.
func TestSyncerMovesAnAddonToAnInvalidFile(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-move-invalid")
	w, _ := twoTeams(t, ns)
	before := mustAddon(t, ns, "x")
	c2 := w.Remove("team-a/x.yaml").Write("team-b/x.yaml", "name: x\nbogus: true\nhelm: {repo: https://x, chart: x}\n").
		CommitAndPush("x goes to team b, with a typo")
	syncer := &controller.AddonRepositoryReconciler{Client: env.client, APIReader: env.client}
	sync := func(team string) {
		t.Helper()
		if _, err := syncer.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: team}}); err != nil {
			t.Fatalf("sync of %s: %v", team, err)
		}
	}
	sync("team-a")
	sync("team-b")
	if r := getRepo(t, ns, "team-b"); r.Status.LastSyncedCommit != c2 || r.Status.InvalidFileCount != 1 {
		t.Fatalf("team-b: synced %s, invalid files %+v; want %s with team-b/x.yaml invalid", r.Status.LastSyncedCommit, r.Status.InvalidFiles, c2)
	}
	if err := sameAddon(t, ns, "x", before.UID); err != nil {
		t.Fatal(err)
	}
	if got := mustAddon(t, ns, "x"); got.Labels[gitops.ManagedByGitLabel] != "team-b" || got.Annotations[gitops.GitFileAnnotation] != "team-b/x.yaml" {
		t.Fatalf("x handed to team-b: labels %v, annotations %v; want team-b's label and file", got.Labels, got.Annotations)
	}

	c3 := w.Remove("team-b/x.yaml").CommitAndPush("no x after all")
	sync("team-b")
	if r := getRepo(t, ns, "team-b"); r.Status.LastSyncedCommit != c3 {
		t.Fatalf("team-b: synced %s; want %s", r.Status.LastSyncedCommit, c3)
	}
	switch a, err := getAddon(t, ns, "x"); {
	case apierrors.IsNotFound(err):
	case err != nil:
		t.Fatal(err)
	case a.DeletionTimestamp == nil:
		t.Fatalf("x, whose file left team-b's folder, is kept: labels %v, annotations %v", a.Labels, a.Annotations)
	}
}

// sameAddon says what is wrong when the Addon is not the one with uid,
// alive.
func sameAddon(t *testing.T, ns, name string, uid types.UID) error {
	t.Helper()
	switch a, err := getAddon(t, ns, name); {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("the Addon %s was deleted", name)
	case err != nil:
		return err
	case a.UID != uid || a.DeletionTimestamp != nil:
		return fmt.Errorf("the Addon %s is another object or being deleted: UID %s (was %s), deletion %v", name, a.UID, uid, a.DeletionTimestamp)
	}
	return nil
}

// staleAddons is a client whose Addon lists answer what the namespace
// held at one moment (as a cache, or a List, read just before another
// worker wrote), filtered as asked; everything else is the API server's.
type staleAddons struct {
	client.Client
	addons []capstanv1.Addon
}

func (c staleAddons) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	l, ok := list.(*capstanv1.AddonList)
	if !ok {
		return c.Client.List(ctx, list, opts...)
	}
	o := &client.ListOptions{}
	o.ApplyOptions(opts)
	l.Items = nil
	for _, a := range c.addons {
		if o.LabelSelector == nil || o.LabelSelector.Matches(labels.Set(a.Labels)) {
			l.Items = append(l.Items, *a.DeepCopy())
		}
	}
	return nil
}

// TestSyncerMovesAnAddonWhileTheOtherSyncs: the two repositories of a
// move sync at once, so that one relabels x while the other's view still
// shows it team-a's. The one that finds its relabel refused reads x again
// and finds nothing left to do: team-a, handing it over, finds it
// team-b's already; team-b, taking it over, finds it its own, and applies
// its file. Neither reports the race as a failed sync.
func TestSyncerMovesAnAddonWhileTheOtherSyncs(t *testing.T) {
	needCluster(t)
	for _, team := range []string{"team-a", "team-b"} {
		t.Run(team+" late", func(t *testing.T) {
			ctx := context.Background()
			ns := newNamespace(t, "gitops-race")
			w, x := twoTeams(t, ns)
			var before capstanv1.AddonList
			if err := env.client.List(ctx, &before, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			uid := mustAddon(t, ns, "x").UID
			c2 := w.Remove("team-a/x.yaml").Write("team-b/x.yaml", x).CommitAndPush("x goes to team b")
			// The other repository's sync, a moment before: x is team-b's.
			if err := env.client.Patch(ctx, mustAddon(t, ns, "x"), client.RawPatch(types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"`+gitops.ManagedByGitLabel+`":"team-b"}}}`))); err != nil {
				t.Fatal(err)
			}
			stale := staleAddons{Client: env.client, addons: before.Items}
			syncer := &controller.AddonRepositoryReconciler{Client: env.client, APIReader: stale}
			if team == "team-b" {
				syncer = &controller.AddonRepositoryReconciler{Client: stale, APIReader: env.client}
			}
			if _, err := syncer.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: team}}); err != nil {
				t.Fatalf("sync of %s: %v", team, err)
			}
			if r := getRepo(t, ns, team); r.Status.LastSyncedCommit != c2 || r.Status.InvalidFileCount != 0 {
				t.Fatalf("%s: synced %q, invalid files %+v, conditions %+v", team, r.Status.LastSyncedCommit, r.Status.InvalidFiles, r.Status.Conditions)
			}
			if err := sameAddon(t, ns, "x", uid); err != nil {
				t.Fatal(err)
			}
			got := mustAddon(t, ns, "x")
			if got.Labels[gitops.ManagedByGitLabel] != "team-b" {
				t.Fatalf("x is not team-b's: %v", got.Labels)
			}
			if team == "team-b" && got.Annotations[gitops.GitFileAnnotation] != "team-b/x.yaml" {
				t.Fatalf("team-b did not apply its file to x: %v", got.Annotations)
			}
		})
	}
}

// twoTeams pushes a git repository whose folder team-a defines the add-ons
// x and y and team-b z, and makes an AddonRepository of each folder's name
// in ns, both synced. It returns the clone and x's definition.
func twoTeams(t *testing.T, ns string) (*gitserver.Work, string) {
	t.Helper()
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	x := "name: x\nhelm: {repo: https://x, chart: x, version: 1.0.0}\n"
	c1 := w.Write("team-a/x.yaml", x).
		Write("team-a/y.yaml", "name: y\nhelm: {repo: https://x, chart: y}\n").
		Write("team-b/z.yaml", "name: z\nhelm: {repo: https://x, chart: z}\n").
		CommitAndPush("x and y for team a, z for team b")
	for _, team := range []string{"team-a", "team-b"} {
		createRepo(t, ns, team, url, func(r *capstanv1.AddonRepository) { r.Spec.Folder = team })
		waitSynced(t, ns, team, c1)
	}
	return w, x
}

// TestSyncerTakesOverTheAddonsOfADeletedRepository: an AddonRepository is
// deleted (which leaves its Addons, labelled with its name) and another is
// made for the same URL and folder, as when one is renamed. The new one
// takes the Addons over as they are: the same objects, with what others
// wrote on them, its label, and its files' configuration; no file is
// reported as another repository's.
func TestSyncerTakesOverTheAddonsOfADeletedRepository(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-renamed")
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	c1 := w.Write("addons/x.yaml", "name: x\nhelm: {repo: https://x, chart: x, version: 1.0.0}\n").
		Write("addons/y.yaml", "name: y\nhelm: {repo: https://x, chart: y}\n").
		CommitAndPush("x and y")
	createRepo(t, ns, "old", url)
	waitSynced(t, ns, "old", c1)
	before := mustAddon(t, ns, "x")
	before.Spec.SyncRequest, before.Spec.ApprovedPlan = 2, approved
	if err := env.client.Update(ctx, before, client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	if err := env.client.Delete(ctx, getRepo(t, ns, "old")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "old deleted", func() error {
		if err := env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "old"}, &capstanv1.AddonRepository{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("old is still there: %v", err)
		}
		return nil
	})

	c2 := w.Write("addons/x.yaml", "name: x\nhelm: {repo: https://x, chart: x, version: 2.0.0}\n").CommitAndPush("x 2.0.0")
	createRepo(t, ns, "new", url)
	r := waitSynced(t, ns, "new", c2)
	if r.Status.InvalidFileCount != 0 || r.Status.Addons != 2 {
		t.Fatalf("new: %d Addons, invalid files %+v", r.Status.Addons, r.Status.InvalidFiles)
	}
	if err := sameAddon(t, ns, "x", before.UID); err != nil {
		t.Fatal(err)
	}
	got := mustAddon(t, ns, "x")
	switch {
	case got.Labels[gitops.ManagedByGitLabel] != "new":
		t.Fatalf("x was not taken over by new: %v", got.Labels)
	case got.Spec.Chart == nil || got.Spec.Chart.Version != "2.0.0" || got.Annotations[gitops.GitCommitAnnotation] != c2:
		t.Fatalf("x does not follow its file at %s: chart %+v, annotations %v", c2, got.Spec.Chart, got.Annotations)
	case got.Spec.SyncRequest != 2 || got.Spec.ApprovedPlan != approved:
		t.Fatalf("what others wrote on x was lost: %d %q", got.Spec.SyncRequest, got.Spec.ApprovedPlan)
	}
	if y := mustAddon(t, ns, "y"); y.Labels[gitops.ManagedByGitLabel] != "new" {
		t.Fatalf("y was not taken over by new: %v", y.Labels)
	}
}

// staleRepos is a client whose lists of AddonRepositories leave out those
// named, as a list read just before they were made; everything else, and
// a Get of those, is the API server's.
type staleRepos struct {
	client.Client
	missing string
}

func (c staleRepos) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if l, ok := list.(*capstanv1.AddonRepositoryList); ok {
		l.Items = slices.DeleteFunc(l.Items, func(r capstanv1.AddonRepository) bool { return r.Name == c.missing })
	}
	return nil
}

// TestSyncerTakesNoAddonOfARepositoryMadeSinceItsList: the sync's list of
// the namespace's AddonRepositories lacks old, made (and synced) since.
// The Addon old labels is not taken as an orphan's: old is looked for
// again, and found, so the file is reported as old's.
func TestSyncerTakesNoAddonOfARepositoryMadeSinceItsList(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-listed")
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	c1 := w.Write("addons/x.yaml", "name: x\nhelm: {repo: https://x, chart: x}\n").CommitAndPush("x")
	createRepo(t, ns, "old", url)
	waitSynced(t, ns, "old", c1)
	createRepo(t, ns, "new", url)
	waitSynced(t, ns, "new", c1)

	syncer := &controller.AddonRepositoryReconciler{Client: env.client, APIReader: staleRepos{Client: env.client, missing: "old"}}
	if _, err := syncer.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "new"}}); err != nil {
		t.Fatalf("sync of new: %v", err)
	}
	if got := mustAddon(t, ns, "x"); got.Labels[gitops.ManagedByGitLabel] != "old" {
		t.Fatalf("x was taken from old, which exists: %v", got.Labels)
	}
	r := getRepo(t, ns, "new")
	if r.Status.InvalidFileCount != 1 || !strings.Contains(r.Status.InvalidFiles[0].Message, `AddonRepository "old"`) {
		t.Fatalf("new does not report x as old's: %+v", r.Status.InvalidFiles)
	}
}

// failingOwnedList is a client whose lists of the Addons that a
// repository's label selects fail, as when the API server does not answer
// for a moment; everything else is the API server's.
type failingOwnedList struct {
	client.Client
}

func (c failingOwnedList) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := &client.ListOptions{}
	o.ApplyOptions(opts)
	if _, ok := list.(*capstanv1.AddonList); ok && o.LabelSelector != nil && !o.LabelSelector.Empty() {
		return apierrors.NewServiceUnavailable("the API server did not answer")
	}
	return c.Client.List(ctx, list, opts...)
}

// TestSyncerMovesAnAddonToARepositoryWhoseNewerSyncFailed: x moves from
// infra to apps, of another git repository, as the docs say to: x.yaml is
// committed to apps's first, and apps syncs it (reporting the clash);
// then apps's branch moves on, and that commit's sync fails, so apps's
// last synced commit is still the one that defines x. When x.yaml leaves
// infra, infra goes by what apps defines at its last synced commit, not
// by the newer read whose sync failed: x is handed to apps, not deleted.
func TestSyncerMovesAnAddonToARepositoryWhoseNewerSyncFailed(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := newNamespace(t, "gitops-move-failed")
	srv := gitserver.Start(t)
	infraURL, appsURL := srv.Create(t, "infra"), srv.Create(t, "apps")
	infra, apps := gitserver.Clone(t, infraURL), gitserver.Clone(t, appsURL)
	x := "name: x\nhelm: {repo: https://x, chart: x, version: 1.0.0}\n"
	// NOTE: y keeps infra's folder from being emptied, whose refusal
	// would keep x whatever infra makes of apps.
	c1 := infra.Write("addons/x.yaml", x).Write("addons/y.yaml", "name: y\nhelm: {repo: https://x, chart: y}\n").CommitAndPush("x and y")
	createRepo(t, ns, "infra", infraURL)
	waitSynced(t, ns, "infra", c1)
	uid := mustAddon(t, ns, "x").UID

	b1 := apps.Write("addons/x.yaml", x).CommitAndPush("x comes to apps")
	createRepo(t, ns, "apps", appsURL)
	waitSynced(t, ns, "apps", b1)
	syncer := &controller.AddonRepositoryReconciler{Client: env.client, APIReader: env.client}
	sync := func(name string) error {
		t.Helper()
		_, err := syncer.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}})
		return err
	}
	if err := sync("apps"); err != nil {
		t.Fatalf("sync of apps: %v", err)
	}
	if r := getRepo(t, ns, "apps"); r.Status.LastSyncedCommit != b1 || !hasInvalid(r, "addons/x.yaml") {
		t.Fatalf("apps: synced %s, invalid files %+v; want %s with x reported as infra's", r.Status.LastSyncedCommit, r.Status.InvalidFiles, b1)
	}

	apps.Write("README.md", "apps\n").CommitAndPush("a readme")
	syncer.APIReader = failingOwnedList{Client: env.client}
	if err := sync("apps"); err == nil {
		t.Fatal("the sync of apps, whose list of its Addons fails, succeeded")
	}
	syncer.APIReader = env.client
	if r := getRepo(t, ns, "apps"); r.Status.LastSyncedCommit != b1 {
		t.Fatalf("apps: synced %s; want %s, as the newer sync failed", r.Status.LastSyncedCommit, b1)
	}

	infra.Remove("addons/x.yaml").CommitAndPush("x went to apps")
	if err := sync("infra"); err != nil {
		t.Fatalf("sync of infra: %v", err)
	}
	if err := sameAddon(t, ns, "x", uid); err != nil {
		t.Fatal(err)
	}
	if got := mustAddon(t, ns, "x"); got.Labels[gitops.ManagedByGitLabel] != "apps" {
		t.Fatalf("x was not handed to apps: %v", got.Labels)
	}
}

// TestSyncerSaysWhichSiblingKeepsAnAddon: infra reads main of a git
// repository; ops, of the same repository, names no branch, and its reads
// fail (its Secret is missing), so it may read main too and define x
// there. When x.yaml leaves infra's folder, x is kept, and infra's Ready
// says so, and names ops and what it waits for.
func TestSyncerSaysWhichSiblingKeepsAnAddon(t *testing.T) {
	needCluster(t)
	ns := newNamespace(t, "gitops-undecided")
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	w := gitserver.Clone(t, url)
	c1 := w.Write("addons/x.yaml", "name: x\nhelm: {repo: https://x, chart: x}\n").
		Write("addons/y.yaml", "name: y\nhelm: {repo: https://x, chart: y}\n").CommitAndPush("x and y")
	createRepo(t, ns, "infra", url, func(r *capstanv1.AddonRepository) { r.Spec.Branch = "main" })
	waitSynced(t, ns, "infra", c1)
	uid := mustAddon(t, ns, "x").UID
	createRepo(t, ns, "ops", url, func(r *capstanv1.AddonRepository) {
		r.Spec.Folder = "ops"
		r.Spec.SecretRef = &capstanv1.LocalObjectReference{Name: "missing"}
	})
	waitRead(t, ns, "ops")

	c2 := w.Remove("addons/x.yaml").CommitAndPush("x goes, perhaps to ops")
	trigger(t, ns, "infra")
	repo := waitSynced(t, ns, "infra", c2)
	if err := sameAddon(t, ns, "x", uid); err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(repo.Status.Conditions, capstanv1.ConditionReady)
	if c == nil || !strings.Contains(c.Message, "1 Addons whose files left the folder are kept as they are") ||
		!strings.Contains(c.Message, `x until AddonRepository "ops", of the same git repository, reads a branch (it names no spec.branch`) {
		t.Fatalf("Ready of infra: %+v; want it to say x is kept until ops reads a branch", c)
	}
}
