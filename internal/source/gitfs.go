package source

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"
)

// maxLinkHops bounds symlink resolution, as the kernel's ELOOP does.
const maxLinkHops = 40

// ErrLinkLeavesTree is returned when a symlink points outside the tree.
var ErrLinkLeavesTree = errors.New("symlink leaves the repository tree")

// memNode is a file, a folder or a symlink of a memFS.
type memNode struct {
	name    string // base name
	data    []byte // file content
	link    string // symlink target
	mode    fs.FileMode
	entries []fs.DirEntry // folder entries, sorted by name
}

func (n *memNode) isDir() bool  { return n.mode.IsDir() }
func (n *memNode) isLink() bool { return n.mode&fs.ModeSymlink != 0 }

// memFS is a read-only fs.FS of a git tree. Symlinks inside the tree are
// followed when a path is opened; one that leaves the tree is refused.
type memFS struct {
	nodes map[string]*memNode // by slash path; "." is the root
}

var _ fs.ReadLinkFS = (*memFS)(nil)

func newMemFS() *memFS {
	return &memFS{nodes: map[string]*memNode{".": {name: ".", mode: fs.ModeDir | 0o555}}}
}

func (m *memFS) addDir(p string) {
	if _, ok := m.nodes[p]; ok {
		return
	}
	m.addDir(path.Dir(p))
	m.nodes[p] = &memNode{name: path.Base(p), mode: fs.ModeDir | 0o555}
}

func (m *memFS) addFile(p string, data []byte, perm fs.FileMode) {
	m.addDir(path.Dir(p))
	m.nodes[p] = &memNode{name: path.Base(p), data: data, mode: perm}
}

func (m *memFS) addLink(p, target string) {
	m.addDir(path.Dir(p))
	m.nodes[p] = &memNode{name: path.Base(p), link: target, mode: fs.ModeSymlink | 0o777}
}

// finish fills in the folder listings.
func (m *memFS) finish() {
	for p, n := range m.nodes {
		if p == "." {
			continue
		}
		parent := m.nodes[path.Dir(p)]
		parent.entries = append(parent.entries, fs.FileInfoToDirEntry(nodeInfo{n}))
	}
	for _, n := range m.nodes {
		sort.Slice(n.entries, func(i, j int) bool { return n.entries[i].Name() < n.entries[j].Name() })
	}
}

// resolve follows symlinks in every element of name and returns the node.
func (m *memFS) resolve(op, name string) (*memNode, error) {
	_, n, err := m.resolvePath(op, name)
	return n, err
}

// resolvePath is resolve that also returns the node's path in the tree.
func (m *memFS) resolvePath(op, name string) (string, *memNode, error) {
	if !fs.ValidPath(name) {
		return "", nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return ".", m.nodes["."], nil
	}
	todo := strings.Split(name, "/")
	cur := "."
	for hops := 0; len(todo) > 0; {
		next := path.Join(cur, todo[0])
		todo = todo[1:]
		n, ok := m.nodes[next]
		if !ok {
			return "", nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
		}
		if n.isLink() {
			hops++
			if hops > maxLinkHops {
				return "", nil, &fs.PathError{Op: op, Path: name, Err: errors.New("too many levels of symlinks")}
			}
			if path.IsAbs(n.link) {
				return "", nil, &fs.PathError{Op: op, Path: name, Err: fmt.Errorf("%w: %s points to %s", ErrLinkLeavesTree, next, n.link)}
			}
			target := path.Join(path.Dir(next), n.link)
			if target == ".." || strings.HasPrefix(target, "../") {
				return "", nil, &fs.PathError{Op: op, Path: name, Err: fmt.Errorf("%w: %s points to %s", ErrLinkLeavesTree, next, n.link)}
			}
			rest := todo
			todo = nil
			cur = "."
			if target != "." {
				todo = strings.Split(target, "/")
			}
			todo = append(todo, rest...)
			continue
		}
		if len(todo) > 0 && !n.isDir() {
			return "", nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
		}
		cur = next
	}
	return cur, m.nodes[cur], nil
}

// Open implements fs.FS.
func (m *memFS) Open(name string) (fs.File, error) {
	n, err := m.resolve("open", name)
	if err != nil {
		return nil, err
	}
	if n.isDir() {
		return &memDir{node: n, path: name}, nil
	}
	return &memFile{node: n, r: bytes.NewReader(n.data)}, nil
}

// ReadFile implements fs.ReadFileFS.
func (m *memFS) ReadFile(name string) ([]byte, error) {
	n, err := m.resolve("read", name)
	if err != nil {
		return nil, err
	}
	if n.isDir() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("is a directory")}
	}
	return bytes.Clone(n.data), nil
}

// ReadDir implements fs.ReadDirFS.
func (m *memFS) ReadDir(name string) ([]fs.DirEntry, error) {
	n, err := m.resolve("readdir", name)
	if err != nil {
		return nil, err
	}
	if !n.isDir() {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	return append([]fs.DirEntry(nil), n.entries...), nil
}

// Stat implements fs.StatFS.
func (m *memFS) Stat(name string) (fs.FileInfo, error) {
	n, err := m.resolve("stat", name)
	if err != nil {
		return nil, err
	}
	return nodeInfo{n}, nil
}

// Lstat implements fs.ReadLinkFS: name's folders are resolved, its last
// element is not.
func (m *memFS) Lstat(name string) (fs.FileInfo, error) {
	n, err := m.lstat("lstat", name)
	if err != nil {
		return nil, err
	}
	return nodeInfo{n}, nil
}

// ReadLink implements fs.ReadLinkFS, so that a walk can tell where a link
// points and find a link to a folder that holds it.
func (m *memFS) ReadLink(name string) (string, error) {
	n, err := m.lstat("readlink", name)
	if err != nil {
		return "", err
	}
	if !n.isLink() {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
	}
	return n.link, nil
}

// lstat returns the node of name without following a link at its end.
func (m *memFS) lstat(op, name string) (*memNode, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	dir, base := path.Split(name)
	if dir == "" || name == "." {
		if n, ok := m.nodes[name]; ok {
			return n, nil
		}
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	parent, n, err := m.resolvePath(op, strings.TrimSuffix(dir, "/"))
	if err != nil {
		return nil, err
	}
	if !n.isDir() {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	if n, ok := m.nodes[path.Join(parent, base)]; ok {
		return n, nil
	}
	return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
}

type nodeInfo struct{ n *memNode }

func (i nodeInfo) Name() string { return i.n.name }
func (i nodeInfo) Size() int64 {
	if i.n.isLink() {
		return int64(len(i.n.link))
	}
	return int64(len(i.n.data))
}
func (i nodeInfo) Mode() fs.FileMode  { return i.n.mode }
func (i nodeInfo) ModTime() time.Time { return time.Time{} }
func (i nodeInfo) IsDir() bool        { return i.n.isDir() }
func (i nodeInfo) Sys() any           { return nil }

type memFile struct {
	node *memNode
	r    *bytes.Reader
}

func (f *memFile) Stat() (fs.FileInfo, error) { return nodeInfo{f.node}, nil }
func (f *memFile) Read(b []byte) (int, error) { return f.r.Read(b) }
func (f *memFile) Seek(off int64, whence int) (int64, error) {
	return f.r.Seek(off, whence)
}
func (f *memFile) ReadAt(b []byte, off int64) (int, error) { return f.r.ReadAt(b, off) }
func (f *memFile) Close() error                            { return nil }

type memDir struct {
	node *memNode
	path string
	off  int
}

func (d *memDir) Stat() (fs.FileInfo, error) { return nodeInfo{d.node}, nil }
func (d *memDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.path, Err: errors.New("is a directory")}
}
func (d *memDir) Close() error { return nil }

// ReadDir implements fs.ReadDirFile.
func (d *memDir) ReadDir(n int) ([]fs.DirEntry, error) {
	left := d.node.entries[d.off:]
	if n <= 0 {
		d.off += len(left)
		return append([]fs.DirEntry(nil), left...), nil
	}
	if len(left) == 0 {
		return nil, io.EOF
	}
	if n > len(left) {
		n = len(left)
	}
	d.off += n
	return append([]fs.DirEntry(nil), left[:n]...), nil
}
