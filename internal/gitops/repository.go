package gitops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/source"
)

// DefaultFolder is the folder of definition files when none is configured.
const DefaultFolder = "addons"

// CleanFolder is a definitions folder as the syncer reads it: DefaultFolder
// when empty.
func CleanFolder(folder string) string {
	if folder == "" {
		return DefaultFolder
	}
	return path.Clean(strings.TrimSuffix(folder, "/"))
}

// RepositoryKey is a git URL as far as it names a repository: no
// credentials, a lowercase scheme and host, and no trailing slash or .git,
// which git servers answer alike.
func RepositoryKey(raw string) string {
	s := strings.TrimSpace(raw)
	if u, err := url.Parse(s); err == nil && u.Scheme != "" && u.Host != "" {
		u.User = nil
		u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
		u.RawQuery, u.Fragment = "", ""
		s = u.String()
	}
	for {
		t := strings.TrimSuffix(strings.TrimSuffix(s, "/"), ".git")
		if t == s {
			return s
		}
		s = t
	}
}

// Repo is a gitops repository on a remote.
type Repo struct {
	// URL is the repository's URL.
	URL string
	// Auth authenticates to it; nil for none.
	Auth transport.AuthMethod
	// Limits bound a clone; CloneLimits when zero.
	Limits source.Limits
	// Budget is the git budget a clone takes its memory from; nil means
	// the process's (source.ProcessGitBudget).
	Budget *source.GitBudget
}

// budgetOr is b, or the process's git budget when nil.
func budgetOr(b *source.GitBudget) *source.GitBudget {
	if b == nil {
		return source.ProcessGitBudget()
	}
	return b
}

// CloneLimits bound a clone of a gitops repository's branch, in the
// controller's memory. The whole tree of its head comes, not only the
// definitions folder: in a monorepo, that is every team's files, so the
// bounds are five times an Addon's folder's (512 MiB unpacked, 400,000
// objects), there to stop a push of a few KiB that unpacks to gigabytes.
var CloneLimits = source.Limits{MaxUncompressedBytes: 512 << 20, MaxFiles: 100000}

// cloneLimits are r's limits, or CloneLimits.
func (r Repo) cloneLimits() source.Limits {
	if r.Limits.MaxUncompressedBytes > 0 {
		return r.Limits
	}
	return CloneLimits
}

// shown is the URL as messages and the status give it: without the user
// and password a URL may carry, which the status would show to every
// reader and a notification would post.
func (r Repo) shown() string { return netguard.Redact(r.URL) }

// clean takes the URL's user and password out of an error of go-git's or
// Go's, which may quote it, and names an address a redirect led to by its
// origin alone, as a source's error does (netguard.HideAddresses).
func (r Repo) clean(err error) error {
	own, _ := url.Parse(netguard.Redact(r.URL))
	return netguard.RedactError(netguard.HideAddresses(err, own), r.URL)
}

// Head returns the branch to read, the remote's default when branch is
// empty, and the commit at its head, without fetching anything else.
func (r Repo) Head(ctx context.Context, branch string) (string, plumbing.Hash, error) {
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{r.URL}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: r.Auth})
	if err != nil {
		if errors.Is(err, transport.ErrEmptyRemoteRepository) {
			return "", plumbing.ZeroHash, fmt.Errorf("the repository %s has no commits yet: push a first commit", r.shown())
		}
		return "", plumbing.ZeroHash, fmt.Errorf("cannot list the branches of %s: %w", r.shown(), r.clean(err))
	}
	byName := map[plumbing.ReferenceName]*plumbing.Reference{}
	for _, ref := range refs {
		byName[ref.Name()] = ref
	}
	if branch == "" {
		branch, err = defaultBranch(byName)
		if err != nil {
			return "", plumbing.ZeroHash, fmt.Errorf("%s: %w", r.shown(), r.clean(err))
		}
	}
	ref, ok := byName[plumbing.NewBranchReferenceName(branch)]
	if !ok || ref.Type() != plumbing.HashReference {
		return "", plumbing.ZeroHash, fmt.Errorf("the repository %s has no branch %q: create it or set spec.branch to an existing branch", r.shown(), branch)
	}
	return branch, ref.Hash(), nil
}

// defaultBranch finds the branch HEAD points at. Servers that do not
// advertise HEAD's target get the branch with HEAD's commit, main and master first.
func defaultBranch(refs map[plumbing.ReferenceName]*plumbing.Reference) (string, error) {
	head, ok := refs[plumbing.HEAD]
	if !ok {
		return "", errors.New("the remote does not say which branch is its default: set spec.branch")
	}
	if head.Type() == plumbing.SymbolicReference {
		if !head.Target().IsBranch() {
			return "", fmt.Errorf("the remote's HEAD points at %s, not a branch: set spec.branch", head.Target())
		}
		return head.Target().Short(), nil
	}
	var candidates []string
	for name, ref := range refs {
		if name.IsBranch() && ref.Type() == plumbing.HashReference && ref.Hash() == head.Hash() {
			candidates = append(candidates, name.Short())
		}
	}
	sort.Strings(candidates)
	for _, preferred := range []string{"main", "master"} {
		if slices.Contains(candidates, preferred) {
			return preferred, nil
		}
	}
	if len(candidates) == 0 {
		return "", errors.New("the remote's HEAD matches no branch: set spec.branch")
	}
	return candidates[0], nil
}

// Clone fetches the head commit of a branch into memory, without history.
// Its memory is taken from the git budget until release, which the
// caller calls (deferred) once done reading the repository; on error,
// nothing is held and release is nil.
func (r Repo) Clone(ctx context.Context, branch string) (repo *git.Repository, commit *object.Commit, release func(), err error) {
	st := budgetOr(r.Budget).Storage(r.cloneLimits())
	held := false
	defer func() {
		// NOTE: not on err alone: a panic in go-git (a malformed pack)
		// that the caller recovers would keep its bytes for the life of
		// the process, and every later fetch would be refused as busy.
		if !held {
			st.Release()
		}
	}()
	repo, err = git.CloneContext(ctx, st, nil, &git.CloneOptions{
		URL:           r.URL,
		Auth:          r.Auth,
		ReferenceName: plumbing.NewBranchReferenceName(branch),
		SingleBranch:  true,
		Depth:         1,
		NoCheckout:    true,
		Tags:          git.NoTags,
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("cannot fetch branch %q of %s: %w", branch, r.shown(), r.clean(err))
	}
	head, err := repo.Head()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("cannot read the head of %s: %w", r.shown(), r.clean(err))
	}
	commit, err = repo.CommitObject(head.Hash())
	if err != nil {
		return nil, nil, nil, fmt.Errorf("cannot read commit %s of %s: %w", head.Hash(), r.shown(), r.clean(err))
	}
	held = true
	return repo, commit, st.Release, nil
}

// Parsed is a valid definition and the file it came from.
type Parsed struct {
	File       string
	Definition *Definition
}

// Snapshot is the definitions folder at one commit.
type Snapshot struct {
	// Commit is the commit's hash.
	Commit string
	// Definitions are the valid definitions, by file name.
	Definitions []Parsed
	// Invalid are the files that were skipped, with their problems.
	Invalid []capstanv1.InvalidFile
	// Claimed holds the add-on name of every definition file, valid or
	// not: the syncer never deletes those Addons, and another repository
	// reads it as the names this folder defines.
	Claimed map[string]bool
	// Kept holds the names that invalid files declare in their content
	// (name: x in a file renamed from x.yaml) when no file of the folder
	// bears them: the syncer does not delete this repository's own Addon
	// of such a name. It is no claim: another repository's Addon of that
	// name is never handed to this one for it.
	Kept map[string]bool
	// Subfolders names the folder's subfolders that hold definition files,
	// which the syncer does not read, when the folder itself holds none:
	// files moved one level down would otherwise vanish without a word.
	Subfolders []string
	// nested holds, by add-on name, the first definition file of that
	// name in a subfolder of the folder, at any depth (NestedFile).
	nested map[string]string
	// others holds, for each folder that ReadSnapshot was asked to index
	// besides its own, the names of the add-ons whose definition files
	// that folder holds at the commit (ClaimsAt).
	// NOTE: those folders alone, and their top level alone, as the
	// syncer reads a folder: a commit's whole tree, kept in every cached
	// snapshot of a monorepo, would cost far more than the definitions.
	others map[string]map[string]bool
}

// ClaimsAt reports whether the commit holds a definition file of the
// add-on name (name.yaml or name.yml, valid or not) in folder, which need
// not be the snapshot's own: another AddonRepository that reads the same
// branch with another folder claims what this commit holds there. The
// syncer asks before it deletes an Addon, so that a file moved from one
// repository's folder to another's in one commit hands the Addon over
// instead. known is false when the snapshot cannot tell: folder was not
// indexed when it was read (ReadSnapshot's others), or it was read from
// disk (ReadDir); the syncer then neither hands the Addon over nor
// deletes it.
func (s *Snapshot) ClaimsAt(folder, name string) (claims, known bool) {
	names, known := s.others[cleanFolderPath(folder)]
	return names[name], known
}

// NestedFile returns a definition file of the add-on name in a subfolder
// of the snapshot's folder, which the syncer does not read, or "" when the
// commit holds none (or the snapshot was read from disk). The syncer
// deletes such an Addon as any whose file left the folder, and names it
// with that file: a file moved into addons/disabled/ turns its add-on
// off, and one moved down by mistake is found from the status.
func (s *Snapshot) NestedFile(name string) string { return s.nested[name] }

// maxNestedFiles bounds Snapshot.nested, which every cached snapshot holds.
const maxNestedFiles = 10000

// nestedDefinitions names, by add-on name, the definition files in the
// subfolders of dir, at any depth, up to maxNestedFiles. A walk of the
// trees alone reads no file's content; a subtree that cannot be read ends
// it, as the names only say more of an Addon deleted.
func nestedDefinitions(dir *object.Tree, folder string) map[string]string {
	nested := map[string]string{}
	walk := object.NewTreeWalker(dir, true, nil)
	defer walk.Close()
	for len(nested) < maxNestedFiles {
		name, entry, err := walk.Next()
		if err != nil {
			break
		}
		if !strings.Contains(name, "/") || !entry.Mode.IsFile() || !IsDefinitionFile(name) {
			continue
		}
		if n := NameFromFile(name); nested[n] == "" {
			nested[n] = path.Join(folder, name)
		}
	}
	return nested
}

// cleanFolderPath is a folder as a path from the root of a commit's tree.
func cleanFolderPath(folder string) string {
	return path.Clean(strings.Trim(folder, "/"))
}

// maxSubfoldersNamed bounds Snapshot.Subfolders.
const maxSubfoldersNamed = 5

// ReadSnapshot parses every definition file of a folder at a commit. A
// missing folder is an error, never an empty one: a typo in spec.folder, a
// branch or mirror without it, or a commit that renames it would
// otherwise delete every Addon the repository made. A folder that holds
// no definitions (but a README, say) deletes them. The folders others
// (those of the other AddonRepositories that read the same branch) are
// indexed for ClaimsAt.
func ReadSnapshot(objects storer.EncodedObjectStorer, commit *object.Commit, folder string, others ...string) (*Snapshot, error) {
	folder = cleanFolderPath(folder)
	s := &Snapshot{Commit: commit.Hash.String(), Claimed: map[string]bool{}, Kept: map[string]bool{}}
	root, err := commit.Tree()
	if err != nil {
		return nil, fmt.Errorf("cannot read the tree of commit %s: %w", commit.Hash, err)
	}
	dir := root
	if folder != "." {
		entry, err := root.FindEntry(folder)
		if sub, ok := submoduleOn(root, folder); ok {
			return nil, fmt.Errorf("spec.folder %q at commit %s: %s", folder, ShortCommit(commit.Hash.String()), submoduleProblem(sub))
		}
		switch {
		case errors.Is(err, object.ErrEntryNotFound) || errors.Is(err, object.ErrDirectoryNotFound):
			return nil, fmt.Errorf("there is no folder %q at commit %s: check spec.folder and spec.branch; "+
				"to remove every add-on of the repository, delete their files and leave another file (a README) in the folder",
				folder, ShortCommit(commit.Hash.String()))
		case err != nil:
			return nil, fmt.Errorf("cannot read folder %q at commit %s: %w", folder, commit.Hash, err)
		case entry.Mode != filemode.Dir:
			return nil, fmt.Errorf("%q at commit %s is not a folder: point spec.folder at the folder of definitions", folder, commit.Hash)
		}
		if dir, err = root.Tree(folder); err != nil {
			return nil, fmt.Errorf("cannot read folder %q at commit %s: %w", folder, commit.Hash, err)
		}
	}
	var entries []folderEntry
	for _, e := range dir.Entries {
		if e.Mode == filemode.Dir || e.Mode == filemode.Submodule {
			if IsDefinitionFile(e.Name) {
				// NOTE: claimed, so that its Addon is not deleted.
				entries = append(entries, folderEntry{name: e.Name, folder: true})
			}
			continue
		}
		e := e
		entries = append(entries, folderEntry{
			name:    e.Name,
			symlink: e.Mode == filemode.Symlink,
			size: func() (int64, error) {
				return objects.EncodedObjectSize(e.Hash)
			},
			open: func() (int64, io.ReadCloser, error) {
				f, err := dir.TreeEntryFile(&e)
				if err != nil {
					return 0, nil, err
				}
				if f.Size > MaxFileSize {
					return f.Size, nil, nil
				}
				rd, err := f.Reader()
				return f.Size, rd, err
			},
		})
	}
	if err := checkFolderSize(folder, entries); err != nil {
		return nil, fmt.Errorf("at commit %s: %w", ShortCommit(commit.Hash.String()), err)
	}
	collect(s, folder, entries, gitTree{root: root})
	if len(s.Claimed) == 0 {
		s.Subfolders = subfoldersWithDefinitions(dir, folder)
	}
	s.nested = nestedDefinitions(dir, folder)
	s.others = map[string]map[string]bool{}
	for _, o := range others {
		o = cleanFolderPath(o)
		if _, done := s.others[o]; done {
			continue
		}
		if s.others[o], err = definitionNames(objects, root, o); err != nil {
			return nil, fmt.Errorf("cannot read folder %q at commit %s: %w", o, commit.Hash, err)
		}
	}
	return s, nil
}

// definitionNames names the add-ons whose definition files folder holds
// at its top level, where the syncer reads them: an entry named as a
// definition file is, whatever it is (a folder named so is claimed too).
// A folder the tree does not hold defines none.
// NOTE: the trees are read entry by entry, not with go-git's TreeWalker
// or FindEntry, which refuse names git accepts (a Mac's "Icon\r"): an
// odd name anywhere in a monorepo must not stop the sync of every
// repository on it. Every tree that cannot be read is an error, as a name
// left out could make the syncer delete an Addon another repository's
// folder defines.
func definitionNames(objects storer.EncodedObjectStorer, root *object.Tree, folder string) (map[string]bool, error) {
	dir := root
	if folder != "." {
		for _, part := range strings.Split(folder, "/") {
			i := slices.IndexFunc(dir.Entries, func(e object.TreeEntry) bool { return e.Name == part })
			if i < 0 || dir.Entries[i].Mode != filemode.Dir {
				return map[string]bool{}, nil
			}
			sub, err := object.GetTree(objects, dir.Entries[i].Hash)
			if err != nil {
				return nil, err
			}
			dir = sub
		}
	}
	names := map[string]bool{}
	for _, e := range dir.Entries {
		if IsDefinitionFile(e.Name) {
			names[NameFromFile(e.Name)] = true
		}
	}
	return names, nil
}

// subfoldersWithDefinitions names, in the order of the tree, the
// subfolders of dir that hold a definition file at any depth. A subtree
// that cannot be read is passed over: the names are a hint, not a rule.
func subfoldersWithDefinitions(dir *object.Tree, folder string) []string {
	var names []string
	for _, e := range dir.Entries {
		if e.Mode != filemode.Dir || len(names) == maxSubfoldersNamed {
			continue
		}
		sub, err := dir.Tree(e.Name)
		if err != nil {
			continue
		}
		// NOTE: a walk of the trees alone, which reads no file's content.
		walk := object.NewTreeWalker(sub, true, nil)
		for {
			name, entry, err := walk.Next()
			if err != nil {
				break
			}
			if entry.Mode.IsFile() && IsDefinitionFile(name) {
				names = append(names, path.Join(folder, e.Name)+"/")
				break
			}
		}
		walk.Close()
	}
	return names
}

// folderEntry is one file of the definitions folder, in git or on disk.
type folderEntry struct {
	name    string
	symlink bool
	// folder marks a folder or a submodule named as a definition file is.
	folder bool
	// open returns the file's size and, when it is at most MaxFileSize, its content.
	open func() (int64, io.ReadCloser, error)
	// size returns the file's size, without its content.
	size func() (int64, error)
}

// checkFolderSize refuses a folder that holds more than MaxFolderFiles
// definition files, or whose definition files hold more than
// MaxFolderSize bytes in all, before any is read: what would be parsed
// and kept is bounded, whatever the files. Every entry named as a
// definition file counts against MaxFolderFiles, since each is claimed
// and kept, valid or not. Against MaxFolderSize, files larger than
// MaxFileSize are not read (they are invalid), so they count for nothing,
// and nor do symbolic links, which are refused.
func checkFolderSize(folder string, entries []folderEntry) error {
	named := 0
	for _, e := range entries {
		if IsDefinitionFile(e.name) {
			named++
		}
	}
	if named > MaxFolderFiles {
		return folderTooMany(folder, named)
	}
	var total int64
	files := 0
	for _, e := range entries {
		if e.folder || e.symlink || e.size == nil || !IsDefinitionFile(e.name) {
			continue
		}
		n, err := e.size()
		if err != nil {
			return fmt.Errorf("cannot read the size of %s: %w", path.Join(folder, e.name), err)
		}
		if n > MaxFileSize {
			continue
		}
		total += n
		files++
	}
	if total > MaxFolderSize {
		return folderTooLarge(folder, files, total)
	}
	return nil
}

// collect parses the definition files of a folder into a snapshot, the same
// way for the syncer and for `capstan validate`.
//
// An invalid file claims the add-on of its file's name, and keeps (Kept)
// the one its content names, when no file of the folder bears that name.
// NOTE: a file renamed in git (git mv grafana.yaml 10-grafana.yaml, to
// order the files) still says name: grafana, and is invalid for it; were
// grafana unclaimed, the syncer would delete its Addon (and, under the
// deletion policy Delete, uninstall it) for a file that is still in git,
// and a rename of every file would delete every Addon.
func collect(s *Snapshot, folder string, entries []folderEntry, tree Tree) {
	byName := map[string][]string{}
	var parsed []Parsed
	invalid := map[string]capstanv1.InvalidFile{}
	// declared holds, for each invalid file whose content names another
	// add-on than its file's name, that name.
	declared := map[string]string{}
	for _, e := range entries {
		if !IsDefinitionFile(e.name) {
			continue
		}
		file := path.Join(folder, e.name)
		name := NameFromFile(e.name)
		byName[name] = append(byName[name], file)
		s.Claimed[name] = true
		def, named, err := readDefinition(e, file, tree)
		if err != nil {
			invalid[file] = InvalidFile(file, err)
			if named != "" && named != name {
				declared[file] = named
			}
			continue
		}
		parsed = append(parsed, Parsed{File: file, Definition: def})
	}
	for file, named := range declared {
		if len(byName[named]) > 0 {
			continue // A file of that name defines it.
		}
		// NOTE: kept, not claimed: a name in a file's content is no
		// definition another repository could hand its Addon over for.
		s.Kept[named] = true
		f := invalid[file]
		// NOTE: first, as the status keeps a file's first problems.
		f.Message = fmt.Sprintf("%s: an Addon %q of this repository, if any, is kept as it is until the file is fixed "+
			"(a file's name is its add-on's name: to rename an add-on, see the gitops docs)\n%s", file, named, f.Message)
		invalid[file] = f
	}
	// Two files for one add-on: both are reported, and neither wins.
	for name, files := range byName {
		if len(files) < 2 {
			continue
		}
		for _, f := range files {
			invalid[f] = capstanv1.InvalidFile{Path: f, Message: fmt.Sprintf("%s: the add-on %q is defined by %s: keep one file", f, name, strings.Join(files, " and "))}
		}
	}
	for _, p := range parsed {
		if _, bad := invalid[p.File]; !bad {
			s.Definitions = append(s.Definitions, p)
		}
	}
	sort.Slice(s.Definitions, func(i, j int) bool { return s.Definitions[i].File < s.Definitions[j].File })
	for _, f := range invalid {
		s.Invalid = append(s.Invalid, f)
	}
	sort.Slice(s.Invalid, func(i, j int) bool { return s.Invalid[i].Path < s.Invalid[j].Path })
}

// readDefinition reads and checks one definition file. When it is invalid,
// named is the add-on name its content declares, if it reads as one.
func readDefinition(e folderEntry, file string, tree Tree) (def *Definition, named string, err error) {
	if e.symlink {
		return nil, "", &InvalidError{File: file, Problems: []Problem{{Message: "the file is a symbolic link: commit the definition itself"}}}
	}
	if e.folder {
		return nil, "", &InvalidError{File: file, Problems: []Problem{{Message: "this is a folder or a submodule: a definition is one YAML file"}}}
	}
	size, rd, err := e.open()
	if err != nil {
		return nil, "", fmt.Errorf("%s: cannot read the file: %w", file, err)
	}
	if rd == nil {
		return nil, "", tooLarge(file, size)
	}
	defer rd.Close()
	data, err := io.ReadAll(io.LimitReader(rd, MaxFileSize+1))
	if err != nil {
		return nil, "", fmt.Errorf("%s: cannot read the file: %w", file, err)
	}
	if def, err = Parse(file, data); err == nil {
		err = CheckSource(def, file, tree)
	}
	if err != nil {
		return nil, declaredName(data), err
	}
	return def, "", nil
}

// declaredName is the add-on name that the content of a definition file
// declares, or "" when it declares none that could name an Addon.
func declaredName(data []byte) string {
	name, err := definitionName(data)
	if err != nil || !dnsLabel.MatchString(name) || len(name) > maxAddonName {
		return ""
	}
	return name
}

func tooLarge(file string, size int64) error {
	return &InvalidError{File: file, Problems: []Problem{{Message: fmt.Sprintf("the file is %d bytes, more than the limit of %d: a definition is a short YAML file", size, MaxFileSize)}}}
}

// InvalidFile turns a parse error into the status entry of a skipped file.
func InvalidFile(file string, err error) capstanv1.InvalidFile {
	f := capstanv1.InvalidFile{Path: file, Message: err.Error()}
	var inv *InvalidError
	if errors.As(err, &inv) && len(inv.Problems) > 0 {
		f.Line = int32(inv.Problems[0].Line)
	}
	return f
}

// submoduleOn returns the first folder of the slash-separated path p, or
// p itself, that is a git submodule in the tree root.
func submoduleOn(root *object.Tree, p string) (string, bool) {
	parts := strings.Split(p, "/")
	for i := range parts {
		prefix := strings.Join(parts[:i+1], "/")
		e, err := root.FindEntry(prefix)
		if err != nil || e.Mode == filemode.Submodule {
			return prefix, err == nil
		}
	}
	return "", false
}

// gitTree is a Tree over one commit's tree.
type gitTree struct {
	root *object.Tree
}

// CommitTree is the Tree of one commit, whose root tree is root: what
// CheckSource checks a definition against, as the syncer checks it at the
// commit the definition came from.
func CommitTree(root *object.Tree) Tree {
	return gitTree{root: root}
}

// Entry implements Tree.
func (t gitTree) Entry(p string) (EntryKind, string, error) {
	e, err := t.root.FindEntry(p)
	switch {
	case errors.Is(err, object.ErrEntryNotFound) || errors.Is(err, object.ErrDirectoryNotFound):
		return EntryMissing, "", nil
	case err != nil:
		return 0, "", err
	case e.Mode == filemode.Dir:
		return EntryDir, "", nil
	case e.Mode == filemode.Symlink:
		target, err := t.linkTarget(p, e)
		return EntrySymlink, target, err
	case e.Mode == filemode.Submodule:
		return EntrySubmodule, "", nil
	default:
		return EntryFile, "", nil
	}
}

func (t gitTree) linkTarget(p string, e *object.TreeEntry) (string, error) {
	f, err := t.root.TreeEntryFile(e)
	if err != nil {
		return "", fmt.Errorf("cannot read the symbolic link %q: %w", p, err)
	}
	if f.Size > 4096 {
		return "", fmt.Errorf("the symbolic link %q is %d bytes long", p, f.Size)
	}
	return f.Contents()
}

// Links implements Tree.
func (t gitTree) Links(dir string) (map[string]string, error) {
	sub, err := t.root.Tree(dir)
	if err != nil {
		return nil, err
	}
	links := map[string]string{}
	w := object.NewTreeWalker(sub, true, nil)
	defer w.Close()
	for {
		name, e, err := w.Next()
		if errors.Is(err, io.EOF) {
			return links, nil
		}
		if err != nil {
			return nil, err
		}
		if e.Mode != filemode.Symlink {
			continue
		}
		target, err := t.linkTarget(path.Join(dir, name), &e)
		if err != nil {
			return nil, err
		}
		links[path.Join(dir, name)] = target
	}
}
