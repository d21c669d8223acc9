package gitops

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// EntryKind is what a path in a repository's tree is.
type EntryKind int

// The kinds of tree entries.
const (
	EntryMissing EntryKind = iota
	EntryFile
	EntryDir
	EntrySymlink
	// EntrySubmodule is a git submodule: a commit of another repository,
	// whose files a clone of this one does not hold.
	EntrySubmodule
)

// submoduleProblem says what to do of a path that is, or goes through, the
// git submodule at prefix: Capstan clones with no submodules, as their
// repositories need credentials and limits of their own, so their files
// are not there to read.
func submoduleProblem(prefix string) string {
	return fmt.Sprintf("%q is a git submodule, which Capstan does not follow: point the Addon (git.url, git.path, git.revision at the submodule's commit) "+
		"or the AddonRepository (spec.url, spec.folder) at the submodule's own repository, or commit its files into this one", prefix)
}

// Tree is a read-only view of one commit of the gitops repository, or of a
// checked-out folder for `capstan validate`.
type Tree interface {
	// Entry says what is at a slash-separated path, and for a symbolic link
	// its target.
	Entry(p string) (EntryKind, string, error)
	// Links lists the symbolic links under a folder: path to target.
	Links(dir string) (map[string]string, error)
}

// CheckSource checks a definition against the commit it came from: a git.path
// of the gitops repository must be a real folder inside it, reached through
// no symbolic link, and holding no symbolic link that leads out of it.
func CheckSource(def *Definition, file string, t Tree) error {
	if def.Git == nil || def.Git.URL != "" {
		return nil
	}
	msg, err := checkFolder(t, path.Clean(def.Git.Path))
	if err != nil {
		return fmt.Errorf("%s: cannot read git.path %q: %w", file, def.Git.Path, err)
	}
	if msg == "" {
		return nil
	}
	return &InvalidError{File: file, Problems: []Problem{{Line: def.gitPathLine, Field: "git.path", Message: msg}}}
}

func checkFolder(t Tree, p string) (string, error) {
	parts := strings.Split(p, "/")
	for i := range parts {
		prefix := strings.Join(parts[:i+1], "/")
		kind, target, err := t.Entry(prefix)
		if err != nil {
			return "", err
		}
		switch kind {
		case EntryMissing:
			return fmt.Sprintf("the folder %q does not exist at this commit: commit the folder with its definition", prefix), nil
		case EntryFile:
			return fmt.Sprintf("%q is a file, not a folder", prefix), nil
		case EntrySubmodule:
			return submoduleProblem(prefix), nil
		case EntrySymlink:
			if escapes(path.Dir(prefix), target) {
				return fmt.Sprintf("%q is a symbolic link that leads out of the repository (to %q): name a real folder inside it", prefix, target), nil
			}
			return fmt.Sprintf("%q is a symbolic link (to %q): name the real folder instead", prefix, target), nil
		}
	}
	links, err := t.Links(p)
	if err != nil {
		return "", err
	}
	for link, target := range links {
		if escapes(path.Dir(link), target) {
			return fmt.Sprintf("the folder holds %q, a symbolic link that leads out of the repository (to %q): remove it", link, target), nil
		}
	}
	return "", nil
}

// escapes reports whether a symbolic link's target, relative to the folder
// that holds the link, leaves the repository.
func escapes(dir, target string) bool {
	if path.IsAbs(target) || filepath.IsAbs(target) {
		return true
	}
	joined := path.Join(dir, target)
	return joined == ".." || strings.HasPrefix(joined, "../")
}

// DirTree is a Tree over a folder on disk, such as a checkout in CI.
type DirTree string

// Entry implements Tree without following symbolic links.
func (d DirTree) Entry(p string) (EntryKind, string, error) {
	full := filepath.Join(string(d), filepath.FromSlash(p))
	fi, err := os.Lstat(full)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return EntryMissing, "", nil
	case err != nil:
		return 0, "", err
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(full)
		return EntrySymlink, filepath.ToSlash(target), err
	case fi.IsDir() && isSubmoduleCheckout(full):
		return EntrySubmodule, "", nil
	case fi.IsDir():
		return EntryDir, "", nil
	default:
		return EntryFile, "", nil
	}
}

// isSubmoduleCheckout reports whether the folder dir is a checked-out git
// submodule, which holds a .git file (not a folder) that points at the
// submodule's repository: the syncer's clone has no such folder.
func isSubmoduleCheckout(dir string) bool {
	fi, err := os.Lstat(filepath.Join(dir, ".git"))
	return err == nil && fi.Mode().IsRegular()
}

// Links implements Tree.
func (d DirTree) Links(dir string) (map[string]string, error) {
	links := map[string]string{}
	root := filepath.Join(string(d), filepath.FromSlash(dir))
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(string(d), p)
		if err != nil {
			return err
		}
		links[filepath.ToSlash(rel)] = filepath.ToSlash(target)
		return nil
	})
	return links, err
}

// ReadDir parses the definitions folder of a checkout on disk exactly as the
// syncer parses it at a commit. root is the repository's root, which git.path
// folders are checked against; folder is relative to it.
func ReadDir(root, folder string) (*Snapshot, error) {
	folder = path.Clean(filepath.ToSlash(folder))
	s := &Snapshot{Claimed: map[string]bool{}, Kept: map[string]bool{}}
	dir := filepath.Join(root, filepath.FromSlash(folder))
	list, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot read the definitions folder: %w", err)
	}
	var entries []folderEntry
	for _, e := range list {
		if e.IsDir() {
			// NOTE: a folder or a checked-out submodule named as a
			// definition is claimed and invalid, as ReadSnapshot
			// reports it at a commit.
			if IsDefinitionFile(e.Name()) {
				entries = append(entries, folderEntry{name: e.Name(), folder: true})
			}
			continue
		}
		full := filepath.Join(dir, e.Name())
		entries = append(entries, folderEntry{
			name:    e.Name(),
			symlink: e.Type()&fs.ModeSymlink != 0,
			open: func() (int64, io.ReadCloser, error) {
				f, err := os.Open(full)
				if err != nil {
					return 0, nil, err
				}
				fi, err := f.Stat()
				if err != nil {
					f.Close()
					return 0, nil, err
				}
				if fi.Size() > MaxFileSize {
					f.Close()
					return fi.Size(), nil, nil
				}
				return fi.Size(), f, nil
			},
			size: func() (int64, error) {
				fi, err := os.Stat(full)
				if err != nil {
					return 0, err
				}
				return fi.Size(), nil
			},
		})
	}
	if err := checkFolderSize(folder, entries); err != nil {
		return nil, err
	}
	collect(s, folder, entries, DirTree(root))
	return s, nil
}
