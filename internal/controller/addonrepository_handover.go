package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/gitops"
)

// siblings are the other AddonRepositories of a repository's namespace,
// and what they define. For those that read the same branch of the same
// git repository, the commit a sync read holds their folders too, so it
// tells which add-ons they define at that commit. A commit that moves a
// definition file from one repository's folder to another's thus moves
// its Addon, whichever of the two syncs first, and neither deletes it
// (handOver, takeOver): a deletion would lose its status and approvals,
// and under the deletion policy Delete uninstall the software until the
// other sync made it anew. For the others, whose files that commit does
// not show, what this syncer read of them at their last synced commit
// stands in, when it holds that (lastRead); one of the same git repository
// that names no branch and has not read one yet cannot be told of.
//
// They are listed from the API server, past a shard's cache, which may
// not hold them, once per sync and only when an Addon's owner is in
// question.
type siblings struct {
	reader client.Reader
	repo   *capstanv1.AddonRepository
	// branch is the branch repo's sync read.
	branch string
	// lastRead is what the syncer holds of a repository's definitions at
	// its last synced commit, or nil, and at the newest commit it read of
	// it since its start, or nil (lastRead).
	lastRead func(*capstanv1.AddonRepository) (last, newest *gitops.Snapshot)

	loaded bool
	byName map[string]*capstanv1.AddonRepository
	names  []string
	// claims holds claimant's answers, by add-on name.
	claims map[string]claim
	// stale is set when snap could not tell of a sibling's folder, which
	// it was not read with: the sync drops it, so that the next one reads
	// the commit again with that folder.
	stale bool
}

// claim is what claimant tells of an add-on: the sibling that defines it
// (to), or that it cannot tell (unknown), or neither.
type claim struct {
	to string
	// unknown is set when no sibling defines it and one cannot be told
	// of: until says, of the first such, what the Addon waits for.
	unknown bool
	until   string
}

// defines reports whether the sibling o defines the add-on name: its
// folder holds the file at snap's commit, for one of the same branch, or
// at its own last synced commit as this syncer read it, for another.
// until is set, to what this syncer waits for to tell, when snap was read
// without o's folder (o is new, or its folder changed since), when o may
// read the same branch but has not told which yet (branchUnknown), and
// when this syncer holds nothing of o's last synced commit but its newest
// read of o defines name (a newer read whose sync runs or failed).
func (s *siblings) defines(o *capstanv1.AddonRepository, snap *gitops.Snapshot, name string) (defines bool, until string) {
	if sameBranch(s.repo, s.branch, o) {
		defines, known := snap.ClaimsAt(gitops.CleanFolder(o.Spec.Folder), name)
		if !known {
			s.stale = true
			return false, fmt.Sprintf("the next sync reads the folder of AddonRepository %q too, which reads the same branch", o.Name)
		}
		return defines, ""
	}
	if branchUnknown(s.repo, o) {
		// NOTE: not stale: snap read again would not hold o's folder
		// either, as long as o's branch is not known. Once o's sync
		// records the remote's default, o is of the same branch (snap
		// then lacks its folder, and is read again) or of another.
		return false, fmt.Sprintf("AddonRepository %q, of the same git repository, reads a branch (it names no spec.branch and has read none yet: fix what its Ready condition says, or set its spec.branch)", o.Name)
	}
	if s.lastRead == nil {
		return false, ""
	}
	last, newest := s.lastRead(o)
	if last == nil {
		// NOTE: a repository whose newest read this syncer cannot match
		// with its status (its sync of a newer commit runs, or failed)
		// and that defines the add-on there is unknown, so nothing is
		// deleted until its sync settles. One whose newest read does not
		// define it, or that was not read, defines it not: a sibling
		// that never syncs must not keep every other repository's
		// removed Addons for good.
		if newest != nil && newest.Claimed[name] {
			return false, fmt.Sprintf("AddonRepository %q syncs the newest commit read of it, which defines them (see its Ready condition)", o.Name)
		}
		return false, ""
	}
	return last.Claimed[name], ""
}

// folders are the folders of the siblings that read the branch the sync
// read: those whose definitions the commit it read holds too, which
// gitops.ReadSnapshot indexes for defines.
func (s *siblings) folders(ctx context.Context) ([]string, error) {
	if err := s.load(ctx); err != nil {
		return nil, err
	}
	var folders []string
	for _, n := range s.names {
		if o := s.byName[n]; sameBranch(s.repo, s.branch, o) {
			folders = append(folders, gitops.CleanFolder(o.Spec.Folder))
		}
	}
	return folders, nil
}

func (s *siblings) load(ctx context.Context) error {
	if s.loaded {
		return nil
	}
	var list capstanv1.AddonRepositoryList
	if err := s.reader.List(ctx, &list, client.InNamespace(s.repo.Namespace)); err != nil {
		return fmt.Errorf("cannot list the AddonRepositories of namespace %s, to tell whether another one defines an Addon: %w", s.repo.Namespace, err)
	}
	s.byName = map[string]*capstanv1.AddonRepository{}
	for i := range list.Items {
		o := &list.Items[i]
		if o.Name == s.repo.Name || o.DeletionTimestamp != nil {
			continue
		}
		s.byName[o.Name] = o
		s.names = append(s.names, o.Name)
	}
	sort.Strings(s.names)
	s.loaded = true
	return nil
}

// claimant tells which sibling defines the add-on name (defines), if
// any. When several do, the first by name gets it, and the others report
// the clash as for any Addon of another repository. When none does and
// one cannot be told of, it is unknown, and the Addon stays as it is.
// NOTE: the answer is kept for the sync: lastRead can change while it
// runs (another worker syncs a sibling of another branch), and the
// refusal of an empty commit must count what the prune then does.
func (s *siblings) claimant(ctx context.Context, snap *gitops.Snapshot, name string) (claim, error) {
	if c, ok := s.claims[name]; ok {
		return c, nil
	}
	if err := s.load(ctx); err != nil {
		return claim{}, err
	}
	var c claim
	for _, n := range s.names {
		defines, until := s.defines(s.byName[n], snap, name)
		if defines {
			c = claim{to: n}
			break
		}
		if until != "" && !c.unknown {
			c.unknown, c.until = true, until
		}
	}
	if s.claims == nil {
		s.claims = map[string]claim{}
	}
	s.claims[name] = c
	return c, nil
}

// get returns the sibling named name, or nil when there is no such
// AddonRepository.
func (s *siblings) get(ctx context.Context, name string) (*capstanv1.AddonRepository, error) {
	if err := s.load(ctx); err != nil {
		return nil, err
	}
	return s.byName[name], nil
}

// sameBranch reports whether other reads branch, the branch that repo's
// sync read, of repo's git repository: its spec.branch, or, when it names
// none, the remote's default, which repo read too when it names none
// either, and which other's status recorded at its last read otherwise.
// URLs are compared as gitops.RepositoryKey gives them.
func sameBranch(repo *capstanv1.AddonRepository, branch string, other *capstanv1.AddonRepository) bool {
	if gitops.RepositoryKey(repo.Spec.URL) != gitops.RepositoryKey(other.Spec.URL) {
		return false
	}
	b := other.Spec.Branch
	if b == "" {
		if repo.Spec.Branch == "" {
			return true
		}
		b = other.Status.Branch
	}
	return b != "" && b == branch
}

// branchUnknown reports whether other, of repo's git repository, names no
// branch and has not read the remote's default yet (it is new, or its
// reads failed), while repo names one: other may read the very branch
// repo read, so what it defines cannot be told.
func branchUnknown(repo, other *capstanv1.AddonRepository) bool {
	return repo.Spec.Branch != "" && other.Spec.Branch == "" && other.Status.Branch == "" &&
		gitops.RepositoryKey(repo.Spec.URL) == gitops.RepositoryKey(other.Spec.URL)
}

// handOver gives the Addon a, which repo's folder no longer defines, to
// the sibling to whose folder defines it now, instead of deleting it, and
// asks that sibling to sync: it applies its file to the Addon as it is,
// status, approvals and software kept.
func (r *AddonRepositoryReconciler) handOver(ctx context.Context, repo *capstanv1.AddonRepository, sibs *siblings, a *capstanv1.Addon, to string) error {
	o, err := sibs.get(ctx, to)
	if err != nil {
		return err
	}
	folder := ""
	if o != nil {
		folder = syncFolder(o)
	}
	if err := r.relabel(ctx, a, repo.Name, to, folder); err != nil {
		if fresh, rerr := r.relabelRaced(ctx, a, repo.Name); rerr != nil || fresh != nil {
			// NOTE: the Addon is gone, made anew, or no longer this
			// repository's (the sibling, syncing at once, took it
			// over): nothing is left to hand over.
			return rerr
		}
		return fmt.Errorf("cannot hand Addon %s/%s over to AddonRepository %q, whose folder now defines it: %w", a.Namespace, a.Name, to, err)
	}
	log.FromContext(ctx).Info("Handed an Addon over to the repository whose folder now defines it", "addon", a.Name, "to", to)
	// NOTE: a sibling of another shard is not this syncer's to trigger:
	// it takes the Addon up at its own interval or push webhook.
	if err := r.Trigger(ctx, types.NamespacedName{Namespace: repo.Namespace, Name: to}); err != nil {
		log.FromContext(ctx).Info("The repository an Addon was handed over to syncs at its own time", "addon", a.Name, "to", to, "reason", err.Error())
	}
	return nil
}

// takeOver takes the Addon have, labelled with the repository owner, for
// repo, whose folder defines it at snap's commit, when owner is a sibling
// that no longer does: of the same branch, its folder at snap's commit
// does not hold the file (it moved from owner's folder to repo's); of
// another, its last synced commit as this syncer read it did not. owner,
// when it syncs, finds the Addon repo's instead of deleting it. It takes
// it too when owner is no AddonRepository at all (takeOverOrphan). It
// reports whether it took it; an owner that still defines it, that this
// syncer cannot tell of (another branch or repository not read here), or
// that is suspended keeps it.
func (r *AddonRepositoryReconciler) takeOver(ctx context.Context, repo *capstanv1.AddonRepository, snap *gitops.Snapshot, sibs *siblings, have *capstanv1.Addon, owner string) (bool, error) {
	o, err := sibs.get(ctx, owner)
	switch {
	case err != nil:
		return false, err
	case o == nil:
		return r.takeOverOrphan(ctx, repo, have, owner)
	case o.Spec.Suspend:
		return false, nil
	}
	if defines, until := sibs.defines(o, snap, have.Name); defines || until != "" {
		return false, nil
	}
	if !sameBranch(repo, sibs.branch, o) {
		if sibs.lastRead == nil {
			return false, nil
		}
		if last, _ := sibs.lastRead(o); last == nil {
			return false, nil
		}
	}
	return r.takeFrom(ctx, repo, have, owner, "whose folder no longer defines it")
}

// takeOverOrphan takes the Addon have for repo, whose folder defines it,
// when owner, the repository its label names, does not exist: it was
// deleted (which leaves its Addons as they are) or renamed, and no sync
// will take the Addon up again under that name. Deleting a repository and
// making another of the same URL and folder thus keeps its Addons, with
// their status, approvals and software. A repository that exists but is
// being deleted keeps them: it still syncs until it is gone.
func (r *AddonRepositoryReconciler) takeOverOrphan(ctx context.Context, repo *capstanv1.AddonRepository, have *capstanv1.Addon, owner string) (bool, error) {
	// NOTE: the siblings were listed once, early in the sync: a repository
	// made since then may have synced and labelled the Addon in between.
	// It is looked for again, on the API server, before its Addon is taken.
	err := r.reader().Get(ctx, client.ObjectKey{Namespace: repo.Namespace, Name: owner}, &capstanv1.AddonRepository{})
	switch {
	case err == nil:
		return false, nil
	case !apierrors.IsNotFound(err):
		return false, fmt.Errorf("cannot read AddonRepository %s/%s, which Addon %s labels its own, to tell whether it still exists: %w", repo.Namespace, owner, have.Name, err)
	}
	return r.takeFrom(ctx, repo, have, owner, "which no longer exists")
}

// takeFrom relabels have from the repository owner, which why says is
// done with it, to repo, and reports whether repo has it. A refused
// relabel is no error when another wrote the Addon in between: owner,
// syncing at once, handed it over (repo has it, and have is updated), or
// it is gone, made anew or a third repository's (repo has it not).
func (r *AddonRepositoryReconciler) takeFrom(ctx context.Context, repo *capstanv1.AddonRepository, have *capstanv1.Addon, owner, why string) (bool, error) {
	if err := r.relabel(ctx, have, owner, repo.Name, syncFolder(repo)); err != nil {
		fresh, rerr := r.relabelRaced(ctx, have, owner)
		switch {
		case rerr != nil:
			return false, rerr
		case fresh == nil:
			return false, fmt.Errorf("cannot take Addon %s/%s over from AddonRepository %q, %s: %w", have.Namespace, have.Name, owner, why, err)
		case fresh.UID != have.UID:
			return false, nil
		}
		*have = *fresh
		return fresh.Labels[gitops.ManagedByGitLabel] == repo.Name, nil
	}
	log.FromContext(ctx).Info("Took an Addon over from the repository "+why, "addon", have.Name, "from", owner)
	return true, nil
}

// lastRead is the snapshot this syncer read of repo at its last synced
// commit, from its folder and URL as they are now, or nil: a repository
// of another shard, or one not read since a restart or a change. newest is
// the newest snapshot it read of repo's folder and URL as they are now, or
// nil.
//
// NOTE: the snapshot of the commit it synced (synced), not the newest it
// read (cache): a sync stores its clone's snapshot at once, and its
// status names that commit only once all of it applied. The newest one
// stands in too when it is the commit the status names: the status is
// written before synced records it.
func (r *AddonRepositoryReconciler) lastRead(repo *capstanv1.AddonRepository) (last, newest *gitops.Snapshot) {
	key := client.ObjectKeyFromObject(repo)
	r.mu.Lock()
	synced, cached := r.synced[key], r.cache[key]
	r.mu.Unlock()
	if cached.snap != nil && cached.key == snapshotKey(cached.snap.Commit, syncFolder(repo), repo.Spec.URL) {
		newest = cached.snap
	}
	if repo.Status.LastSyncedCommit == "" {
		return nil, newest
	}
	want := snapshotKey(repo.Status.LastSyncedCommit, syncFolder(repo), repo.Spec.URL)
	for _, c := range []cachedSnapshot{synced, cached} {
		if c.snap != nil && c.key == want {
			return c.snap, newest
		}
	}
	return nil, newest
}

// recordSynced remembers snap as the snapshot of repo's last synced
// commit, once its status, which names that commit, is written; nil (a
// sync that did not complete) changes nothing.
func (r *AddonRepositoryReconciler) recordSynced(repo *capstanv1.AddonRepository, snap *gitops.Snapshot) {
	if snap == nil || repo.Status.LastSyncedCommit != snap.Commit {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.synced == nil {
		r.synced = map[types.NamespacedName]cachedSnapshot{}
	}
	r.synced[client.ObjectKeyFromObject(repo)] = cachedSnapshot{key: snapshotKey(snap.Commit, syncFolder(repo), repo.Spec.URL), snap: snap}
}

// relabelRaced reads the Addon a again, past the cache, after its relabel
// from the repository from failed, to tell a race from an error. It
// returns the Addon as it is now when another wrote it in between: it is
// gone (an empty Addon), another object, or no longer from's, as when
// both repositories of a move sync at once and the other relabelled it
// first. It returns nil when a is still as it was, and the failure is to
// be retried.
func (r *AddonRepositoryReconciler) relabelRaced(ctx context.Context, a *capstanv1.Addon, from string) (*capstanv1.Addon, error) {
	fresh := &capstanv1.Addon{}
	switch err := r.reader().Get(ctx, client.ObjectKeyFromObject(a), fresh); {
	case apierrors.IsNotFound(err):
		return &capstanv1.Addon{}, nil
	case err != nil:
		return nil, fmt.Errorf("cannot read Addon %s/%s again after its relabel failed: %w", a.Namespace, a.Name, err)
	case fresh.UID != a.UID || fresh.DeletionTimestamp != nil || fresh.Labels[gitops.ManagedByGitLabel] != from:
		return fresh, nil
	}
	return nil, nil
}

// relabel changes the managed-by-git label of a from one repository to
// another, points its git-file at its own file in folder, the receiving
// repository's, and drops its uninstall mark. The patch tests the Addon's
// UID and the label first: an Addon deleted and made anew, or taken by
// another repository in between, is left alone, and the next sync looks
// again. a is updated to what the API server answers.
func (r *AddonRepositoryReconciler) relabel(ctx context.Context, a *capstanv1.Addon, from, to, folder string) error {
	escape := strings.NewReplacer("~", "~0", "/", "~1").Replace
	label := "/metadata/labels/" + escape(gitops.ManagedByGitLabel)
	ops := []map[string]string{
		{"op": "test", "path": "/metadata/uid", "value": string(a.UID)},
		{"op": "test", "path": label, "value": from},
		{"op": "replace", "path": label, "value": to},
	}
	// NOTE: the receiving repository's apply writes the file it read, but
	// only when the file applies: one that is invalid, and later removed,
	// would leave an Addon with the new label and the old folder's file,
	// which the new repository takes for a person's copy and keeps for
	// ever. name.yaml is written whether the folder holds it or name.yml:
	// MadeFrom takes both, and the next apply writes the file it read.
	if v, ok := a.Annotations[gitops.GitFileAnnotation]; ok && folder != "" {
		file := "/metadata/annotations/" + escape(gitops.GitFileAnnotation)
		ops = append(ops, map[string]string{"op": "test", "path": file, "value": v},
			map[string]string{"op": "replace", "path": file, "value": gitops.OwnFile(folder, a.Name)})
	}
	// NOTE: the uninstall mark was set for the removal of from's file
	// (capstan addon remove --uninstall); the Addon moves instead, and a
	// mark kept would uninstall the software when to's file is removed
	// some day without one.
	if v, ok := a.Annotations[capstanv1.UninstallAnnotation]; ok {
		mark := "/metadata/annotations/" + escape(capstanv1.UninstallAnnotation)
		ops = append(ops, map[string]string{"op": "test", "path": mark, "value": v}, map[string]string{"op": "remove", "path": mark})
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	return r.Client.Patch(ctx, a, client.RawPatch(types.JSONPatchType, patch))
}
