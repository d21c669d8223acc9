package gitops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"reflect"
	"strings"
	"time"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/memfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"go.yaml.in/yaml/v3"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/source"
)

// DefaultAttempts bounds how often a writer retries a push that lost a race.
const DefaultAttempts = 5

// pushCheckTimeout bounds the read of the branch after a failed push,
// which tells whether it landed.
const pushCheckTimeout = 30 * time.Second

// MaxConcurrentCommits bounds the commits one Capstan process makes at
// once, the server's (the page and the API) and the CLI's together. Each
// clones its branch into memory, up to CloneLimits, with a checkout beside
// it: the bound keeps commits from taking all of the git budget
// (source.GitBudget) the syncer and the Addons' fetches share with them.
const MaxConcurrentCommits = 2

// ErrBusy is returned when MaxConcurrentCommits commits are being made and
// none ended within commitWait. Nothing was committed.
var ErrBusy = fmt.Errorf("%d commits to gitops repositories are being made, the most Capstan makes at once; nothing was committed: try again in a few seconds", MaxConcurrentCommits)

// commitSlots holds a token for each commit being made.
var commitSlots = make(chan struct{}, MaxConcurrentCommits)

// commitWait is how long a commit waits for its turn before ErrBusy: a
// person who clicked waits a little, never behind an unbounded queue.
var commitWait = 10 * time.Second

// commitTurn waits for a commit's turn; release ends it.
func commitTurn(ctx context.Context) (release func(), err error) {
	wait := time.NewTimer(commitWait)
	defer wait.Stop()
	select {
	case commitSlots <- struct{}{}:
		return func() { <-commitSlots }, nil
	case <-wait.C:
		return nil, ErrBusy
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ErrLastDefinition is returned by Remove, with KeepLast, when the
// definition is the last in its folder. Nothing is committed.
var ErrLastDefinition = errors.New("it is the last add-on definition in the repository's folder, and the syncer refuses a commit that would delete every Addon: set spec.allowEmpty on the AddonRepository first, or remove the AddonRepository; nothing was committed")

// ErrKeptByAnotherFile is returned by Remove when another file of the
// folder is an invalid definition whose content names the add-on (a
// file renamed from it that still says name: <add-on>): the syncer keeps
// that Addon while the file is there, so the removal would not delete
// it. Nothing is committed.
var ErrKeptByAnotherFile = errors.New("names the add-on too, and the syncer keeps its Addon as it is while that invalid file is there: fix or remove that file first; nothing was committed")

// RefusesEmpty reports whether the syncer of an AddonRepository with spec
// refuses a commit whose folder holds no definition: it prunes (the
// default) and does not set allowEmpty. A writer to such a repository sets
// KeepLast.
func RefusesEmpty(spec capstanv1.AddonRepositorySpec) bool {
	return (spec.Prune == nil || *spec.Prune) && !spec.AllowEmpty
}

// ErrNoChange is returned when a change leaves the file as it is, such as
// suspending a suspended add-on. Nothing is committed.
var ErrNoChange = errors.New("the definition already says so: nothing to commit")

// ErrExists says that Install found the definition file in the branch
// already; ErrNotExist that a change of one (an edit, a removal, a suspend
// or resume) did not find it. Either is a conflict
// with what git holds, for the person to resolve.
var (
	ErrExists   = errors.New("exists already")
	ErrNotExist = errors.New("does not exist")
)

// ConflictError is returned when the definition file changed in the
// repository after the writer read it. Nothing was overwritten.
type ConflictError struct {
	// File is the definition's path.
	File string
	// Base is the commit the writer read the file at.
	Base string
	// Head is the commit where the file differs.
	Head string
	// BaseBlob is the blob hash an Edit was told its content started
	// from, when the branch's file is another: Base and Head are then
	// empty.
	BaseBlob string
}

// Error says what happened and what to do.
func (e *ConflictError) Error() string {
	if e.BaseBlob != "" {
		return fmt.Sprintf("conflict: %s is no longer the version %s the edit started from: someone committed a change since; nothing was overwritten: read the new version and make the change again", e.File, e.BaseBlob)
	}
	return fmt.Sprintf("conflict: %s changed in commit %s after it was read at %s; nothing was overwritten: read the new version and make the change again", e.File, ShortCommit(e.Head), ShortCommit(e.Base))
}

// Writer commits add-on changes to a gitops repository: one commit per
// change, to one definition file, pushed to the branch.
type Writer struct {
	// URL is the gitops repository.
	URL string
	// Branch is the branch to commit to; the remote's default when empty.
	Branch string
	// Folder holds the definitions; DefaultFolder when empty.
	Folder string
	// Auth authenticates to the repository; nil for none.
	Auth transport.AuthMethod
	// AuthorName and AuthorEmail sign the commits.
	AuthorName, AuthorEmail string
	// Attempts bounds the pushes of one change; DefaultAttempts when zero.
	Attempts int
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// KeepLast has Remove refuse to take the folder's last definition
	// (ErrLastDefinition): the syncer refuses a commit that would delete
	// every Addon unless the AddonRepository sets spec.allowEmpty, and
	// the removal would be committed and then wait for that, unseen.
	// RefusesEmpty says when a repository's syncer does; a writer that
	// cannot read the AddonRepository keeps the last one unless told
	// otherwise.
	KeepLast bool

	// Budget is the git budget the writer's clones take their memory
	// from; nil means the process's (source.ProcessGitBudget).
	Budget *source.GitBudget

	// OnPush, when set, runs just before each push is sent: from then on
	// the change may land in the branch though its answer is lost, which
	// a caller that is interrupted has to tell its user at once. A change
	// that fails before OnPush ran left nothing in the branch: a caller
	// interrupted there need not read the branch to tell.
	OnPush func()

	// CheckValues, when set, is asked before a definition file is
	// committed whose values are not those of the file it replaces: next
	// is the definition to commit, cur the one the branch holds (nil for
	// a new file, or one that cannot be read). An error refuses the
	// change, and nothing is committed or pushed. Capstan's writers use it
	// to refuse secret inputs (values the chart's schema marks
	// writeOnly), which a commit would keep in git's history for good.
	CheckValues func(ctx context.Context, next, cur *Definition) error

	// beforePush runs before each push; tests use it to lose a race.
	beforePush func()
}

// Install commits a new definition file. It is a conflict when the file exists.
func (w *Writer) Install(ctx context.Context, content []byte) (string, error) {
	name, err := definitionName(content)
	if errors.Is(err, errNotMapping) {
		// NOTE: content that is not one YAML mapping has no name to read,
		// and the name is not what is wrong with it: Parse says what is,
		// with its line, as capstan validate does.
		if _, perr := Parse("the definition", content); perr != nil {
			return "", perr
		}
	}
	if err != nil {
		return "", err
	}
	file := w.file(name)
	if _, err := Parse(file, content); err != nil {
		return "", err
	}
	return w.change(ctx, name, "Install", func(file string, cur []byte, exists bool) ([]byte, bool, error) {
		if exists {
			return nil, false, fmt.Errorf("%s %w: use edit to change the add-on", file, ErrExists)
		}
		return content, true, nil
	})
}

// Edit replaces an existing definition file with new content. base, when
// not empty, is the git blob hash of the file the content was made from
// (`git rev-parse HEAD:addons/NAME.yaml`, 7 to 40 hex digits): when the
// branch's file is another version, the edit is a ConflictError and
// nothing is committed, so that a whole new file does not silently undo a
// colleague's commit made since it was read.
func (w *Writer) Edit(ctx context.Context, name string, content []byte, base string) (string, error) {
	if _, err := Parse(w.file(name), content); err != nil {
		return "", err
	}
	base = strings.ToLower(base)
	if base != "" && !blobHash.MatchString(base) {
		return "", fmt.Errorf("the base %q is not a git blob hash: give the hash of the file the edit started from (git rev-parse HEAD:%s), 7 to 40 hex digits", base, w.file(name))
	}
	return w.change(ctx, name, "Edit", func(file string, cur []byte, exists bool) ([]byte, bool, error) {
		if !exists {
			return nil, false, fmt.Errorf("%s %w: use install to add the add-on", file, ErrNotExist)
		}
		if base != "" && !strings.HasPrefix(blobOf(cur), base) {
			return nil, false, &ConflictError{File: file, BaseBlob: base}
		}
		return content, true, nil
	})
}

// blobOf is the git blob hash of a file's content: the base Edit compares.
func blobOf(content []byte) string {
	return plumbing.ComputeHash(plumbing.BlobObject, content).String()
}

// DefinitionFile is an add-on's definition file as the head of a branch
// holds it.
type DefinitionFile struct {
	// File is its path, name.yaml or name.yml in the folder.
	File string
	// Content is the file as it is in git.
	Content []byte
	// Blob is its git blob hash: the base to give Edit for a new
	// definition made from Content.
	Blob string
	// Branch and Commit are where it was read.
	Branch, Commit string
}

// Read returns the definition of add-on name at the head of the writer's
// branch, with the blob hash that an Edit of it takes as its base.
func (w *Writer) Read(ctx context.Context, name string) (*DefinitionFile, error) {
	if !dnsLabel.MatchString(name) || len(name) > maxAddonName {
		return nil, fmt.Errorf("%q is not a valid add-on name", name)
	}
	branch, err := w.branch(ctx)
	if err != nil {
		return nil, err
	}
	repo, release, err := w.checkout(ctx, branch)
	if err != nil {
		return nil, err
	}
	defer release()
	head, err := repo.Head()
	if err != nil {
		return nil, err
	}
	wt, err := repo.Worktree()
	if err != nil {
		return nil, err
	}
	file, cur, exists, err := w.readDefinition(wt.Filesystem, name)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, fmt.Errorf("%s %w in branch %q of %s", strings.Join(DefinitionFiles(w.Folder, name), " or "), ErrNotExist, branch, netguard.Redact(w.URL))
	}
	return &DefinitionFile{File: file, Content: cur, Blob: blobOf(cur), Branch: branch, Commit: head.Hash().String()}, nil
}

// Suspend sets suspend: true in a definition, keeping its comments.
func (w *Writer) Suspend(ctx context.Context, name string) (string, error) {
	return w.change(ctx, name, "Suspend", setSuspend(true))
}

// Resume removes suspend: true from a definition, keeping its comments.
func (w *Writer) Resume(ctx context.Context, name string) (string, error) {
	return w.change(ctx, name, "Resume", setSuspend(false))
}

// Remove deletes a definition file. The syncer then deletes the Addon, and
// the Addon's deletion policy decides whether the software goes: mark the
// Addon for uninstall first to remove it (addons.WithRemovalMarks).
func (w *Writer) Remove(ctx context.Context, name string) (string, error) {
	return w.change(ctx, name, "Remove", func(file string, cur []byte, exists bool) ([]byte, bool, error) {
		if !exists {
			return nil, false, fmt.Errorf("%s %w", file, ErrNotExist)
		}
		return nil, false, nil
	})
}

// file is the path a new definition of name is written to.
func (w *Writer) file(name string) string {
	return DefinitionFiles(w.Folder, name)[0]
}

// DefinitionFiles are the paths that can hold the definition of add-on
// name in folder (DefaultFolder when empty), in the order Capstan prefers
// them: the syncer reads both name.yaml and name.yml, and a new definition
// is written as name.yaml.
func DefinitionFiles(folder, name string) []string {
	if folder == "" {
		folder = DefaultFolder
	}
	return []string{path.Join(folder, name+".yaml"), path.Join(folder, name+".yml")}
}

// readDefinition reads the definition of add-on name in a checkout: the
// one of DefinitionFiles that exists, or name.yaml when none does. Both
// existing is an error: the syncer reads neither, and a change to one
// would not take effect.
func (w *Writer) readDefinition(fs billy.Filesystem, name string) (file string, cur []byte, exists bool, err error) {
	files := DefinitionFiles(w.Folder, name)
	file = files[0]
	for _, f := range files {
		data, ok, err := readFile(fs, f)
		if err != nil {
			return "", nil, false, err
		}
		if !ok {
			continue
		}
		if exists {
			return "", nil, false, fmt.Errorf("%s and %s both define add-on %s, so the syncer applies neither: delete one of them in git first", file, f, name)
		}
		file, cur, exists = f, data, true
	}
	return file, cur, exists, nil
}

func setSuspend(suspend bool) editFunc {
	if !suspend {
		return setKey("suspend", nil)
	}
	return setKey("suspend", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"})
}

// setKey sets a top-level key of a definition to value, or removes it when
// value is nil, keeping the rest of the file and its comments.
func setKey(key string, value *yaml.Node) editFunc {
	return func(file string, cur []byte, exists bool) ([]byte, bool, error) {
		doc, err := definitionDoc(file, cur, exists)
		if err != nil {
			return nil, false, err
		}
		m := doc.Content[0]
		switch old := mappingValue(m, key); {
		case value == nil && old == nil:
			return cur, true, nil
		case value == nil:
			removeKey(m, key)
		case old != nil && sameValue(old, value):
			// NOTE: the file says so already, in its own layout (True,
			// 4-space indents, blank lines) that the encoder would
			// rewrite: a commit of that alone would claim a change.
			return cur, true, nil
		case old != nil:
			*old = *value
		default:
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, value)
		}
		out, err := encodeYAML(doc)
		if err != nil {
			return nil, false, err
		}
		if _, err := Parse(file, out); err != nil {
			return nil, false, err
		}
		return out, true, nil
	}
}

// sameValue reports whether two YAML nodes decode to the same value.
func sameValue(a, b *yaml.Node) bool {
	var x, y any
	return a.Decode(&x) == nil && b.Decode(&y) == nil && reflect.DeepEqual(x, y)
}

// editFunc computes a file's new content from its current one; keep false
// deletes the file. file is the definition's path: the existing one, or
// where a new one goes.
type editFunc func(file string, cur []byte, exists bool) (next []byte, keep bool, err error)

// change commits one edit of one file and pushes it. A push that loses a
// race is retried on the new head, unless the file itself changed there.
// OnPush tells a caller when a push is first sent.
func (w *Writer) change(ctx context.Context, name, verb string, edit editFunc) (string, error) {
	if !dnsLabel.MatchString(name) || len(name) > maxAddonName {
		return "", fmt.Errorf("%q is not a valid add-on name", name)
	}
	release, err := commitTurn(ctx)
	if err != nil {
		return "", err
	}
	defer release()
	file := w.file(name)
	remote := Repo{URL: w.URL, Auth: w.Auth}
	branch, err := w.branch(ctx)
	if err != nil {
		return "", err
	}
	attempts := w.Attempts
	if attempts <= 0 {
		attempts = DefaultAttempts
	}
	// NOTE: a retry commits the same content onto the same file (else it
	// is a ConflictError), so its values are checked once.
	var base []byte
	var baseExists, checkedValues bool
	var baseFile, baseCommit string
	for attempt := 1; attempt <= attempts; attempt++ {
		// NOTE: one attempt's clone goes back to the git budget before the
		// next one is made, and on every way out.
		done, commit, err := func() (bool, string, error) {
			repo, releaseRepo, err := w.checkout(ctx, branch)
			if err != nil {
				return true, "", err
			}
			defer releaseRepo()
			head, err := repo.Head()
			if err != nil {
				return true, "", err
			}
			wt, err := repo.Worktree()
			if err != nil {
				return true, "", err
			}
			var cur []byte
			var exists bool
			file, cur, exists, err = w.readDefinition(wt.Filesystem, name)
			if err != nil {
				return true, "", err
			}
			if attempt == 1 {
				base, baseExists, baseFile, baseCommit = cur, exists, file, head.Hash().String()
			} else if file != baseFile || exists != baseExists || !bytes.Equal(cur, base) {
				return true, "", &ConflictError{File: baseFile, Base: baseCommit, Head: head.Hash().String()}
			}
			next, keep, err := edit(file, cur, exists)
			if err != nil {
				return true, "", err
			}
			if keep && exists && bytes.Equal(next, cur) {
				return true, "", ErrNoChange
			}
			// NOTE: the check needs the file the branch holds, so it runs
			// here, holding the commit's turn and clone while it fetches a
			// chart within its caller's bound; a change that leaves the
			// values as they are (suspend, resume, a new version) fetches
			// nothing.
			if keep && w.CheckValues != nil && !checkedValues {
				if err := w.checkValues(ctx, file, next, cur, exists); err != nil {
					return true, "", err
				}
				checkedValues = true
			}
			if keep {
				if err := writeFile(wt.Filesystem, file, next); err != nil {
					return true, "", err
				}
				if _, err := wt.Add(file); err != nil {
					return true, "", err
				}
			} else if _, err := wt.Remove(file); err != nil {
				return true, "", err
			} else if other, err := declaredElsewhere(wt, path.Dir(file), name); err != nil {
				return true, "", err
			} else if other != "" {
				return true, "", fmt.Errorf("removing %s: %s %w", file, other, ErrKeptByAnotherFile)
			} else if last, err := w.tookLast(wt, path.Dir(file)); err != nil {
				return true, "", err
			} else if last {
				return true, "", fmt.Errorf("removing %s: %w", file, ErrLastDefinition)
			} else if err := keepFolder(wt, path.Dir(file)); err != nil {
				return true, "", err
			}
			commit, err := wt.Commit(fmt.Sprintf("%s add-on %s\n\nMade with capstan addon %s, one change to %s.\n", verb, name, lower(verb), file), &git.CommitOptions{
				Author: w.signature(),
			})
			if err != nil {
				return true, "", fmt.Errorf("cannot commit %s: %w", file, err)
			}
			if w.OnPush != nil {
				w.OnPush()
			}
			if w.beforePush != nil {
				w.beforePush()
			}
			refspec := config.RefSpec(fmt.Sprintf("%s:%s", plumbing.NewBranchReferenceName(branch), plumbing.NewBranchReferenceName(branch)))
			pushErr := repo.PushContext(ctx, &git.PushOptions{RemoteName: "origin", RefSpecs: []config.RefSpec{refspec}, Auth: w.Auth})
			if pushErr == nil {
				return true, commit.String(), nil
			}
			// NOTE: a push can fail because another writer pushed first. Only
			// then is it retried: a head that did not move means a real failure.
			// A head at our own commit means the push landed and only its
			// answer was lost (a proxy's 502 after receive-pack, a dropped
			// connection): that is the change made, and a retry would find
			// its own change in the file and call it a conflict, which
			// undoes the uninstall mark of a removal that is in git.
			// NOTE: the branch is read on a bound of its own: a push cut by
			// its caller's deadline or cancel can have landed, and a read on
			// that done context would fail at once and call it not made.
			checkCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pushCheckTimeout)
			defer cancel()
			_, now, err := remote.Head(checkCtx, branch)
			if err == nil && now == commit {
				return true, commit.String(), nil
			}
			if err != nil || now == head.Hash() {
				return true, "", fmt.Errorf("cannot push %s to branch %q of %s: %w", file, branch, netguard.Redact(w.URL), netguard.RedactError(pushErr, w.URL))
			}
			return false, "", nil
		}()
		if done {
			return commit, err
		}
	}
	return "", fmt.Errorf("cannot push %s to branch %q of %s: the branch moved %d times while committing; try again", file, branch, netguard.Redact(w.URL), attempts)
}

// checkValues asks CheckValues about the definition next, to be committed
// as file over cur, when their values differ.
func (w *Writer) checkValues(ctx context.Context, file string, next, cur []byte, exists bool) error {
	nextDef, err := Parse(file, next)
	if err != nil {
		return err
	}
	var curDef *Definition
	if exists {
		// NOTE: a file the branch holds that does not parse holds no
		// values to keep.
		curDef, _ = Parse(file, cur)
	}
	if curDef != nil && SameValue(nextDef.Values, curDef.Values) {
		return nil
	}
	if len(nextDef.Values) == 0 {
		return nil
	}
	return w.CheckValues(ctx, nextDef, curDef)
}

// branch is the branch the writer reads and commits to: Branch, or the
// remote's default.
func (w *Writer) branch(ctx context.Context) (string, error) {
	if w.Branch != "" {
		return w.Branch, nil
	}
	b, _, err := Repo{URL: w.URL, Auth: w.Auth}.Head(ctx, "")
	return b, err
}

// checkout clones the head of branch into memory, with its files checked
// out. The clone and its checkout are taken from the git budget until
// release, which the caller calls (deferred) once done with them; on
// error, nothing is held and release is nil.
func (w *Writer) checkout(ctx context.Context, branch string) (*git.Repository, func(), error) {
	st := budgetOr(w.Budget).Storage(CloneLimits)
	held := false
	defer func() {
		// NOTE: a panic in go-git that the caller recovers must not keep
		// the bytes for the life of the process (Repo.Clone).
		if !held {
			st.Release()
		}
	}()
	repo, err := git.CloneContext(ctx, st, st.Worktree(memfs.New()), &git.CloneOptions{
		URL: w.URL, Auth: w.Auth, ReferenceName: plumbing.NewBranchReferenceName(branch),
		SingleBranch: true, Depth: 1, Tags: git.NoTags,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("cannot fetch branch %q of %s: %w", branch, netguard.Redact(w.URL), netguard.RedactError(err, w.URL))
	}
	held = true
	return repo, st.Release, nil
}

// tookLast reports, with KeepLast, whether folder holds no definition
// file any more: the syncer reads only its own files, not its subfolders.
func (w *Writer) tookLast(wt *git.Worktree, folder string) (bool, error) {
	if !w.KeepLast {
		return false, nil
	}
	entries, err := wt.Filesystem.ReadDir(folder)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	for _, e := range entries {
		if !e.IsDir() && IsDefinitionFile(e.Name()) {
			return false, nil
		}
	}
	return true, nil
}

// declaredElsewhere returns a definition file of folder, once a removal
// took name's own, whose content says name: name, or "" when none does:
// the syncer reads such a file as invalid and keeps the Addon name for it
// (Snapshot.Kept), so a removal would leave the Addon, and one marked for
// uninstall would stay marked. Symbolic links and files too large to read
// declare nothing, as the syncer reads them.
func declaredElsewhere(wt *git.Worktree, folder, name string) (string, error) {
	entries, err := wt.Filesystem.ReadDir(folder)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	for _, e := range entries {
		if !e.Mode().IsRegular() || !IsDefinitionFile(e.Name()) || e.Size() > MaxFileSize {
			continue
		}
		file := path.Join(folder, e.Name())
		content, _, err := readFile(wt.Filesystem, file)
		if err != nil {
			return "", err
		}
		if named, err := definitionName(content); err == nil && named == name {
			return file, nil
		}
	}
	return "", nil
}

// keepFile is what keepFolder leaves in a definitions folder whose last
// file a removal took, and what it says.
const (
	keepFile    = ".keep"
	keepMessage = "Capstan keeps this folder of add-on definitions: a folder that is gone reads as a mistake (a typo in spec.folder, a rename), and changes nothing.\n"
)

// keepFolder leaves a file in folder when a removal took its last one: git
// keeps no empty folder, and the syncer reads a folder that is gone as a
// mistake, which would keep the removed add-on's Addon.
func keepFolder(wt *git.Worktree, folder string) error {
	entries, err := wt.Filesystem.ReadDir(folder)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if len(entries) > 0 {
		return nil
	}
	keep := path.Join(folder, keepFile)
	if err := writeFile(wt.Filesystem, keep, []byte(keepMessage)); err != nil {
		return err
	}
	_, err = wt.Add(keep)
	return err
}

func (w *Writer) signature() *object.Signature {
	name, email := w.AuthorName, w.AuthorEmail
	if name == "" {
		name = "Capstan"
	}
	if email == "" {
		email = "capstan@localhost"
	}
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	return &object.Signature{Name: name, Email: email, When: now()}
}

func lower(s string) string { return string(bytes.ToLower([]byte(s))) }

func readFile(fs billy.Filesystem, name string) ([]byte, bool, error) {
	f, err := fs.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	return data, true, err
}

func writeFile(fs billy.Filesystem, name string, data []byte) error {
	if err := fs.MkdirAll(path.Dir(name), 0o755); err != nil {
		return err
	}
	f, err := fs.Create(name)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// errNotMapping is definitionName's error for content that is not one
// YAML mapping (invalid YAML, a list, a scalar, nothing); Parse says more.
var errNotMapping = errors.New("the definition is not a YAML mapping of fields, such as name and helm")

// definitionName reads the name of a definition before it is checked in full.
func definitionName(content []byte) (string, error) {
	if len(content) > MaxFileSize {
		return "", tooLarge("the definition", int64(len(content)))
	}
	// A node tree, unlike a decoded struct, never expands aliases.
	var doc yaml.Node
	if err := yaml.Unmarshal(content, &doc); err != nil || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return "", errNotMapping
	}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "name" && m.Content[i+1].Kind == yaml.ScalarNode && m.Content[i+1].Value != "" {
			return m.Content[i+1].Value, nil
		}
	}
	return "", errors.New("the definition has no name: field; add name: <add-on name>")
}

// ShortCommit is a commit hash as people read it: its first 12 digits.
func ShortCommit(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return strings.TrimSpace(commit)
}

// definitionDoc reads a definition in git as a YAML document to edit in
// place, keeping its comments and the order of its keys; one that is
// missing or invalid is an error, so that an edit never writes over a file
// a person must fix first.
func definitionDoc(file string, cur []byte, exists bool) (*yaml.Node, error) {
	if !exists {
		return nil, fmt.Errorf("%s %w", file, ErrNotExist)
	}
	if _, err := Parse(file, cur); err != nil {
		return nil, fmt.Errorf("the definition in git is invalid, fix it first: %w", err)
	}
	doc := &yaml.Node{}
	if err := yaml.Unmarshal(cur, doc); err != nil {
		return nil, err
	}
	return doc, nil
}
