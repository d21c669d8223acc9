package gitops

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

// treeSpec is a tree to store: a file's content (string) or a subtree.
type treeSpec map[string]any

// storeTree writes spec into st, entry names as they are, unchecked, as
// git itself stores them.
func storeTree(t *testing.T, st *memory.Storage, spec treeSpec) plumbing.Hash {
	t.Helper()
	tree := &object.Tree{}
	for name, v := range spec {
		switch v := v.(type) {
		case string:
			obj := st.NewEncodedObject()
			obj.SetType(plumbing.BlobObject)
			w, err := obj.Writer()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write([]byte(v)); err != nil {
				t.Fatal(err)
			}
			_ = w.Close()
			h, err := st.SetEncodedObject(obj)
			if err != nil {
				t.Fatal(err)
			}
			tree.Entries = append(tree.Entries, object.TreeEntry{Name: name, Mode: filemode.Regular, Hash: h})
		case treeSpec:
			tree.Entries = append(tree.Entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: storeTree(t, st, v)})
		}
	}
	// NOTE: git's order: a tree sorts as if its name ended in "/".
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(tree.Entries, func(i, j int) bool { return key(tree.Entries[i]) < key(tree.Entries[j]) })
	obj := st.NewEncodedObject()
	if err := tree.Encode(obj); err != nil {
		t.Fatal(err)
	}
	h, err := st.SetEncodedObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// storeCommit writes a commit of spec into a new store.
func storeCommit(t *testing.T, spec treeSpec) (*memory.Storage, *object.Commit) {
	t.Helper()
	st := memory.NewStorage()
	sig := object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(0, 0)}
	c := &object.Commit{Author: sig, Committer: sig, Message: "m", TreeHash: storeTree(t, st, spec)}
	obj := st.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		t.Fatal(err)
	}
	h, err := st.SetEncodedObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	commit, err := object.GetCommit(st, h)
	if err != nil {
		t.Fatal(err)
	}
	return st, commit
}

const defX = "name: x\nhelm: {repo: https://x, chart: x, version: 1.0.0}\n"

// TestReadSnapshotPassesNamesGitAccepts: names git accepts but go-git
// refuses to check out (a Mac's "Icon\r", a tab, "git~1"), anywhere in the
// commit, even in a sibling's folder, do not stop the read.
func TestReadSnapshotPassesNamesGitAccepts(t *testing.T) {
	st, commit := storeCommit(t, treeSpec{
		"addons": treeSpec{"x.yaml": defX},
		"other":  treeSpec{"Icon\r": "", "a\tb.yaml": "", "git~1": treeSpec{"c.yaml": ""}},
		"team-b": treeSpec{"Icon\r": "", "y.yaml": "", "z.yml": "", "README.md": ""},
	})
	s, err := ReadSnapshot(st, commit, "addons", "team-b", "/team-b/", "gone")
	if err != nil {
		t.Fatalf("ReadSnapshot: %v", err)
	}
	if !s.Claimed["x"] {
		t.Fatalf("x not claimed: %v", s.Claimed)
	}
	for _, tc := range []struct {
		folder, name  string
		claims, known bool
	}{
		{"team-b", "y", true, true},
		{"team-b/", "z", true, true},
		{"team-b", "README", false, true},
		{"team-b", "x", false, true},
		{"gone", "y", false, true},
		{"other", "c", false, false},
	} {
		if claims, known := s.ClaimsAt(tc.folder, tc.name); claims != tc.claims || known != tc.known {
			t.Errorf("ClaimsAt(%q, %q) = %v, %v; want %v, %v", tc.folder, tc.name, claims, known, tc.claims, tc.known)
		}
	}
}

// TestReadSnapshotIndexesTheSiblingsFoldersAlone: the YAML files of a
// monorepo outside the folders of the repositories that read it are not
// kept in the snapshot, which every repository caches.
func TestReadSnapshotIndexesTheSiblingsFoldersAlone(t *testing.T) {
	manifests := treeSpec{}
	for i := range 2000 {
		manifests[fmt.Sprintf("m%04d.yaml", i)] = "kind: ConfigMap\n"
	}
	st, commit := storeCommit(t, treeSpec{
		"addons":    treeSpec{"x.yaml": defX},
		"team-b":    treeSpec{"y.yaml": "", "z.yaml": ""},
		"manifests": treeSpec{"apps": manifests},
	})
	s, err := ReadSnapshot(st, commit, "addons", "team-b")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, names := range s.others {
		n += len(names)
	}
	if n != 2 {
		t.Fatalf("the snapshot keeps %d names of other folders, want the 2 of team-b", n)
	}
}
