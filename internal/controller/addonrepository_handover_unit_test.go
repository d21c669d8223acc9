package controller

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/gitops"
)

// TestSameBranch: a sibling's folder is read at a sync's commit only when
// it reads the branch that sync read, of the same git repository.
func TestSameBranch(t *testing.T) {
	repo := func(url, spec, status string) *capstanv1.AddonRepository {
		return &capstanv1.AddonRepository{Spec: capstanv1.AddonRepositorySpec{URL: url, Branch: spec},
			Status: capstanv1.AddonRepositoryStatus{Branch: status}}
	}
	const u = "https://git.example.com/org/gitops.git"
	cases := []struct {
		name   string
		repo   *capstanv1.AddonRepository
		branch string
		other  *capstanv1.AddonRepository
		want   bool
	}{
		{"both the default", repo(u, "", ""), "main", repo(u, "", ""), true},
		{"the URL written otherwise", repo(u, "", ""), "main", repo("https://GIT.example.com/org/gitops/", "", ""), true},
		{"another repository", repo(u, "", ""), "main", repo("https://git.example.com/org/other.git", "", ""), false},
		{"the same branch named", repo(u, "main", ""), "main", repo(u, "main", ""), true},
		{"another branch", repo(u, "main", ""), "main", repo(u, "prod", ""), false},
		{"a default read as main", repo(u, "main", ""), "main", repo(u, "", "main"), true},
		{"a default never read", repo(u, "main", ""), "main", repo(u, "", ""), false},
		{"a branch against the default", repo(u, "", ""), "main", repo(u, "prod", ""), false},
	}
	for _, tc := range cases {
		if got := sameBranch(tc.repo, tc.branch, tc.other); got != tc.want {
			t.Errorf("%s: sameBranch = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestClaimantAnswersOncePerSync: the refusal of an empty commit and the
// prune ask claimant of one Addon in one sync; a sibling of another branch
// is told of by lastRead, which another worker can change in between. Both
// steps get the first answer, so a commit the refusal let through as a
// handover is not then a deletion.
func TestClaimantAnswersOncePerSync(t *testing.T) {
	const u = "https://git.example.com/org/gitops.git"
	repo := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Namespace: "ns"},
		Spec: capstanv1.AddonRepositorySpec{URL: u, Branch: "main"}}
	other := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Name: "team-b", Namespace: "ns"},
		Spec:   capstanv1.AddonRepositorySpec{URL: u, Branch: "prod"},
		Status: capstanv1.AddonRepositoryStatus{LastSyncedCommit: "c"}}
	reads := 0
	sibs := &siblings{repo: repo, branch: "main", loaded: true,
		byName: map[string]*capstanv1.AddonRepository{"team-b": other}, names: []string{"team-b"},
		lastRead: func(*capstanv1.AddonRepository) (*gitops.Snapshot, *gitops.Snapshot) {
			reads++
			if reads == 1 {
				return &gitops.Snapshot{Claimed: map[string]bool{"x": true}}, nil
			}
			return nil, nil
		}}
	snap := &gitops.Snapshot{Claimed: map[string]bool{}}
	ctx := context.Background()
	owned := []capstanv1.Addon{{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns"}}}
	kept, err := notHandedOver(ctx, owned, snap, sibs)
	if err != nil || len(kept) != 0 {
		t.Fatalf("notHandedOver kept %v (%v), want x handed over", kept, err)
	}
	c, err := sibs.claimant(ctx, snap, "x")
	if err != nil || c.to != "team-b" {
		t.Fatalf("the prune's claimant of x: %+v (%v), want team-b as the refusal was told", c, err)
	}
}

// TestClaimantCannotTellOfAFolderNotRead: a sibling of the same branch
// whose folder the snapshot was not read with (it is new) cannot be told
// of: the Addon is neither handed over nor deleted, and the snapshot is
// to be read again.
func TestClaimantCannotTellOfAFolderNotRead(t *testing.T) {
	const u = "https://git.example.com/org/gitops.git"
	repo := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Namespace: "ns"},
		Spec: capstanv1.AddonRepositorySpec{URL: u, Folder: "team-a"}}
	other := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Name: "team-b", Namespace: "ns"},
		Spec: capstanv1.AddonRepositorySpec{URL: u, Folder: "team-b"}}
	sibs := &siblings{repo: repo, branch: "main", loaded: true,
		byName: map[string]*capstanv1.AddonRepository{"team-b": other}, names: []string{"team-b"}}
	snap := &gitops.Snapshot{Claimed: map[string]bool{}}
	ctx := context.Background()
	c, err := sibs.claimant(ctx, snap, "x")
	if err != nil || c.to != "" || !c.unknown || !sibs.stale || !strings.Contains(c.until, `the next sync reads the folder of AddonRepository "team-b"`) {
		t.Fatalf("claimant of x: %+v (%v), stale %v; want unknown until the next sync, and stale", c, err, sibs.stale)
	}
	kept, err := notHandedOver(ctx, []capstanv1.Addon{{ObjectMeta: metav1.ObjectMeta{Name: "x"}}}, snap, sibs)
	if err != nil || len(kept) != 0 {
		t.Fatalf("notHandedOver kept %v (%v): an Addon the sync will not delete counts for no refusal", kept, err)
	}
}

// TestClaimantCannotTellOfABranchNotRead: team-a reads main; team-b, of
// the same git repository, names no branch and has not read the remote's
// default yet, so it may read main too, and its folder may hold x now (a
// commit moved it there). x is neither handed over nor deleted, and the
// refusal of an empty commit does not count it. A sibling that read
// another branch is told of by what this syncer read of it, as before.
func TestClaimantCannotTellOfABranchNotRead(t *testing.T) {
	const u = "https://git.example.com/org/gitops.git"
	repo := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Namespace: "ns"},
		Spec: capstanv1.AddonRepositorySpec{URL: u, Branch: "main", Folder: "team-a"}}
	ctx := context.Background()
	snap := &gitops.Snapshot{Claimed: map[string]bool{}}
	cases := []struct {
		name          string
		url, branch   string
		statusBranch  string
		unknown, kept bool
	}{
		{"the default not read yet", "https://git.example.com/org/gitops", "", "", true, false},
		{"the default read as another branch", u, "", "prod", false, true},
		{"another branch named", u, "prod", "", false, true},
		{"another git repository", "https://git.example.com/org/other.git", "", "", false, true},
	}
	for _, tc := range cases {
		other := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Name: "team-b", Namespace: "ns"},
			Spec:   capstanv1.AddonRepositorySpec{URL: tc.url, Branch: tc.branch, Folder: "team-b"},
			Status: capstanv1.AddonRepositoryStatus{Branch: tc.statusBranch}}
		sibs := &siblings{repo: repo, branch: "main", loaded: true,
			byName: map[string]*capstanv1.AddonRepository{"team-b": other}, names: []string{"team-b"},
			lastRead: func(*capstanv1.AddonRepository) (*gitops.Snapshot, *gitops.Snapshot) { return nil, nil }}
		c, err := sibs.claimant(ctx, snap, "x")
		if err != nil || c.to != "" || c.unknown != tc.unknown || (c.unknown && !strings.Contains(c.until, `AddonRepository "team-b", of the same git repository, reads a branch`)) {
			t.Errorf("%s: claimant of x: %+v (%v), want unknown %v, until team-b reads a branch", tc.name, c, err, tc.unknown)
		}
		if sibs.stale {
			t.Errorf("%s: the snapshot is to be read again, though it would hold no more of team-b", tc.name)
		}
		kept, err := notHandedOver(ctx, []capstanv1.Addon{{ObjectMeta: metav1.ObjectMeta{Name: "x"}}}, snap, sibs)
		if err != nil || (len(kept) == 1) != tc.kept {
			t.Errorf("%s: notHandedOver kept %d Addons (%v), want x kept %v", tc.name, len(kept), err, tc.kept)
		}
	}
}

// TestClaimantGoesByTheSiblingsLastSyncedCommit: team-b, of another
// branch, defined x at c1, its last synced commit; this syncer has read
// c2 of it since, whose sync runs or failed, so its status still names
// c1. x is team-b's by what was read at c1, not "defined by none" by the
// newer read. A sibling whose last synced commit this syncer holds nothing
// of cannot be told of when its newest read defines x; when that read
// does not, failed, or was never made here, it defines nothing, so a
// sibling that never syncs does not keep every removed Addon for good.
func TestClaimantGoesByTheSiblingsLastSyncedCommit(t *testing.T) {
	const u = "https://git.example.com/org/gitops.git"
	repo := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Namespace: "ns"},
		Spec: capstanv1.AddonRepositorySpec{URL: u, Branch: "main"}}
	other := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Name: "team-b", Namespace: "ns"},
		Spec:   capstanv1.AddonRepositorySpec{URL: u, Branch: "prod"},
		Status: capstanv1.AddonRepositoryStatus{LastSyncedCommit: "c1"}}
	key := types.NamespacedName{Namespace: "ns", Name: "team-b"}
	at := func(commit string) cachedSnapshot {
		return cachedSnapshot{key: snapshotKey(commit, syncFolder(other), u),
			snap: &gitops.Snapshot{Commit: commit, Claimed: map[string]bool{"x": true}}}
	}
	without := func(commit string) cachedSnapshot {
		c := at(commit)
		c.snap.Claimed = map[string]bool{"y": true}
		return c
	}
	cases := []struct {
		name          string
		synced, cache map[types.NamespacedName]cachedSnapshot
		want          claim
	}{
		{"c1 synced, c2 read since", map[types.NamespacedName]cachedSnapshot{key: at("c1")}, map[types.NamespacedName]cachedSnapshot{key: at("c2")}, claim{to: "team-b"}},
		{"c1 read, its status written before it was recorded", nil, map[types.NamespacedName]cachedSnapshot{key: at("c1")}, claim{to: "team-b"}},
		{"c2 read, c1 not held", nil, map[types.NamespacedName]cachedSnapshot{key: at("c2")}, claim{unknown: true}},
		{"c2 read without x, c1 not held", nil, map[types.NamespacedName]cachedSnapshot{key: without("c2")}, claim{}},
		{"c2 failed to read, c1 not held", nil, map[types.NamespacedName]cachedSnapshot{key: {key: "c2", err: errors.New("refused")}}, claim{}},
		{"never read here", nil, nil, claim{}},
	}
	for _, tc := range cases {
		r := &AddonRepositoryReconciler{synced: tc.synced, cache: tc.cache}
		sibs := &siblings{repo: repo, branch: "main", loaded: true,
			byName: map[string]*capstanv1.AddonRepository{"team-b": other}, names: []string{"team-b"}, lastRead: r.lastRead}
		c, err := sibs.claimant(context.Background(), &gitops.Snapshot{Claimed: map[string]bool{}}, "x")
		if err != nil || c.to != tc.want.to || c.unknown != tc.want.unknown {
			t.Errorf("%s: claimant of x: %+v (%v), want %+v", tc.name, c, err, tc.want)
		}
		if c.unknown && !strings.Contains(c.until, `AddonRepository "team-b" syncs the newest commit read of it, which defines them`) {
			t.Errorf("%s: claimant of x waits until %q; want it to name team-b and its sync", tc.name, c.until)
		}
	}
}

// TestClaimantIgnoresANameAnInvalidFileDeclares: team-b, of another
// branch, holds an invalid foo.yaml that says name: grafana (copied from
// team-a's file). team-b defines foo, by its file's name, and not grafana:
// team-a's Addon grafana, whose file team-a deleted, is not handed to
// team-b, nor kept from a person who wants it back in team-a.
func TestClaimantIgnoresANameAnInvalidFileDeclares(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "addons"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "addons", "foo.yaml"), []byte("name: grafana\nhelm: {repo: https://charts.example.com, chart: grafana}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	theirs, err := gitops.ReadDir(root, "addons")
	if err != nil {
		t.Fatal(err)
	}
	const u = "https://git.example.com/org/gitops.git"
	repo := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Namespace: "ns"},
		Spec: capstanv1.AddonRepositorySpec{URL: u, Branch: "main"}}
	other := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Name: "team-b", Namespace: "ns"},
		Spec:   capstanv1.AddonRepositorySpec{URL: "https://git.example.com/org/team-b.git", Branch: "prod"},
		Status: capstanv1.AddonRepositoryStatus{LastSyncedCommit: "c"}}
	sibs := &siblings{repo: repo, branch: "main", loaded: true,
		byName: map[string]*capstanv1.AddonRepository{"team-b": other}, names: []string{"team-b"},
		lastRead: func(*capstanv1.AddonRepository) (*gitops.Snapshot, *gitops.Snapshot) { return theirs, theirs }}
	ctx := context.Background()
	snap := &gitops.Snapshot{Claimed: map[string]bool{}}
	if c, err := sibs.claimant(ctx, snap, "grafana"); err != nil || c.to != "" || c.unknown {
		t.Fatalf("claimant of grafana: %+v (%v); want none, as team-b's foo.yaml defines foo alone", c, err)
	}
	if c, err := sibs.claimant(ctx, snap, "foo"); err != nil || c.to != "team-b" {
		t.Fatalf("claimant of foo: %+v (%v); want team-b, whose file foo.yaml is", c, err)
	}
}
