package gitops

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

// submoduleCommit stores a commit whose tree holds addons/a.yaml and a
// submodule at manifests/upstream, as git records one: an entry of
// another repository's commit, whose files the clone does not hold.
func submoduleCommit(t *testing.T) (*memory.Storage, *object.Commit) {
	t.Helper()
	st := memory.NewStorage()
	put := func(o interface {
		Encode(plumbing.EncodedObject) error
	}) plumbing.Hash {
		t.Helper()
		obj := st.NewEncodedObject()
		if err := o.Encode(obj); err != nil {
			t.Fatal(err)
		}
		h, err := st.SetEncodedObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	blob := st.NewEncodedObject()
	blob.SetType(plumbing.BlobObject)
	w, _ := blob.Writer()
	_, _ = w.Write([]byte("name: a\nhelm: {repo: https://x, chart: a}\n"))
	_ = w.Close()
	a, err := st.SetEncodedObject(blob)
	if err != nil {
		t.Fatal(err)
	}
	addons := put(&object.Tree{Entries: []object.TreeEntry{{Name: "a.yaml", Mode: filemode.Regular, Hash: a}}})
	manifests := put(&object.Tree{Entries: []object.TreeEntry{{Name: "upstream", Mode: filemode.Submodule, Hash: plumbing.NewHash("0123456789abcdef0123456789abcdef01234567")}}})
	root := put(&object.Tree{Entries: []object.TreeEntry{{Name: "addons", Mode: filemode.Dir, Hash: addons}, {Name: "manifests", Mode: filemode.Dir, Hash: manifests}}})
	sig := object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(0, 0)}
	c, err := object.GetCommit(st, put(&object.Commit{Author: sig, Committer: sig, Message: "submodule", TreeHash: root}))
	if err != nil {
		t.Fatal(err)
	}
	return st, c
}

// TestCheckSourceNamesASubmodule: a git.path that is, or goes through, a
// git submodule is refused as one, with what to do, not as a file.
func TestCheckSourceNamesASubmodule(t *testing.T) {
	_, c := submoduleCommit(t)
	root, err := c.Tree()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"manifests/upstream", "manifests/upstream/deploy"} {
		def, err := Parse("addons/a.yaml", []byte("name: a\n\ngit:\n  path: "+p+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		err = CheckSource(def, "addons/a.yaml", CommitTree(root))
		if err == nil || !strings.HasPrefix(err.Error(), `addons/a.yaml:4: git.path: "manifests/upstream" is a git submodule, which Capstan does not follow`) ||
			!strings.Contains(err.Error(), "submodule's own repository") {
			t.Errorf("git.path %s: %v; want it named as a submodule, with what to do", p, err)
		}
	}
}

// TestReadSnapshotNamesASubmoduleFolder: a spec.folder that is, or goes
// through, a submodule cannot be read, and the error says it is one.
func TestReadSnapshotNamesASubmoduleFolder(t *testing.T) {
	st, c := submoduleCommit(t)
	for _, folder := range []string{"manifests/upstream", "manifests/upstream/addons"} {
		_, err := ReadSnapshot(st, c, folder)
		if err == nil || !strings.Contains(err.Error(), `"manifests/upstream" is a git submodule, which Capstan does not follow`) {
			t.Errorf("spec.folder %s: %v; want it named as a submodule", folder, err)
		}
	}
}

// TestDirTreeNamesACheckedOutSubmodule: `capstan validate` over a
// checkout sees a submodule as a folder with a .git file, and refuses a
// git.path through it as the syncer would.
func TestDirTreeNamesACheckedOutSubmodule(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "manifests", "upstream")
	if err := os.MkdirAll(filepath.Join(sub, "deploy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, ".git"), []byte("gitdir: ../../.git/modules/upstream\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	def, err := Parse("addons/a.yaml", []byte("name: a\n\ngit:\n  path: manifests/upstream/deploy\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckSource(def, "addons/a.yaml", DirTree(dir)); err == nil || !strings.Contains(err.Error(), `"manifests/upstream" is a git submodule`) {
		t.Fatalf("got %v; want it named as a submodule", err)
	}
}
